"""Session files on disk: recovery, deferred atomic creation, durable appends.

A session file is the accumulated stream: a header line, then entries, each
line written once with one `write` and made durable with `fdatasync` before
anyone downstream sees it. Nothing here ever rewrites a file; the only
change besides appending is cutting a torn tail left by a crash.
"""
import fcntl
import os

import orjson

from pantolib import entries, paths, stream
from pantolib.errors import PantoError, SessionError


class Scan:
    """What reading a session file found."""

    __slots__ = ("header", "ids", "leaf", "end", "size", "cut_line")

    def __init__(self):
        self.header = None
        self.ids = set()
        self.leaf = None
        self.end = 0          # bytes of valid data from the top
        self.size = 0         # the file's size when read
        self.cut_line = None  # first torn line, when there is one


def _torn_or_schema(raw, name, lineno):
    """Parse a line: (obj, kind), or None if it is torn (not a whole JSON object)."""
    if raw[-1:] != b"\n":
        return None
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict:
        return None
    try:
        kind = stream.classify(obj)
    except ValueError as e:
        raise SessionError(str(e), name, lineno) from None
    return obj, kind


def scan(path, start=0, result=None, lineno=0):
    """Read a session file (from byte `start` when continuing a scan).

    Stops at the first torn line (not a complete JSON object, a last line
    without its line feed, or a header out of place) and records where.
    A complete object that breaks the schema raises SessionError(FILE:LINE).
    """
    r = result or Scan()
    with open(path, "rb") as f:
        r.size = os.fstat(f.fileno()).st_size
        f.seek(start)
        offset = start
        for raw in f:
            lineno += 1
            if not raw.strip() and raw[-1:] == b"\n":
                offset += len(raw)
                r.end = offset
                continue
            parsed = _torn_or_schema(raw, path, lineno)
            if parsed is None or (parsed[1] == stream.HEADER) != (r.header is None):
                if r.header is None:
                    raise SessionError("not a panto session (the first line is not a session header)",
                                       path, lineno)
                r.cut_line = lineno
                break
            obj, kind = parsed
            if kind == stream.HEADER:
                r.header = obj
                migrate(obj, path)
            elif kind == stream.BARE:
                raise SessionError("an entry without an 'id' in a session file", path, lineno)
            else:
                r.ids.add(obj["id"])
                r.leaf = obj["id"]
            offset += len(raw)
            r.end = offset
    if r.header is None:
        raise SessionError("not a panto session (empty file)", path)
    return r


def migrate(header, path):
    """The migration hook: a header with a version below 1 would be upgraded
    here and the file rewritten once. No such version exists; nothing to do."""
    return False


def repair(path, r, fd=None):
    """Cut the torn tail found by scan (never the header: scan refuses that)."""
    if r.end >= r.size:
        return 0
    cut = r.size - r.end
    if fd is None:
        fd2 = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.ftruncate(fd2, r.end)
            os.fsync(fd2)
        finally:
            os.close(fd2)
    else:
        os.ftruncate(fd, r.end)
        os.fsync(fd)
    r.size = r.end
    return cut


