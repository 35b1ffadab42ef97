"""What panto remembers between runs: one room, one format, one writer and reader.

Every cache and memo lives here: the listing (ls-cache), the token sums of
each file (cost-cache), the remembered reports, their parts and parses (*.memo), the
context index of each session file (index/HASH), the fields servers refused
(refused, in the state directory) and the import's record of each source
(importing.py, in the state directory). A cache only ever costs or saves
time: one that is missing, not whole, of other code, or not ours is read as
empty and written anew; one that cannot be written only costs speed.

The format. A first line

    panto-persist FORMAT NAME CODE LENGTH CRC

then LENGTH bytes of body whose CRC-32 is CRC. NAME says which cache it is
(a file copied over another is not taken for it), CODE is the fingerprint of
the installed code (`code`): an upgrade, or an edited install at the same
`__version__`, invalidates every cache and memo at once. A file is written
whole or not at all (a temporary file, 0600, renamed over the old one, in a
0700 folder whatever the umask; not fsynced: the CRC finds what a crash
left). It is read with O_NOFOLLOW|O_NONBLOCK and fstat, and refused unless
it is a regular file owned by this user, with no access for group or others,
and within its size bound: a FIFO, a symlink to /dev/zero, a foreign or huge
file are never waited on, read or trusted.

A file's identity is (device, inode, size, mtime, ctime) in nanoseconds
(`ident`). An entry about a file keeps the identity it saw and the time it
looked (`now`, taken before the file is stat'ed or read); it is believed on
identity alone unless git's "racy" rule says the file may have changed
within the same timestamp tick (`racy`), or the filesystem is known to
stamp every change after a stat anew (`settles`). Where identity cannot tell (racy,
or the file grew), `covers` compares the CRC-32 of the whole covered range,
[0, offset), with the one kept: an edit anywhere before the offset, even of
the same length and with the mtime put back, is found; the file is then read
again from its first byte. (CRC-32 finds every accidental change of a range;
it is no defence against someone forging a matching one in their own cache.
It runs at ~3 GB/s, so checking a grown file costs a fraction of parsing it.)
"""
import os

FORMAT = 1
MAGIC = b"panto-persist"
LIMIT = 64 << 20          # the largest body read back (bytes); a larger file is not ours
HEAD = 256                # the first line is shorter than this
SECOND = 1_000_000_000
COARSE = 2 * SECOND       # a whole-second mtime: a filesystem with 1 s (FAT: 2 s) timestamps
FINE = 20_000_000         # else the kernel's coarse clock: a tick of 1 to 10 ms, and its lag


def ident(st):
    """A file's identity and state, from its os.stat: [device, inode, size, mtime, ctime] (ns)."""
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def now():
    """The time an entry is stamped with (ns): take it before the stat and the read it records."""
    import time

    return time.time_ns()


def racy(kept, stamp):
    """git's racy rule: may the file whose identity is `kept` have been changed
    again within the same timestamp tick, after an entry stamped `stamp` looked
    at it (so that its identity would not show it)? True when its mtime or ctime
    is not older than the stamp by a tick: 2 s for a whole-second time (a
    filesystem with 1 s timestamps, or FAT's 2 s), else 20 ms (the kernel stamps
    files from a clock that ticks every 1 to 10 ms). ctime counts as well as
    mtime: an edit that puts the mtime back (cp -p, touch -r) moves the ctime."""
    if type(stamp) is not int:
        return True
    for t in kept[3:5]:
        if t + (COARSE if t % SECOND == 0 else FINE) > stamp:
            return True
    return False


def fresh(kept, stamp, st, settled=False):
    """Is an entry that kept identity `kept` (stamped `stamp`) still true of the file
    whose os.stat is st, on identity alone (the same identity, and not racy)?
    settled: `kept` came from a stat made after the file's last change, on a
    filesystem that stamps every later change anew (`settles`): never racy."""
    now = ident(st)
    return kept == now and (settled is True or not racy(now, stamp))


