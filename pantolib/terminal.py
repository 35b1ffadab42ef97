"""The person's terminal: what may reach it, and whether to colour it.

Every piece of text that comes from a model, a tool or a server and is bound
for a terminal goes through `visible()`: control characters and escape
sequences are shown, not executed, so a reply cannot move the cursor, clear
a line, retitle the window or write the clipboard. Newline and tab are kept.
"""
import os
import re

# C0 controls but \t and \n, DEL, C1 controls, and the Unicode format
# characters that reorder or hide text (bidi overrides and isolates, line and
# paragraph separators, zero-width joiners are left: emoji need them).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


def _show(m):
    c = m.group()
    n = ord(c)
    if n < 0x20:
        return "^" + chr(n + 0x40)      # ESC -> ^[, CR -> ^M
    if n == 0x7f:
        return "^?"
    if n <= 0x9f:
        return f"\\x{n:02x}"          # 8-bit CSI 0x9b -> \x9b
    return f"<U+{n:04X}>"


def visible(text):
    """Text with every control character made visible (newline and tab kept)."""
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(_show, text)


def visible_line(text):
    """visible(), and newlines and tabs shown as spaces: one line for a table cell."""
    return visible(text).replace("\n", " ").replace("\t", " ")


def no_color(env=None):
    """NO_COLOR set to anything but the empty string (no-color.org)."""
    env = os.environ if env is None else env
    return bool(env.get("NO_COLOR"))


def styled(stream, env=None):
    """Whether escape sequences (colour, bold, dim) may be written to stream."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return tty and not no_color(env)