def check_path(path):
    """Refuse what cannot be a session file before opening it."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise PantoError(f"'{path}': no such session file") from None
    if stat.S_ISDIR(mode):
        raise PantoError(f"'{path}' is a directory, not a session file")
    if not stat.S_ISREG(mode):
        raise PantoError(f"'{path}' is not a regular file, so not a session file")


def make_dirs(directory):
    """Create the directory and any missing parents, each mode 0700."""
    missing = []
    d = os.path.abspath(directory)
    while not os.path.isdir(d):
        missing.append(d)
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            if not os.path.isdir(d):
                raise


def fsync_dir(directory):
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def is_assistant(obj):
    m = obj.get("message")
    return obj.get("type") == "message" and isinstance(m, dict) and m.get("role") == "assistant"


class Writer:
    """Persists a stream into one session file.

    `feed(line)` returns the bytes to echo downstream: a line is returned
    only once it is durable, except while the file does not exist yet
    (deferred creation), when lines wait for the first assistant entry.
    `finish()` returns what is still waiting when the stream ends (those
    lines are echoed but, by design, not written: there was no reply).
    """

    def __init__(self, path=None, env=None):
        self.path = path
        self.env = env
        self.fd = None
        self.size = 0
        self.header = None        # the file's (or the stream's, while deferred) header
        self.ids = set()
        self.leaf = None
        self.pending = []         # (bytes, entry id or None) waiting for creation
        self.started = False      # seen the first line

    # -- opening --------------------------------------------------------------

    def _open_existing(self):
        check_path(self.path)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                r = scan(self.path)
                repair(self.path, r, fd)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        except BaseException:
            os.close(fd)
            raise
        self.fd, self.size = fd, r.end
        self.header, self.ids, self.leaf = r.header, r.ids, r.leaf

    def _start(self, line):
        """First line of the stream: decide which file, open it or defer."""
        self.started = True
        stream_header = line.obj if line.kind == stream.HEADER else None
        if self.path is None:
            if stream_header is None:
                raise PantoError("the stream has no session header, so it belongs to no file "
                                 "(give the session FILE to append to)")
            self.path = paths.session_path(stream_header, self.env)
        if os.path.lexists(self.path):
            self._open_existing()
            if stream_header is not None and stream_header["id"] != self.header["id"]:
                raise PantoError(f"the stream is session {stream_header['id']} but "
                                 f"'{self.path}' is session {self.header['id']}: refusing to mix them")
        elif stream_header is None:
            raise PantoError(f"'{self.path}' does not exist and the stream has no session header "
                             f"to start it with")
        else:
            self.header = stream_header

    # -- writing --------------------------------------------------------------

    def _catch_up(self):
        """Under the lock: take in lines another appender added since our last write."""
        st = os.fstat(self.fd)
        if st.st_size == self.size:
            return
        r = Scan()
        r.header = self.header
        r.ids = self.ids
        r.leaf = self.leaf
        r.end = self.size
        scan(self.path, start=self.size, result=r)
        repair(self.path, r, self.fd)
        self.size, self.leaf = r.end, r.leaf

    def _append(self, data, entry_id):
        fd = self.fd
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            self._catch_up()
            if entry_id in self.ids:       # another appender wrote it meanwhile
                return
            n = os.write(fd, data)
            while n < len(data):           # a short write: finish the line
                n += os.write(fd, data[n:])
            os.fdatasync(fd)
            self.size += len(data)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _create(self):
        """Write header + waiting entries to a temporary file and link it into place."""
        import tempfile

        directory = os.path.dirname(os.path.abspath(self.path))
        make_dirs(directory)
        data = b"".join(raw for raw, _, write in self.pending if write)
        fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=directory)
        try:
            os.write(fd, data)
            os.fsync(fd)
            os.close(fd)
            fd = None
            try:
                os.link(tmp, self.path)    # never replaces a file that appeared meanwhile
                created = True
            except FileExistsError:
                created = False
            except OSError:                # no hard links here: rename, still atomic
                os.rename(tmp, self.path)
                created = True
            fsync_dir(directory)
        finally:
            if fd is not None:
                os.close(fd)
            if os.path.exists(tmp):
                os.unlink(tmp)
        if created:
            self.fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
            self.size = len(data)
            return
        # Another appender created the file first: append what it lacks.
        stream_id = self.header["id"]
        self._open_existing()
        if self.header["id"] != stream_id:
            raise PantoError(f"'{self.path}' appeared meanwhile as another session")
        for raw, entry_id, write in self.pending:
            if write and entry_id is not None and entry_id not in self.ids:
                self._append(raw, entry_id)
                self.ids.add(entry_id)

    def feed(self, line):
        """Take one stream Line; return the bytes that may now be echoed."""
        if not self.started:
            self._start(line)
        if line.kind == stream.HEADER:
            if self.fd is not None:
                return line.raw
            self.pending.append((line.raw, None, True))
            return b""
        obj, raw = line.obj, line.raw
        if line.kind == stream.BARE:
            obj = entries.complete(obj, self.leaf, self.ids)
            raw = stream.dumps(obj)
            self.ids.discard(obj["id"])    # complete() reserved it; written below
        entry_id = obj["id"]
        known = entry_id in self.ids       # already in the file: idempotent
        self.leaf = entry_id
        if self.fd is not None:
            if not known:
                self._append(raw, entry_id)
                self.ids.add(entry_id)
            return raw
        self.ids.add(entry_id)
        self.pending.append((raw, entry_id, not known))
        if known or not is_assistant(obj):
            return b""
        if self.pending[0][1] is not None:   # a headerless stream never gets here
            raise PantoError("internal: deferred session without a header")
        self._create()
        out = b"".join(r for r, _, _ in self.pending)
        self.pending = []
        return out

    def finish(self):
        """Lines still waiting at the end of the stream (no assistant entry came)."""
        out = b"".join(r for r, _, _ in self.pending)
        self.pending = []
        return out

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
