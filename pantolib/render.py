"""The reply as it streams, shown on stderr for a person."""
from pantolib import secrets, terminal


class Live:
    """The reply as it streams, on stderr: text as is, thinking dimmed.

    Every piece of model text goes through terminal.visible() (a reply
    cannot move the cursor, retitle the window or write the clipboard), and
    through secrets.Holdback: a tail that could be the start of an API key
    is held back until the next piece shows it is not one."""

    DIM, RESET = terminal.DIM.encode(), terminal.RESET.encode()

    def __init__(self, err, keys, dim):
        self.err, self.dim = err, dim
        self.hold = secrets.Holdback(secrets.ordered(keys))
        self.buf, self.mode, self.last = [], None, "\n"

    def _emit(self, text):
        if text:
            self.buf.append(terminal.visible(text).encode("utf-8", "replace"))
            self.last = text[-1]

    def _put(self, mode, s):
        if mode != self.mode:
            self._emit(self.hold.flush())
            if self.mode == "thinking" and self.dim:
                self.buf.append(self.RESET)
            if self.mode is not None and self.last != "\n":
                self.buf.append(b"\n")
                self.last = "\n"
            if mode == "thinking" and self.dim:
                self.buf.append(self.DIM)
            self.mode = mode
        self._emit(self.hold.feed(s))

    def text(self, s):
        self._put("text", s)

    def thinking(self, s):
        self._put("thinking", s)

    def note(self, message):
        self.end()
        self._emit(message + "\n")
        self.flush()

    def flush(self):
        if self.buf:
            self.err.flush()
            self.err.buffer.write(b"".join(self.buf))
            self.err.buffer.flush()
            self.buf.clear()

    def end(self):
        self._emit(self.hold.flush())
        if self.mode == "thinking" and self.dim:
            self.buf.append(self.RESET)
        if self.last != "\n":
            self.buf.append(b"\n")
            self.last = "\n"
        self.mode = None
        self.flush()
