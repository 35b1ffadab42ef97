"""Session files on disk: recovery, deferred atomic creation, durable appends.

A session file is the accumulated stream: a header line, then entries, each
line written once with one `write` and made durable with `fdatasync` before
anyone downstream sees it. Nothing here ever rewrites a file; the only
change besides appending is cutting a torn tail left by a crash.

What a crash can leave is a torn *tail*: panto never writes after a torn
line (it recovers first), so a bad line with valid lines after it is not a
crash artifact. It is reported (FILE:LINE) and the file left alone.
"""
import fcntl
import os

import orjson

from pantolib import entries, files, index, paths, persist, stream
from pantolib.errors import PantoError, SessionError


class FileState:
    """What reading a session file found."""

    __slots__ = ("header", "header_raw", "ids", "leaf", "end", "end_line", "size", "cut_line", "bad", "after",
                 "cut", "fresh", "seen", "sum")

    def __init__(self):
        self.header = None
        self.header_raw = None
        self.ids = {}         # entry id -> its node (index.node: parent, start, end, kind, ...)
        self.leaf = None
        self.end = 0          # where the valid data ends (the start of a torn tail)
        self.end_line = 0     # the number of lines before `end`
        self.size = 0         # bytes read
        self.cut_line = None  # first line of the torn tail, when there is one
        self.bad = []         # (line number, start, stop, what is wrong): bad lines not at the end
        self.after = 0        # valid lines after the first bad line
        self.cut = 0          # bytes a repair cut
        self.fresh = True     # read from the file (not all from the index cache)
        self.seen = None      # (the time, the identity) the file was looked at (persist.now, persist.ident)
        self.sum = None       # (an offset, the CRC-32 of the bytes before it) known true of the file


def _intact(n):
    return f"the {n} line after it is intact" if n == 1 else f"the {n} lines after it are intact"


def bad_line_error(path, r):
    lineno, _, _, why = r.bad[0]
    more = f"; {len(r.bad) - 1} more bad lines" if len(r.bad) > 1 else ""
    return SessionError(f"{why} ({_intact(r.after)}{more}); panto-log replay --skip-bad prints "
                        f"the session without it", path, lineno)


CHUNK = 1 << 20


def scan(path, start=0, result=None, lineno=0, f=None, skip_bad=False, ids=True, known=None):
    """Read a session file (from byte `start`, continuing a scan's result).

    Valid lines are taken in; a run of torn lines (SPEC §4: no line feed, not
    a complete JSON object, a header out of place) with nothing valid after
    it is the torn tail (`end`, `cut_line`). Torn-looking lines followed by a
    valid line are bad lines: SessionError naming the first, unless skip_bad
    (then they are listed in `bad`). So is a complete object that breaks the
    schema, wherever it is. `f` reads through an open binary file instead.
    ids=False leaves the entry ids out (a reader that only prints the file
    keeps constant memory); with ids, `ids` maps each to its index.node.
    `known`: (offset, bytes, what they parse to) of a line read already
    (scan.last_timestamp's `kept`): those bytes at that offset are not parsed again.
    """
    r = result or FileState()
    lines = _LineRules(path, r, skip_bad, ids, known)
    own = f is None
    if own:
        f = open(path, "rb")
    try:
        f.seek(start)
        r.end, r.end_line = start, lineno
        r.size = lines.read(f, start, lineno)
    finally:
        if own:
            f.close()
    if r.header is None:
        raise SessionError("not a panto session (empty file)", path)
    r.cut_line = lines.pending[0][0] if lines.pending else None
    if r.bad and not skip_bad:
        raise bad_line_error(path, r)
    return r


