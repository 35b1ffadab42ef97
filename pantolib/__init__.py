"""panto: a coding agent for the terminal, made of JSON Lines filters."""

__version__ = "0.1.0"
