"""The part of a stream that a session file already has, recognised byte for
byte instead of line by line.

`panto-log replay F | panto-send | panto-log append F` carries the whole
file through every process, and all but the last lines of it are the
file's own bytes. The file's bytes are the truth: a stream prefix equal to
the file byte for byte, up to where the file's valid lines end (the index
cache, or a scan, found every line there valid), is made of the file's
valid lines, so it needs no parsing. Each block of the stream is compared
with the file's bytes at the same offset (one `pread` and a C `memcmp`); the
first difference, or the end of the file's valid lines, ends the prefix at
the last line feed before it, and from there on the stream is read line by
line by stream.py's rules as before.

The prefix is taken only when it can change nothing that the line-by-line
reading would do: the stream's first line is the file's header line byte for
byte, and the file's valid part has no blank line (a reader skips those: it
would not pass them on) and no id twice (its line count is its entries plus
the header).
"""
import os

BLOCK = 1 << 20


def _widen(f):
    """Let a pipe on f hold a block (Linux: fewer, larger reads and writes on
    both ends); anything else, or a refusal, is left as it is."""
    import fcntl

    try:
        fd = f.fileno()
        if fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) < BLOCK:     # never made smaller
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, BLOCK)
    except (AttributeError, OSError, ValueError):
        pass


def first_line(f):
    """(the first line of f with its line feed, or None at EOF or when it is
    longer than a block; every byte read). A pipe on f is widened first."""
    _widen(f)
    data = b""
    read = getattr(f, "read1", f.read)
    while True:
        chunk = read(BLOCK)
        if not chunk:
            return None, data
        data += chunk
        nl = data.find(b"\n")
        if nl >= 0:
            return data[:nl + 1], data
        if len(data) > BLOCK:
            return None, data


def plain(lines, entries):
    """Does a file's valid part of `lines` lines (header included) holding
    `entries` distinct ids have neither blank lines nor an id twice?"""
    return lines == entries + 1


class Prefix:
    """A stream read against a file's valid bytes (fd, up to `stop`), from
    offset `start` on, a line start at the same offset in both. feed(buf,
    lo, hi) takes the stream's next bytes, buf[lo:hi], and returns where the
    whole lines among them that match end (lo when none does); `pos` is the
    next file offset to compare. Once a difference or the end of the valid
    part is met, `done` is set. The file is read into one reused buffer and
    compared with a C memcmp (bytes.startswith): no allocation per block."""

    def __init__(self, fd, start, stop):
        self.fd, self.stop, self.pos = fd, stop, start
        self.done = start >= stop
        self._theirs = memoryview(bytearray(max(0, min(BLOCK, stop - start))))

    def feed(self, buf, lo, hi):
        limit = min(hi - lo, self.stop - self.pos)
        n = self._matching(buf, lo, limit)
        cut = buf.rfind(b"\n", lo, lo + n) + 1
        self.pos += n
        if n < limit or self.pos >= self.stop:
            self.done = True
        return cut if cut > lo else lo

    def _matching(self, buf, lo, n):
        """How many of buf[lo:lo+n] are the file's bytes from pos on."""
        done = 0
        while done < n:
            theirs = self._theirs[:min(len(self._theirs), n - done)]
            got = os.preadv(self.fd, [theirs], self.pos + done)
            theirs = theirs[:got]
            if got and buf.startswith(theirs, lo + done):
                done += got
                continue
            a, b = 0, got         # the longest common prefix: theirs[:a] matches, theirs[:b + 1] does not
            while a < b:
                mid = (a + b + 1) // 2
                if buf.startswith(theirs[:mid], lo + done):
                    a = mid
                else:
                    b = mid - 1
            return done + a
        return done


def _lines_before(fd, at, known_at, known_lines):
    """The number of lines in a file's first `at` bytes (known_lines at known_at)."""
    if at == known_at:
        return known_lines
    n, pos = 0, 0
    while pos < at:
        block = os.pread(fd, min(BLOCK, at - pos), pos)
        n += block.count(b"\n")
        pos += len(block)
    return n


def _entry_ending_at(ids, at):
    from pantolib import index

    for eid, node in ids.items():
        if node is not None and node[index.END] == at:
            return eid
    return None


def append_known(writer, f, echo):
    """panto-log append: pass on the part of the stream on f that the
    writer's file already has, compared byte for byte (each block once the
    path is checked, under the file's lock, to still name it, as a batch is), and
    return (the stream's bytes read past it, the number of lines it took,
    whether the first line was taken) for the line-by-line reading. The
    writer's leaf is the last entry taken, as if each line had been fed."""
    from pantolib import stream
    from pantolib.errors import PantoError, SessionError

    line, data = first_line(f)
    if line is None or not line.strip():
        return data, 0, False
    try:
        first = stream.parse_line(line, "<stdin>", 1)
        if first.kind != stream.HEADER or stream.is_partial(first.obj):
            return data, 0, False
        path = writer.target(first.obj)
    except (SessionError, PantoError):     # the line-by-line reading says what is wrong
        return data, 0, False
    if not os.path.lexists(path):
        return data, 0, False               # deferred creation: line by line
    writer.feed_batch([first], echo)        # opens (and recovers) the file, passes the header on
    file = writer.file
    if file is None or file.header_raw != line or not plain(file.lines, len(file.ids)):
        return data[len(line):], 1, True
    stop, lines, leaf = file.size, file.lines, file.leaf
    p = Prefix(file.fd, len(line), stop)
    at = len(line)              # where the lines passed on end (in the file and the stream)
    begun = []                  # the matched pieces of the line begun at `at`
    got = len(data) - len(line)
    buf = bytearray(max(got, min(BLOCK, max(stop - len(line), 1 << 16))))   # a small file: a small buffer
    buf[:got] = data[len(line):]
    view = memoryview(buf)
    readinto = getattr(f, "readinto1", f.readinto)
    rest = None
    while rest is None:
        if p.done:
            rest = b"".join(begun) + bytes(view[:got])
            break
        if not got:
            got = readinto(view)
            if not got:
                rest = b"".join(begun)
                break
        start = p.pos
        cut = p.feed(buf, 0, got)
        if cut:
            if not file.hold():     # the path names another file now: these lines are read one by one
                rest = b"".join(begun) + bytes(view[:got])
                break
            file.release()          # checked under the lock; echoed after it, as a batch is
            for piece in begun:
                echo(piece)
            echo(view[:cut])
            begun, at = [], start + cut
        if p.done:
            rest = b"".join(begun) + bytes(view[cut:got])
        else:
            begun.append(bytes(view[cut:got]))
            got = 0
    if at > len(line):
        writer.leaf = leaf if at == stop else _entry_ending_at(file.ids, at)
    return rest, _lines_before(file.fd, at, stop, lines), True