class _LineRules:
    """scan's rules for each line of one file, taking what they find into a FileState."""

    def __init__(self, path, r, skip_bad, ids, known=None):
        self.path, self.r, self.skip_bad = path, r, skip_bad
        self.known = known or (-1, b"", None)
        self.keep = r.ids if ids else None
        self.pending = []        # torn-looking lines with nothing valid after them (yet)

    def read(self, f, base, lineno):
        """Take in every line of f from byte `base` (line `lineno`); return
        where the file ends. The common line, a valid entry after the header
        with nothing torn-looking before it, is taken here (the hot path of
        append and replay: `entry` inline); every other goes to `other`."""
        r, keep, pending, bad, other = self.r, self.keep, self.pending, self.r.bad, self.other
        node, loads, classify, decode_error = index.node, orjson.loads, stream.classify, orjson.JSONDecodeError
        ENTRY, NOT_JSON = stream.ENTRY, stream.NOT_JSON
        known_at, known, known_obj = self.known
        for chunk, stop in stream.pieces(f, CHUNK):
            if stop is None:                  # the last line, without its line feed
                other(memoryview(chunk), base, None, lineno + 1)
                return base + len(chunk)
            view, find, p = memoryview(chunk), chunk.find, 0
            while p < stop:
                e = find(b"\n", p) + 1
                raw = view[p:e]
                lineno += 1
                if base + p == known_at and e - p == len(known) + 1 and chunk.startswith(known, p):
                    obj = known_obj       # the same bytes as a line parsed already (a compare, not a parse)
                else:
                    try:
                        obj = loads(raw)
                    except decode_error:
                        obj = NOT_JSON
                if type(obj) is dict and not pending and r.header is not None:
                    try:
                        kind = classify(obj)
                    except ValueError:
                        kind = None
                    if kind is ENTRY:
                        if bad:
                            r.after += 1
                        eid = obj["id"]
                        if keep is not None:
                            keep[eid] = node(obj, base + p, base + e)
                        r.leaf = eid
                        r.end, r.end_line = base + e, lineno
                        p = e
                        continue
                other(raw, base + p, obj, lineno)
                p = e
            base += stop
        return base

    def other(self, raw, offset, obj, lineno):
        """Every line but the common one; `obj` is what orjson made of it
        (stream.NOT_JSON when it refused it; a last line without its line
        feed is not parsed, and torn whatever it holds)."""
        end = offset + len(raw)
        why = stream.why_torn(raw, obj)
        if why is not None:
            if bytes(raw).strip():
                self.torn_looking(lineno, offset, end, why)
            elif raw[-1] == 10 and not self.pending:     # a blank line: skipped
                self.r.end, self.r.end_line = end, lineno
            return
        try:
            if obj is stream.NOT_JSON:       # complete, but too deep to read: not torn
                raise ValueError(stream.DEEP)
            kind = stream.classify(obj)
        except ValueError as e:
            self.broken(lineno, offset, end, e)
            return
        if self.r.header is None:        # the first line, whatever it holds, must be the header
            self.header(obj, raw, end, lineno, kind)
        elif kind is stream.ENTRY:
            self.entry(obj, offset, end, lineno)
        elif kind is stream.HEADER:
            self.torn_looking(lineno, offset, end, "a session header after the first line")
        elif not self.skip_bad:
            raise SessionError("an entry without an 'id' in a session file", self.path, lineno)
        else:
            self.skip(lineno, offset, end, "an entry without an 'id'")

    def entry(self, obj, start, end, lineno):
        """A valid entry: torn-looking lines before it were bad lines."""
        r = self.r
        if self.pending:
            r.bad.extend(self.pending)
            self.pending.clear()
        if r.bad:
            r.after += 1
        eid = obj["id"]
        if self.keep is not None:
            self.keep[eid] = index.node(obj, start, end)
        r.leaf = eid
        r.end, r.end_line = end, lineno

    def header(self, obj, raw, end, lineno, kind):
        """The first line: the session header, or the file is no session."""
        if kind is not stream.HEADER:
            raise SessionError("not a panto session (the first line is not a session header)", self.path, lineno)
        if stream.is_partial(obj):
            raise SessionError("a partial stream (panto-log replay --context), not a session "
                               "file: it leaves entries out", self.path, lineno)
        self.r.header, self.r.header_raw = obj, bytes(raw)
        migrate(obj, self.path)
        self.r.end, self.r.end_line = end, lineno

    def torn_looking(self, lineno, offset, end, why):
        """A line a crash could leave: the torn tail, unless a valid line follows."""
        if self.r.header is None:
            raise SessionError(f"not a panto session (the first line is not a session header: "
                               f"{why})", self.path, lineno)
        self.pending.append((lineno, offset, end, why))

    def broken(self, lineno, offset, end, e):
        """A complete object that breaks the schema: never torn."""
        if self.r.header is None:
            raise SessionError(f"not a panto session (the first line is not a valid "
                               f"session header: {e})", self.path, lineno) from None
        if not self.skip_bad:
            raise SessionError(str(e), self.path, lineno) from None
        self.skip(lineno, offset, end, str(e))

    def skip(self, lineno, offset, end, why):
        """A bad line (skip_bad): listed in `bad`, with the torn-looking lines before it."""
        r = self.r
        r.bad.extend(self.pending)
        self.pending.clear()
        r.bad.append((lineno, offset, end, why))
        r.end, r.end_line = end, lineno


