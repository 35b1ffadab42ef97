"""Server-sent events framed over bytes, as the WHATWG HTML standard says.

Lines end in LF, CR or CRLF (a CR at the end of one network read and the LF
at the start of the next are one line end); lines starting with `:` are
comments; one space after `field:` is dropped; several `data:` lines of one
event are joined with LF; an empty line dispatches the event; an event
still incomplete when the stream ends is discarded. Framing is done on
bytes: LF and CR never occur inside a multi-byte UTF-8 sequence, so a
character cut across reads is whole again once its line is, and text such
as U+2028 is never taken for a line end (no `str.splitlines` anywhere).

`data` is handed on as bytes (orjson parses bytes directly); `event` is a
str ("message" when the server named none). A line that arrives in many
reads is kept as a list of pieces and joined once, when its end arrives, so
the work stays linear in its length.
"""

_BOM = b"\xef\xbb\xbf"


class Event:
    __slots__ = ("event", "data")

    def __init__(self, event, data):
        self.event, self.data = event, data

    def __repr__(self):
        return f"Event({self.event!r}, {self.data!r})"


class Parser:
    """Feed it byte chunks in arrival order; it returns the events completed."""

    def __init__(self):
        self._buf = b""           # the start of an unfinished line ...
        self._more = []           # ... and the pieces of it that came after
        self._cr = False          # the last chunk ended in CR: a leading LF is its pair
        self._start = True        # a UTF-8 BOM may open the stream
        self._event = ""
        self._data = []

    def feed(self, chunk):
        if not chunk:
            return []
        if self._cr:
            self._cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if b"\r" in chunk:
            self._cr = chunk[-1:] == b"\r"
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if (self._buf or self._more) and b"\n" not in chunk:
            self._more.append(chunk)  # still inside one line: join nothing yet
            return []
        if self._more:
            buf = b"".join([self._buf, *self._more, chunk])
            self._more = []
        else:
            buf = self._buf + chunk if self._buf else chunk
        if self._start:
            if len(buf) < 3 and _BOM.startswith(buf):
                self._buf = buf
                return []
            self._start = False
            if buf.startswith(_BOM):
                buf = buf[3:]
        lines = buf.split(b"\n")
        self._buf = lines.pop()
        out = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    out.append(Event(self._event or "message", b"\n".join(data)))
                    data = self._data = []
                self._event = ""
                continue
            if line[0] == 58:  # b":" -- a comment (keep-alive)
                continue
            name, colon, value = line.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                data.append(value)
            elif name == b"event":
                self._event = value.decode("utf-8", "replace")
            # id and retry matter for reconnecting, which a one-shot request never does
        return out

    def close(self):
        """End of stream: an unfinished event is discarded (WHATWG); nothing to return."""
        self._buf, self._more, self._data, self._event = b"", [], [], ""
        return []


def events(chunks):
    """Iterate over the events of an iterable of byte chunks."""
    p = Parser()
    for chunk in chunks:
        yield from p.feed(chunk)
