"""The errors panto's library raises; `pantolib.cli` turns them into one line."""


class PantoError(Exception):
    """A failure the user can act on: printed as `panto-X: message`, exit 1."""


class UsageError(PantoError):
    """The command line is wrong: exit 2."""


class SessionError(PantoError):
    """A stream or session file breaks the format; names FILE:LINE when known."""

    def __init__(self, message, file=None, line=None):
        self.message, self.file, self.line = message, file, line
        where = ""
        if file is not None:
            where = f"{file}:{line}: " if line is not None else f"{file}: "
        super().__init__(where + message)

    def __reduce__(self):   # sent back whole from a worker process (jobs.py)
        return (type(self), (self.message, self.file, self.line))


class ProviderError(PantoError):
    """The model's API failed: HTTP status, connection, timeout or a bad stream."""