def migrate(header, path):
    """The migration hook: a header with a version below 1 would be upgraded
    here and the file rewritten once. No such version exists; nothing to do."""
    return False


def repair(path, r, fd):
    """Cut the torn tail found by scan (never the header: scan refuses that).
    The caller holds the flock on fd. Returns the bytes cut."""
    if r.end >= r.size:
        return 0
    cut = r.size - r.end
    os.ftruncate(fd, r.end)
    os.fsync(fd)
    r.size = r.end
    return cut


def recover(path, fd, result=None, start=0, lineno=0, fix=True, ids=True, known=None):
    """The one recover step: with fd's exclusive flock held by the caller,
    scan the file (from `start`, continuing `result`) and cut a torn tail."""
    with open(fd, "rb", closefd=False) as f:
        r = scan(path, start, result, lineno, f=f, ids=ids, known=known)
    if fix:
        r.cut = repair(path, r, fd)
    return r


def read_indexed(path, fd, fix=True, env=None, cached=True, ids=True, known=None):
    """The file open as fd, scanned and (fix) its torn tail cut, from the
    index cache's offset when a cache entry may be used, else from the top:
    a FileState with nodes. The caller holds fd's exclusive flock when fix.
    r.fresh tells whether the cache wants saving, and r holds what it
    needs: something was read into r.ids, or the cache covers the whole
    file and its entry had to be checked by content (saved again, stamped
    now, it is believed on identity next time). cached=False: not from the
    cache. ids=False: the lines read are not taken into r.ids (a reader
    that only prints the file keeps constant memory beyond what the cache
    holds), so what they add is never saved. known: scan's."""
    stamp = persist.now()       # before the fstat: git's racy rule (persist.racy)
    st = os.fstat(fd)
    cover = index.load(path, fd, st, env) if cached else None
    if cover is None:
        r = recover(path, fd, fix=fix, ids=ids, known=known)
    else:
        r = FileState()
        r.header, r.header_raw, r.ids, r.leaf = cover["header"], cover["header_raw"], cover["ids"], cover["leaf"]
        r.end = r.size = cover["end"]
        r.end_line, r.sum = cover["end_line"], cover["sum"]
        if r.end == st.st_size:
            r.fresh = cover["checked"]      # then saved again, stamped now: not checked next time
            r.seen = (stamp, persist.ident(st))
            return r
        r = recover(path, fd, r, start=r.end, lineno=r.end_line, fix=fix, ids=ids, known=known)
    r.fresh = ids        # lines read but not kept: nothing the cache could be saved from
    r.seen = (stamp, persist.ident(st)) if r.size == st.st_size and not r.cut else None
    return r


def read_locked(path, fd, fix=True, env=None, cached=True):
    """read_indexed under fd's flock: exclusive when fix (a torn tail is cut;
    an appender may be mid-write), else shared."""
    fcntl.flock(fd, fcntl.LOCK_EX if fix else fcntl.LOCK_SH)
    try:
        return read_indexed(path, fd, fix=fix, env=env, cached=cached)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def recover_file(path):
    """Cut the torn tail of the file at path under its exclusive flock (an
    appender may be mid-write): the FileState, without ids, r.cut the bytes cut."""
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return recover(path, fd, ids=False)
    finally:
        os.close(fd)


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


