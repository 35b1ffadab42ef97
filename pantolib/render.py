"""The reply as it streams, shown on stderr for a person."""


class Live:
    """The reply as it streams, on stderr: text as is, thinking dimmed. A tail
    that could be the start of an API key is held back until it cannot be."""

    DIM, RESET = b"\x1b[2m", b"\x1b[0m"

    def __init__(self, err, secrets, dim):
        self.err, self.dim = err, dim
        self.keys = [k.encode() for k in secrets]
        self.buf, self.pending, self.mode, self.last = [], b"", None, b"\n"

    def _put(self, mode, s):
        if mode != self.mode:
            self._release(everything=True)
            if self.mode == "thinking" and self.dim:
                self.buf.append(self.RESET)
            if self.mode is not None and self.last != b"\n":
                self.buf.append(b"\n")
                self.last = b"\n"
            if mode == "thinking" and self.dim:
                self.buf.append(self.DIM)
            self.mode = mode
        b = s.encode("utf-8", "replace")
        if b:
            self.pending += b
            self.last = b[-1:]

    def _release(self, everything=False):
        data = self.pending
        if not data:
            return
        hold = 0
        for k in self.keys:
            data = data.replace(k, b"[redacted]")
        if not everything:
            for k in self.keys:
                for n in range(min(len(k) - 1, len(data)), hold, -1):
                    if data.endswith(k[:n]):
                        hold = n
                        break
        self.buf.append(data[:len(data) - hold])
        self.pending = data[len(data) - hold:]

    def text(self, s):
        self._put("text", s)

    def thinking(self, s):
        self._put("thinking", s)

    def note(self, message):
        self.end()
        self.buf.append(message.encode("utf-8", "replace") + b"\n")
        self.flush()

    def tool_uses(self, content):
        for b in content:
            if b["type"] == "toolUse":
                args = b["input"] if len(b["input"]) <= 200 else b["input"][:200] + "…"
                self._put("tool", f"→ {b['name']} {args}\n")

    def flush(self):
        self._release()
        if self.buf:
            self.err.flush()
            self.err.buffer.write(b"".join(self.buf))
            self.err.buffer.flush()
            self.buf.clear()

    def end(self):
        self._release(everything=True)
        if self.mode == "thinking" and self.dim:
            self.buf.append(self.RESET)
        if self.last != b"\n":
            self.buf.append(b"\n")
            self.last = b"\n"
        self.mode = None
        self.flush()