_SETTLES = {}   # device -> settles' answer, once per process
PROBE_NS = 500_000   # a probe slower than this proves nothing (two timer ticks are >= 1 ms apart)


def settles(path, dev):
    """Does the filesystem holding the file at path (on device dev) give the
    first change after a stat a ctime of its own, even within one timestamp
    tick? Linux 6.13's multigrain timestamps do (ext4, xfs, btrfs, tmpfs): a
    stat marks the inode, and its next change takes a fine-grained time. Then
    an identity taken by a stat after the file's last change tells every
    change made after it, and git's racy rule has nothing to guard: a file a
    command has just written is believed on identity by the next, instead of
    being compared by content (~35 ms for 100 MB). Found by a probe, once per
    device per process (~30 us): an unnamed file (O_TMPFILE) in the same
    folder, changed after a stat three times, each time with a new ctime,
    all within half a millisecond (a coarse clock ticks at most every 1 ms, so
    it cannot have moved three times). Anything else (no O_TMPFILE, another
    device, a slow probe, one ctime alike) answers False: the racy rule stays."""
    got = _SETTLES.get(dev)
    if got is None:
        got = _SETTLES[dev] = _probe(os.path.dirname(os.path.abspath(path)), dev)
    return got


PROBES = 5     # a probe that was only too slow is made again, at most this many times in all