class _File:
    """A session file open for appending, and what is known of it: its
    entries' nodes (`ids`), its last entry, its size and lines. A batch of
    appends holds its flock and has checked once that the path still names
    it (device and inode); each line is one write and one fdatasync.

    What it knows of the file was true when the file was last looked at.
    When it takes the lock, the file's identity (persist.ident) is compared
    with the one it left: on opening, or after its last batch of lines.
    Where the filesystem stamps every change after a stat anew
    (persist.settles), a change it did not make since then shows there,
    even another program's edit of the same size (the size is as expected):
    `foreign` is set, and the index cache it saves is compared by content
    next time. Elsewhere, an identity within a tick of a change may hide
    another, so a file it wrote to is always compared by content next time.
    (A change made by another program while a batch of lines is being
    written cannot be told from its writes: a stat between every two lines
    would do it, at ~10 us a line, as each write then updates the inode's
    times.)"""

    def __init__(self, path, fd, header, header_raw, ids, leaf, size, lines, dirty, env, seen=None, known=None):
        st = os.fstat(fd)
        self.path, self.fd, self.ident, self.env = path, fd, (st.st_dev, st.st_ino), env
        self.header, self.header_raw, self.ids, self.leaf = header, header_raw, ids, leaf
        self.size = size          # where the valid lines end
        self.lines = lines        # lines in the first `size` bytes
        self.dirty = dirty        # the index cache wants saving
        self.held = False         # the flock is held and the path checked, for this batch
        self.wrote = False        # a line was written (or taken in) in this batch
        self.seen = seen          # (time, identity) the file was last looked at (FileState.seen)
        self.known = known        # (offset, CRC-32 before it) known true of the file (FileState.sum)
        self.last = seen[1] if seen is not None else None    # its identity after our last look or write
        self.foreign = seen is None     # it may hold a change we did not make, or did not see
        self.touched = False            # we wrote to it

    @classmethod
    def open(cls, path, env, warn):
        """The session file at path, recovered under its flock (a torn tail cut)."""
        check_path(path)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        try:
            r = read_locked(path, fd, env=env)
        except BaseException:
            os.close(fd)
            raise
        if r.cut:
            warn(f"{path}:{r.cut_line}: cut a torn tail ({r.cut} bytes)")
        return cls(path, fd, r.header, r.header_raw, r.ids, r.leaf, r.end, r.end_line, r.fresh, env, r.seen, r.sum)

    @classmethod
    def created(cls, path, header, header_raw, ids, written, env):
        """The file just made of the lines `written` (bytes, entry or None),
        opened; their entries' nodes go into ids."""
        stamp = persist.now()
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        offset = lines = 0
        leaf = None
        for raw, obj in written:
            if obj is not None:
                ids[obj["id"]] = index.node(obj, offset, offset + len(raw))
                leaf = obj["id"]
            offset += len(raw)
            lines += 1
        return cls(path, fd, header, header_raw, ids, leaf, offset, lines, True, env,
                   (stamp, persist.ident(os.fstat(fd))))

    def hold(self):
        """Before the first write (or check) of a batch: take the lock, make
        sure the path still names this file and take in what other appenders
        added. True once held; False (the lock let go) when the path names
        another file or none. One stat of the path, once per batch: its lines
        are then written through the same descriptor under the same lock."""
        if self.held:
            return True
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        self.held = True
        st = self._here()
        if st is None:
            self.release()
            return False
        self._look(st)
        if st.st_size != self.size:
            self._catch_up(st.st_size)
        return True

    def _look(self, st):
        """Compare the file's identity now (st) with the one we left: another's change?"""
        now = persist.ident(st)
        if now != self.last:
            self.foreign = True
        self.last = now

    def release(self):
        if self.held:
            if self.wrote:      # what the file is after this batch's lines (for the index cache)
                stamp = persist.now()
                self.last = persist.ident(os.fstat(self.fd))
                self.seen, self.wrote = (stamp, self.last), False
            self.held = False
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def _here(self):
        """Does the path still name the open file? Its stat when it does, else None."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st if (st.st_dev, st.st_ino) == self.ident else None

    def _catch_up(self, size):
        """Under the lock: take in what another appender added since our last write."""
        if size < self.size:
            raise PantoError(f"'{self.path}' was cut shorter while appending (from {self.size} to {size} "
                             f"bytes): stopped, so that nothing is written after entries that may be "
                             f"gone (check it with panto-log replay)")
        r = FileState()
        r.header, r.header_raw, r.ids, r.leaf = self.header, self.header_raw, self.ids, self.leaf
        recover(self.path, self.fd, r, start=self.size, lineno=self.lines)
        self.size, self.lines, self.leaf = r.end, r.end_line, r.leaf
        self.dirty = self.wrote = True

    def holds(self, entry_id):
        """Is the line the index gives for this entry (which `ids` has) there in the
        file, whole and with its id? Read before an entry is skipped as present."""
        n = self.ids[entry_id]
        return n is None or index.line_of(self.fd, n, entry_id, self.size)

    def reread(self):
        """Under the lock: what is known of the file proved untrue (an index cache
        that lied): read it all again from the top, into the same ids."""
        r = recover(self.path, self.fd)
        self.foreign = True
        self.ids.clear()
        self.ids.update(r.ids)
        self.header, self.header_raw, self.leaf = r.header, r.header_raw, r.leaf
        self.size, self.lines, self.known = r.end, r.end_line, None
        self.dirty = self.wrote = True

    def append(self, data, obj):
        """Write one entry's line durably (held: the lock is taken)."""
        start = self.size
        try:
            files.write_durably(self.fd, data)
        except OSError as e:
            self._cut_back(start, e)
        self.touched = True
        self.ids[obj["id"]] = index.node(obj, start, start + len(data))
        self.size += len(data)
        self.lines += 1
        self.leaf = obj["id"]
        self.dirty = self.wrote = True

    def _cut_back(self, start, e):
        """A write or its fdatasync failed (a full disk): cut off what part of
        the line reached the file, so that no torn line is left, then report."""
        try:
            os.ftruncate(self.fd, start)
            os.fsync(self.fd)
        except OSError as e2:
            raise PantoError(f"'{self.path}': could not append to the session: {e.strerror or e}, nor cut "
                             f"back the part written: {e2.strerror or e2} (panto-log replay cuts it)") from None
        raise files.failed(self.path, e, "could not append to the session") from None

    def differs(self, entry_id, data):
        """Is the file's line of this entry (which it has) a different entry than data?"""
        n = self.ids[entry_id]
        if n is None:
            return False
        offset = n[index.START]
        if os.pread(self.fd, len(data), offset) == data:
            return False
        with open(self.fd, "rb", closefd=False) as f:     # the same entry written differently?
            f.seek(offset)
            theirs = stream.loads(f.readline())
        return not stream.same(theirs, orjson.loads(data))

    def close(self, keep_index=True):
        """Close the file, keeping what is known of it in the index cache (keep_index)."""
        self.release()
        if keep_index and self.dirty:
            r = FileState()
            r.header_raw, r.ids, r.leaf, r.end, r.end_line = self.header_raw, self.ids, self.leaf, self.size, self.lines
            r.seen, r.sum = self.seen, self.known
            if self.foreign or (self.touched and not persist.settles(self.path, self.ident[0])):
                r.seen = None      # compared by content next time (see the class)
            index.save(self.path, self.fd, r, self.env)
        os.close(self.fd)