class FileBytes:
    """Bytes start..end of an open file, passed on by sendfile(2) instead
    of being held in memory (the known part of panto-send's input)."""

    __slots__ = ("fd", "start", "end")

    def __init__(self, fd, start, end):
        self.fd, self.start, self.end = fd, start, end

    def __len__(self):
        return self.end - self.start

    def write_to(self, out):
        """Write them to the command's stdout (`out`, cli.stdout())."""
        import sys

        from pantolib import files
        from pantolib.errors import PantoError

        if os.fstat(self.fd).st_size < self.end:
            raise PantoError("the session file was cut shorter while its lines were passed on")
        out.flush()
        files.send(self.fd, self.start, self.end, sys.stdout.fileno(), out)

    def read(self):
        return os.pread(self.fd, self.end - self.start, self.start)


def write_lines(out, lines):
    """out.writelines(lines), where some may be FileBytes."""
    run = []
    for piece in lines:
        if type(piece) is FileBytes:
            out.writelines(run)
            run = []
            piece.write_to(out)
        else:
            run.append(piece)
    out.writelines(run)


class Known:
    """What send_known found: the stream's first `at` bytes are the valid
    lines of the file open as `fd` (`lines` of them, header included), of
    which the index cache knows the entries (`nodes`, id -> index node;
    `leaf`, the last of them or None); `rest` is the stream from there on."""

    __slots__ = ("fd", "header", "at", "lines", "nodes", "leaf", "rest")

    def __init__(self, fd, header, at, lines, nodes, leaf, rest):
        self.fd, self.header, self.at, self.lines = fd, header, at, lines
        self.nodes, self.leaf, self.rest = nodes, leaf, rest

    def whole(self):
        """The whole stream, read into memory."""
        return os.pread(self.fd, self.at, 0) + self.rest


def send_known(f, env=None):
    """panto-send: read the stream on f against the session file the
    header's id names, when the index cache knows it (its entry tree,
    without parsing the file), block by block into one reused buffer.
    Returns (the bytes read when there is no Known, a Known or None): None
    when the first line is not that file's header line byte for byte, the
    cache knows nothing of the file, or its valid part has blank lines or an
    id twice. The file stays open (its bytes are passed on from it)."""
    import stat

    from pantolib import index, paths, stream
    from pantolib.errors import PantoError, SessionError

    line, data = first_line(f)
    if line is None or not line.strip():
        return data, None
    try:
        first = stream.parse_line(line, "<stdin>", 1)
        if first.kind != stream.HEADER or stream.is_partial(first.obj):
            return data, None
        path = paths.session_path(first.obj, env)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)   # a FIFO there must not block
    except (SessionError, PantoError, OSError):
        return data, None
    try:
        st = os.fstat(fd)
        known = index.load(path, fd, st, env) if stat.S_ISREG(st.st_mode) else None
    except BaseException:
        os.close(fd)
        raise
    if known is None or known["header_raw"] != line or not plain(known["end_line"], len(known["ids"])):
        os.close(fd)
        return data, None
    end = known["end"]
    at, rest = _compare(f, fd, len(line), end, data[len(line):])
    nodes, leaf, lines = known["ids"], known["leaf"], known["end_line"]
    if at < end:
        nodes = {k: n for k, n in nodes.items() if n[index.START] < at}
        leaf = _entry_ending_at(nodes, at)
        lines = 1 + len(nodes)
    return None, Known(fd, first, at, lines, nodes, leaf, rest)


def _compare(f, fd, start, stop, data):
    """(where the stream on f, `data` read of it already from offset
    `start`, stops being the file's valid lines (`stop`): a line start;
    the stream's bytes from there on, to its end)."""
    p = Prefix(fd, start, stop)
    at, begun = start, []
    got = len(data)
    buf = bytearray(max(got, min(BLOCK, max(stop - start, 1 << 16))))
    buf[:got] = data
    view = memoryview(buf)
    readinto = getattr(f, "readinto1", f.readinto)
    while not p.done:
        if not got:
            got = readinto(view)
            if not got:
                break
        begin = p.pos
        cut = p.feed(buf, 0, got)
        if cut:
            begun, at = [], begin + cut
        begun.append(bytes(view[cut:got]))
        got = 0
    if got:                     # the file's valid part was only the header
        begun.append(bytes(view[:got]))
    view.release()
    begun.append(f.read())
    return at, b"".join(begun)
