"""read: the text of a file, by lines.

Only regular files are read (a FIFO or a device is refused before anything
blocks on it), and never more than the cap is held in memory: the lines
before `offset` are skipped and counted in chunks, then at most CAP + 1
bytes are read from there.
"""
import os

from pantolib.tools.common import CAP, ToolError, open_regular, resolve

DEFAULT_LIMIT = 2000
CHUNK = 1 << 20
SCAN = 64 << 20          # bytes of a file scanned to count its lines; past that "at least N"

SCHEMA = {
    "name": "read",
    "description": (
        "Read a text file. Returns its lines from `offset` (1-based, default 1), "
        f"at most `limit` lines (default {DEFAULT_LIMIT}) and at most 50 KB; a note at "
        "the end says how to read the rest."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File to read, relative to the working directory or absolute."},
            "offset": {"type": "integer", "description": "First line to return, 1-based (default 1)."},
            "limit": {"type": "integer", "description": f"Number of lines to return (default {DEFAULT_LIMIT})."},
        },
        "required": ["path"],
    },
}


def _line_start(fd, offset):
    """The byte position where line `offset` starts, or None past the end."""
    line, pos = 1, 0
    while line < offset:
        chunk = os.pread(fd, CHUNK, pos)
        if not chunk:
            return None
        count = chunk.count(b"\n")
        if line + count < offset:
            line += count
            pos += len(chunk)
            continue
        i = -1
        while line < offset:
            i = chunk.index(b"\n", i + 1)
            line += 1
        return pos + i + 1
    return pos


def _count_lines(fd):
    """(lines, exact): the file's lines, counted over at most SCAN bytes."""
    n, pos, last = 0, 0, b"\n"
    while pos < SCAN:
        chunk = os.pread(fd, CHUNK, pos)
        if not chunk:
            return n + (last != b"\n"), True
        n += chunk.count(b"\n")
        pos += len(chunk)
        last = chunk[-1:]
    return n, False


def _pread_full(fd, size, pos):
    parts, got = [], 0
    while got < size:
        chunk = os.pread(fd, size - got, pos + got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def run(args, cwd, timeout=None):
    shown = args["path"]
    path = resolve(shown, cwd)
    offset = args.get("offset") or 1
    limit = args.get("limit") or DEFAULT_LIMIT
    if offset < 1 or limit < 1:
        raise ToolError("'offset' and 'limit' must be at least 1")
    fd = open_regular(path, shown)
    try:
        return _read(fd, shown, offset, limit), False
    finally:
        os.close(fd)


def _read(fd, shown, offset, limit):
    size = os.fstat(fd).st_size
    if b"\0" in os.pread(fd, 8192, 0):
        raise ToolError(f"'{shown}' is a binary file ({size} bytes)")
    start = _line_start(fd, offset)
    region = b"" if start is None else _pread_full(fd, CAP + 1, start)
    if not region:
        n, exact = _count_lines(fd)
        if n == 0 and offset == 1:
            return "(empty file)"
        raise ToolError(f"'offset' {offset} is past the end of '{shown}' ({n} lines)")
    eof = len(region) <= CAP
    pieces = region.split(b"\n")
    if eof:
        if pieces[-1] == b"":
            pieces.pop()
    else:
        pieces.pop()   # the line the cap cut; the next read starts with it
    out, used, last = [], 0, offset - 1
    if not pieces:     # one line longer than the cap
        out.append(region[:CAP].decode("utf-8", "ignore") + " [line cut at 50 KB]")
        last = offset
    for piece in pieces[:limit]:
        cost = len(piece) + 1
        if used + cost > CAP and out:
            break
        out.append(piece.decode("utf-8", "replace"))
        used += cost
        last += 1
    text = "\n".join(out)
    shown_all = eof and last - offset + 1 == len(pieces)
    if not shown_all:
        n, exact = _count_lines(fd)
        why = "50 KB cap" if last - offset + 1 < limit else "limit"
        total = f"{n}" if exact else f"at least {n}"
        text += f"\n[showing lines {offset}-{last} of {total} ({why}); continue with offset={last + 1}]"
    return text