class Writer:
    """Persists a stream into one session file.

    `feed_batch(lines, echo)` takes the Lines that arrived together and
    passes `echo` the bytes to send downstream: a line is passed on only once
    it is durable in the file at the session's path. While the file does not
    exist yet (deferred creation), lines wait for the first assistant entry;
    `finish()` returns what is still waiting when the stream ends normally
    (those lines are echoed but, by design, not written: there was no reply).
    A batch takes the flock and checks the path once, before its first
    write (`_File.hold`); a path that names another file, or none, is opened
    anew (`_reopen`). `warn` gets one-line remarks for stderr.
    """

    def __init__(self, path=None, env=None, warn=None):
        self.path = path
        self.env = env
        self.warn = warn or (lambda message: None)
        self.file = None          # the _File appended to, once there is one
        self.header = None        # the file's (or the stream's, while deferred) header
        self.header_raw = None
        self.partial = False      # the stream leaves entries out (replay --context)
        self.ids = {}             # entry id -> its index.node in the file (None: not written)
        self.leaf = None          # the parent of the next bare entry
        self.pending = []         # (bytes, entry or None, write it) waiting for creation
        self.started = False      # seen the first line

    # -- which file -----------------------------------------------------------

    def _open_existing(self):
        self.file = f = _File.open(self.path, self.env, self.warn)
        self.header, self.header_raw, self.ids, self.leaf = f.header, f.header_raw, f.ids, f.leaf

    def target(self, stream_header):
        """The file a stream with this header (a dict) goes into: FILE, else
        the one its header names (PantoError when it names none)."""
        return self.path if self.path is not None else paths.session_path(stream_header, self.env)

    def _start(self, line):
        """First line of the stream: decide which file, open it or defer."""
        self.started = True
        stream_header = line.obj if line.kind == stream.HEADER else None
        self.partial = stream.is_partial(stream_header)
        if self.path is None:
            if stream_header is None:
                raise PantoError("the stream has no session header, so it belongs to no file "
                                 "(give the session FILE to append to)")
            self.path = self.target(stream_header)
        if os.path.lexists(self.path):
            self._open_existing()
            if stream_header is not None and stream_header["id"] != self.header["id"]:
                raise PantoError(f"the stream is session {stream_header['id']} but "
                                 f"'{self.path}' is session {self.header['id']}: refusing to mix them")
        elif stream_header is None:
            raise PantoError(f"'{self.path}' does not exist and the stream has no session header "
                             f"to start it with")
        elif self.partial:
            raise PantoError(f"'{self.path}' does not exist and the stream is only part of session "
                             f"{stream_header['id']} (panto-log replay --context): nothing to create it from")
        else:
            self.header, self.header_raw = stream_header, line.raw

    def _reopen(self):
        """The path no longer names the open file: take up what is there now,
        or create the session anew from its header if nothing is. Called
        without a lock held."""
        old_id, old = self.header["id"], self.file
        self.file = None
        old.close(keep_index=False)
        if os.path.lexists(self.path):
            self._open_existing()
        elif self.partial:
            raise PantoError(f"'{self.path}' was removed while appending, and the stream is only part "
                             f"of the session: stopped (nothing to create it anew from)")
        else:
            self.ids = {}
            self.pending = [(self.header_raw, None, True)]
            self._create()
            self.pending = []
            self.warn(f"'{self.path}' was removed while appending; created it anew from its header")
            return
        if self.header["id"] != old_id:
            raise PantoError(f"'{self.path}' was replaced by another session ({self.header['id']}); "
                             f"refusing to mix them")
        self.warn(f"'{self.path}' was replaced while appending; continuing in the new file")

    # -- writing --------------------------------------------------------------

    def _hold(self):
        """The flock of the file the path names, held for this batch."""
        for _ in range(10):
            if self.file.hold():
                return
            self._reopen()
        raise PantoError(f"'{self.path}' keeps being replaced while appending; stopped")

    def _release(self):
        if self.file is not None:
            self.file.release()

    def _append(self, data, obj):
        """Write one line durably into the file at the path (unless it has the id)."""
        self._hold()
        entry_id = obj["id"]
        if entry_id in self.file.ids and not self.file.holds(entry_id):   # the index cache lied
            self.file.reread()
        if entry_id not in self.file.ids:
            self.file.append(data, obj)
        elif self.file.differs(entry_id, data):       # another appender wrote it meanwhile
            self.warn(f"entry {entry_id} is already in '{self.path}' with different content; "
                      f"kept the file's")

    def _create(self):
        """Write header + waiting entries into a new file at the path, whole
        (files.create: never over a file that appeared meanwhile)."""
        written = [(raw, obj) for raw, obj, write in self.pending if write]
        if files.create(self.path, b"".join(raw for raw, _ in written), "could not create the session file"):
            self.file = _File.created(self.path, self.header, self.header_raw, self.ids, written, self.env)
            return
        # Another appender created the file first: append what it lacks. (Made
        # in place, without hard links, it is empty until its creator holds
        # its lock: wait for that moment, not for a guess of time.)
        stream_id = self.header["id"]
        files.wait_for_content(self.path)
        self._open_existing()
        if self.header["id"] != stream_id:
            raise PantoError(f"'{self.path}' appeared meanwhile as another session ({self.header['id']}); "
                             f"refusing to mix them")
        try:
            for raw, obj, write in self.pending:
                if write and obj is not None:
                    self._append(raw, obj)
        finally:
            self._release()

    def feed_batch(self, lines, echo):
        """Take Lines that arrived together; pass echo() the bytes that may go
        downstream, once the last of them is durable (and the lock is free).
        On an error, what was durable before it is still echoed; nothing
        waiting for creation is."""
        out = []
        try:
            for line in lines:
                out.append(self._feed(line))
        except BaseException:
            if self.file is not None:   # what is known of the file may be wrong now: keep no index of it
                self.file.dirty = False
            raise
        finally:
            self._release()
            echo(b"".join(out))

    def feed(self, line):
        """Take one stream Line; return the bytes that may now be echoed."""
        out = []
        self.feed_batch([line], out.append)
        return out[0]

    def _feed(self, line):
        if not self.started:
            self._start(line)
        if line.kind == stream.HEADER:
            if self.file is not None:
                return line.raw
            self.pending.append((line.raw, None, True))
            return b""
        obj, raw = line.obj, line.raw
        if line.kind == stream.BARE:
            obj = entries.complete(obj, self.leaf, self.ids)
            raw = stream.dumps(obj)
            del self.ids[obj["id"]]        # complete() reserved it; written below
        entry_id = obj["id"]
        if self.file is not None:
            self._append(raw, obj)         # or, when the file has it, compare
            self.leaf = entry_id
            return raw
        known = entry_id in self.ids       # already in the stream (idempotent)
        self.leaf = entry_id
        if not known:
            self.ids[entry_id] = None
        self.pending.append((raw, obj, not known))
        if known or not stream.is_assistant(obj):
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
        """Close the file, keeping what is known of it in the index cache."""
        if self.file is not None:
            self.file.close()
            self.file = None