def _probe(folder, dev):
    """settles' probe. One that saw a ctime of its own for every change but
    took too long proves nothing either way (a busy process: each system
    call may wait for the GIL), and is made again, up to PROBES times; a
    coarse clock cannot pass any of them. With both CPUs kept busy and
    eight threads beside it, 179 and 189 single probes of 200 passed, and
    199 and 200 of 200 that could be made 5 times (an import --all probes
    in such a process: a failed answer holds for its whole run)."""
    import time

    try:
        fd = os.open(folder, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
    except (AttributeError, OSError):
        return False
    try:
        for _ in range(PROBES):
            start = time.monotonic_ns()
            os.write(fd, b"x")
            st = os.fstat(fd)
            if st.st_dev != dev:
                return False
            last = st.st_ctime_ns
            for _ in range(3):
                os.write(fd, b"x")
                ctime = os.fstat(fd).st_ctime_ns
                if ctime == last:
                    return False
                last = ctime
            if time.monotonic_ns() - start < PROBE_NS:
                return True
        return False
    except OSError:
        return False
    finally:
        os.close(fd)


_BUFFERS = []   # crc's buffers, read into again and again (list.pop and append: safe in threads)


def crc(fd, end, start=0, value=0):
    """The CRC-32 of bytes start..end of the open file fd, continuing `value`
    (the CRC of the bytes before start); None when the file is shorter."""
    import zlib

    if start >= end:
        return value
    # (a new buffer per call is faulted in page by page: the CRC of 3,000 files, 408 MB,
    # took 0.29 s so, 0.20 s with one buffer kept; one 100 MB file 39 -> 30 ms)
    buf = _BUFFERS.pop() if _BUFFERS else bytearray(1 << 20)
    try:
        with memoryview(buf) as view:
            while start < end:
                n = os.preadv(fd, [view[:min(end - start, len(view))]], start)
                if not n:
                    return None
                value = zlib.crc32(view[:n], value)
                start += n
        return value
    finally:
        _BUFFERS.append(buf)


def covers(fd, st, kept, offset, value):
    """Does the file open as fd (st: its fstat) still begin with the range [0, offset)
    that an entry saw (identity `kept`, CRC-32 `value`)? The same device and inode,
    not shorter, the byte before the offset a line feed, and the same CRC of the
    whole range: then only what follows the offset can be new."""
    if (type(kept) is not list or len(kept) != 5 or kept[:2] != [st.st_dev, st.st_ino]
            or type(offset) is not int or type(value) is not int or not 0 <= offset <= st.st_size):
        return False
    if offset and os.pread(fd, 1, offset - 1) != b"\n":
        return False
    return crc(fd, offset) == value


_code = None


def code():
    """The fingerprint of the code that computes what is remembered: panto's
    version, Python's, and the identity of every file of the installed pantolib
    package (its modules and data, not __pycache__), as 16 hex digits (CRC-32
    and Adler-32 of them). Computed once per process (~70 stats)."""
    global _code
    if _code is None:
        import marshal
        import sys
        import zlib

        from pantolib import __version__

        root = os.path.dirname(os.path.abspath(__file__))
        seen, todo = [], [root]
        while todo:
            d = todo.pop()
            try:
                with os.scandir(d) as it:
                    found = sorted(it, key=lambda e: e.name)
            except OSError:
                continue
            for e in found:
                try:
                    if e.is_dir(follow_symlinks=False):
                        if e.name != "__pycache__":
                            todo.append(e.path)
                        continue
                    st = e.stat()
                except OSError:
                    continue
                seen.append((e.path[len(root):], st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        data = marshal.dumps([__version__, sys.version, root, seen], 0)
        _code = "%08x%08x" % (zlib.crc32(data), zlib.adler32(data))
    return _code


# -- the files -----------------------------------------------------------------------------

def path(name, env=None):
    """Where the cache `name` lives: $XDG_CACHE_HOME/panto/NAME (else ~/.cache/panto)."""
    from pantolib import paths

    return os.path.join(paths.cache_dir(env), name)


def read(file, name, limit=LIMIT, prefix=b""):
    """The body of `file` (a read-only memoryview of the bytes read) if it
    holds the cache `name`, whole, written by this code, and is a private
    regular file of ours within `limit` bytes; else None. `prefix`: None too
    unless the body begins with it, found reading only the first line and as
    many bytes (a memo of another key costs no more). The file is read once
    into one buffer, and the body is a view of it, not a copy: a report's
    memo is megabytes, and each copy of it was a few ms of a report where
    nothing changed."""
    import stat
    import zlib

    try:
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077
                or st.st_size > limit + HEAD):
            return None
        data = bytearray(st.st_size + 1)    # one byte more: a file that grew meanwhile reads long
        view = memoryview(data)
        got = 0
        if prefix:
            got = os.readv(fd, [view[:HEAD + len(prefix)]])
            nl = data.find(b"\n", 0, min(got, HEAD))
            if nl < 0 or not data.startswith(prefix, nl + 1, got):    # (a memoryview compares 4x slower)
                return None
        if got < len(data):
            got += os.readv(fd, [view[got:]])
        if got != st.st_size:     # it changed meanwhile (a writer renames: never ours)
            return None
    except OSError:
        return None
    finally:
        os.close(fd)
    nl = data.find(b"\n", 0, HEAD)
    head = bytes(view[:nl]).split(b" ") if nl > 0 else ()
    if (len(head) != 6 or head[0] != MAGIC or head[1] != b"%d" % FORMAT or head[2] != name.encode()
            or head[3] != code().encode() or not head[4].isdigit() or not head[5].isdigit()):
        return None
    body = view[nl + 1:got].toreadonly()
    if len(body) != int(head[4]) or zlib.crc32(body) != int(head[5]):
        return None
    return body


def write(file, name, *parts):
    """Write parts (bytes) as the body of the cache `name` at `file`: whole or not
    at all, 0600 in a 0700 folder; False if it could not be."""
    import zlib

    from pantolib import files   # only a cache that is written needs it

    value, length = 0, 0
    for part in parts:
        value, length = zlib.crc32(part, value), length + len(part)
    head = b"%s %d %s %s %d %d\n" % (MAGIC, FORMAT, name.encode(), code().encode(), length, value)
    directory = os.path.dirname(file)
    tmp = f"{file}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        files.make_dirs(directory)
        os.chmod(directory, 0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)
            files.write_all(fd, head)
            for part in parts:
                files.write_all(fd, part)
        finally:
            os.close(fd)
        os.replace(tmp, file)
        return True
    except OSError:
        files.unlink_quietly(tmp)
        return False


def load(file, name, limit=LIMIT):
    """The JSON value a cache file holds (`read`), or None."""
    import orjson

    body = read(file, name, limit)
    if body is None:
        return None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


def save(file, name, value):
    """Write a JSON value as the cache `name` (`write`); False if it could not be."""
    import orjson

    try:
        body = orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        return False
    return write(file, name, body)


# -- remembered outputs --------------------------------------------------------------------

def key(*parts):
    """What a remembered output depends on (plain values: str, int, bool, None,
    lists, tuples, dicts), with the time zone, as bytes: the key of `recall`
    and `remember`, compared whole (no hash: two keys are equal only if all
    they say is; the code's fingerprint is in every file's first line).
    marshal's format 0 writes the same values as the same bytes, whatever the
    interpreter's sharing of them, at the C library's speed."""
    import marshal

    parts = [dict(p) if isinstance(p, dict) else p for p in parts]   # docopt's options are a dict subclass
    return marshal.dumps([zone(), *parts], 0)


def zone():
    """What says which time zone local days are read in: $TZ, the offsets, /etc/localtime."""
    import time

    try:
        st = os.stat("/etc/localtime")
        local = [st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]
    except OSError:
        local = None
    return [os.environ.get("TZ"), time.timezone, time.altzone, list(time.tzname), local]


def idents(listed):
    """(path, device, inode, size, mtime, ctime) of (path, os.stat) pairs, for a key."""
    return [(p, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) for p, st in listed]


def recall(name, k, stats=(), env=None, newest=None):
    """(output, notes, status) remembered under key k (`key`) in the memo
    `name`, or None: none, another key, or one of the files it depends on
    (`stats`: their os.stat) racy against the memo's stamp (`racy`). `newest`:
    the newest mtime or ctime of those files, when known (then, unless it is
    within a tick of the stamp, no stat is looked at one by one). A memo's
    body is its key, whole, then (stamp, notes, status, the output's length)
    and the output's bytes as they are: a memo of another key is told from
    the first bytes that differ, without reading the rest, and the output is
    a read-only view of what was read (a report's is megabytes), not a copy."""
    import marshal

    head = _memo_head(k)
    body = read(path(name, env), name, prefix=head)
    if body is None:
        return None
    try:
        got = marshal.loads(body[len(head):])    # (it stops where its value ends: the output follows)
    except (ValueError, EOFError, TypeError):
        return None
    if type(got) is not tuple or len(got) != 4:
        return None
    stamp, notes, status, length = got
    if (type(status) is not int or type(notes) is not list or any(type(n) is not str for n in notes)
            or type(length) is not int or not 0 <= length <= len(body) - len(head)):
        return None
    out = body[len(body) - length:]
    if not stats:
        return out, notes, status
    if type(stamp) is not int:
        return None
    old = stamp - COARSE        # a time older than this is racy by no rule: the common case, in one compare
    if newest is not None and newest <= old:
        return out, notes, status
    for st in stats:
        if (st.st_mtime_ns > old or st.st_ctime_ns > old) and racy(ident(st), stamp):
            return None
    return out, notes, status


def remember(name, k, stamp, out, notes, status, env=None):
    """Remember an output (bytes), its notes (str) and exit status under key k,
    stamped `stamp` (`now`, taken before the files it depends on were stat'ed)."""
    import marshal

    rest = marshal.dumps((stamp, list(notes), int(status), len(out)), 0)   # a status may be an IntEnum
    return write(path(name, env), name, _memo_head(k), rest, out)


def _memo_head(k):
    """What a memo's body begins with: the key's length, then the key."""
    return b"%d\n" % len(k) + k