def _lines_of(data):
    """Whole lines (each ending in a line feed) one by one."""
    at = 0
    while at < len(data):
        end = data.index(b"\n", at) + 1
        yield data[at:end]
        at = end


class Batch:
    """Many entries of one session written at once (panto-log import --all):
    a new file through deferred atomic creation (§4: nothing until an
    assistant entry, then header and entries whole), or entries added to an
    existing file under its flock with ONE fdatasync at the end (`finish`),
    not one per line. Entries whose id the file has are left out. A crash
    before `finish` can leave unsynced lines or a torn last line: the next
    open recovers the file (a torn tail is cut) and the lines come again,
    recognised by id. (Lines from a stream go through Writer: durable one
    by one.)"""

    LIMIT = 4 << 20         # bytes held in memory while the file is not created yet

    def __init__(self, path, header, header_raw, env=None, warn=None, sync_dir=True, exists=None):
        """exists: whether the file is there, when the caller has just looked
        (else it is looked for here); one that appears meanwhile is found at
        its creation, which never replaces a file (_create)."""
        self.path, self.env, self.warn = path, env, warn or (lambda message: None)
        self.sync_dir = sync_dir      # False: the caller syncs the directory of a new file
        self.header, self.header_raw = header, header_raw
        self.file = None
        self.pending = [header_raw] if header_raw is not None else []
        self.pending_size = 0
        self.pending_lines = 0      # the entries' lines in pending (after the header)
        self.ids = set()
        self.assistant = False
        self.buf, self.buf_size = [], 0
        self.written = 0
        self.lean = False         # made by this batch: no index nodes kept
        self.look = False         # True: `made` says what the file this batch makes whole holds
        self.made = None          # then (stamp, os.stat, its bytes), looked at after its last change
        if os.path.lexists(path) if exists is None else exists:
            self._open()
        elif header_raw is None:
            raise PantoError(f"'{path}' does not exist and there is no session header to start it with")

    def _open(self):
        self.file = f = _File.open(self.path, self.env, self.warn)
        if self.header is not None and f.header.get("id") != self.header.get("id"):
            self.close()
            raise PantoError(f"'{self.path}' is session {f.header.get('id')}, not {self.header.get('id')}: "
                             f"refusing to mix them")
        if not f.hold():
            self.close()
            raise PantoError(f"'{self.path}' was replaced while opening it; try again")

    def has(self, entry_id):
        return entry_id in self.ids or (self.file is not None and entry_id in self.file.ids)

    def add(self, raw, obj, eid=None, assistant=False):
        """One entry's line (bytes with its line feed) and the entry; False
        when the session has it. obj None: the entry's id and whether it is an
        assistant message are given, and the line is parsed if need be."""
        if obj is not None:
            eid = obj["id"]
        if self.has(eid):
            return False
        if self.file is None:
            self.ids.add(eid)
            self.pending.append(raw)
            self.pending_size += len(raw)
            self.pending_lines += 1
            self.assistant = self.assistant or (assistant if obj is None else stream.is_assistant(obj))
            if self.assistant and self.pending_size > self.LIMIT:
                self._create()
            return True
        f = self.file
        if not self.lean:
            f.ids[eid] = index.node(obj if obj is not None else orjson.loads(raw), f.size + self.buf_size,
                                    f.size + self.buf_size + len(raw))
        f.leaf = eid
        self.buf.append(raw)
        self.buf_size += len(raw)
        self.written += 1
        if self.buf_size >= 1 << 20:
            self._flush()
        return True

    def add_lines(self, data, count, assistant):
        """The lines of `count` entries the session cannot have (each line
        whole), all at once: only before the file is made (a Batch of a path
        that had no file), and for a session whose every entry comes once
        (the reader gives each id once). assistant: whether one of them is
        an assistant message. They are held, whatever their size (they are
        in memory already), so that `finish` makes the file whole at once."""
        self.pending.append(data)
        self.pending_size += len(data)
        self.pending_lines += count
        self.assistant = self.assistant or assistant

    def _flush(self):
        f = self.file
        if self.buf:
            start = f.size
            try:
                files.write_all(f.fd, b"".join(self.buf))
            except OSError as e:
                f._cut_back(start, e)
            f.size += self.buf_size
            f.lines += len(self.buf)
            f.dirty = not self.lean
            self.buf, self.buf_size = [], 0

    def _create(self, last=False):
        """The file made of what is pending; last: nothing is added after
        (finish), so the file made is not opened again."""
        data = b"".join(self.pending)
        seen = []

        def look(fd):
            stamp = persist.now()
            st = os.fstat(fd)
            if st.st_nlink == 1 and st.st_size == len(data):    # linked or renamed, and nobody added to it since
                seen.append((stamp, st, data))

        if files.create(self.path, data, "could not create the session file", self.sync_dir,
                        look if last and self.look else None):
            lines, self.pending_lines = self.pending_lines + 1, 0
            self.written += lines - 1
            if last:
                self.pending, self.ids, self.lean = [], set(), True
                if seen:
                    self.made = seen[0]
                return
            # What this run adds next has ids of its own (the reader gives each once):
            # no node is kept per entry, and so no index cache is written for the file.
            self.file = _File.created(self.path, self.header, self.header_raw, {}, [], self.env)
            self.file.size, self.file.lines, self.file.dirty = len(data), lines, False
            self.lean = True
            self.file.hold()
            self.pending, self.ids = [], set()
            return
        # created meanwhile by another writer: add what it lacks
        waiting, self.pending, self.ids, self.pending_lines = self.pending[1:], [], set(), 0
        files.wait_for_content(self.path)
        self._open()
        for chunk in waiting:       # (a chunk of add_lines holds several lines, perhaps as a memoryview)
            for raw in _lines_of(bytes(chunk)):
                self.add(raw, stream.loads(raw))

    def finish(self):
        """Make everything added durable: create the file (when an assistant
        entry came), or write what is buffered and fdatasync once. Returns the
        number of entries written; None when the session is still deferred
        (no assistant entry yet: nothing was written)."""
        if self.file is None:
            if not self.assistant:
                return None
            self._create(last=True)
            if self.lean:       # made whole, and synced, by files.create
                return self.written
        # (or another writer made it first: what it lacks was added to it, to write and sync)
        self._flush()
        if self.written:
            try:
                os.fdatasync(self.file.fd)
            except OSError as e:
                raise files.failed(self.path, e, "could not make the session durable") from None
        return self.written

    def close(self):
        if self.file is not None:
            self.file.close()
            self.file = None
