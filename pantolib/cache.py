"""The private caches under $XDG_CACHE_HOME/panto/ (else ~/.cache/panto/).

panto-ls keeps there what it lists of each session file (ls-cache.json),
panto-cost the token sums of each file and how far they reach
(cost-cache.json); each also remembers its last output whole, with what it
depended on (ls-report.memo, cost-report.memo), and its last command line
as parsed (ls-args.memo, cost-args.memo: cli.parse). All hold text from sessions
(first prompts, names, model ids), so they are written 0600 in a 0700
folder whatever the umask, whole or not at all (a temporary file renamed
over the old one). A cache that is missing, unreadable, of another version
or that makes no sense is treated as empty and rebuilt; one that cannot be
written only costs speed. Deleting the folder (or `panto-cost --no-cache`,
`panto-ls --no-cache`) is always safe.
"""
import os

from pantolib import paths


def path(name, env=None):
    return os.path.join(paths.cache_dir(env), name)


def load(file, version, head=None):
    """The `data` a cache file holds for this version, or None (missing, another
    version, or not whole: its first line holds the version and a CRC-32 of the
    rest). With `head`, only a file whose first line also holds these items is
    read on (a key that differs costs one short read)."""
    import zlib

    import orjson

    try:
        with open(file, "rb") as f:
            first = f.readline(4096)
            top = orjson.loads(first) if first.endswith(b"\n") else None
            if type(top) is not dict or top.get("version") != version:
                return None
            if head is not None and any(top.get(k) != v for k, v in head.items()):
                return None
            body = f.read()
        if top.get("crc32") != zlib.crc32(body):
            return None
        return orjson.loads(body)
    except (OSError, orjson.JSONDecodeError):
        return None


def save(file, version, data, head=None):
    """Write the cache file (its first line the version, a CRC-32 of the rest
    and `head`); False if it could not be."""
    import zlib

    import orjson

    try:
        body = orjson.dumps(data)
    except (TypeError, orjson.JSONEncodeError):
        return False
    top = orjson.dumps({"version": version, "crc32": zlib.crc32(body), **(head or {})}) + b"\n"
    return write_private(file, top, body)


def write_private(file, *parts):
    """Write parts (bytes) as the whole of `file`: 0600 in a 0700 folder whatever
    the umask, atomically (a temporary file renamed over the old one); False if
    it could not be. Every cache file is written through here."""
    from pantolib import files   # only a cache that is written needs it

    directory = os.path.dirname(file)
    tmp = f"{file}.{os.getpid()}.tmp"
    try:
        files.make_dirs(directory)
        os.chmod(directory, 0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)
            for part in parts:
                files.write_all(fd, part)
        finally:
            os.close(fd)
        os.replace(tmp, file)
        return True
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False


def key(*parts):
    """What a remembered output depends on (plain values: str, int, bool, None,
    lists, tuples, dicts), with panto's and Python's versions and the time
    zone, as bytes: the key of `recall` and `remember`, compared whole (no
    hash: two keys are equal only if all they say is). marshal's format 0
    writes the same values as the same bytes, whatever the interpreter's
    sharing of them; it is the C library's speed with no import to pay for
    (this is the whole work of a remembered report, besides the stats)."""
    import marshal
    import sys

    from pantolib import __version__

    parts = [dict(p) if isinstance(p, dict) else p for p in parts]   # docopt's options are a dict subclass
    return marshal.dumps([__version__, sys.version, zone(), *parts], 0)


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


MEMO_VERSION = 2
_MEMO = b"panto-memo"


def recall(name, k):
    """(output bytes, notes, status) remembered under key k in cache file `name`, or None.

    The file is a line `panto-memo VERSION CRC KEY OUT META` (the CRC-32 of
    the output and META, and the three lengths), then the key's bytes, the
    output's, and META: the notes and the status (marshal). A key that
    differs costs reading it; orjson is never imported here.
    """
    import marshal
    import zlib

    try:
        with open(path(name), "rb") as f:
            head = f.readline(200).split()
            if len(head) != 6 or head[0] != _MEMO or head[1] != b"%d" % MEMO_VERSION:
                return None
            crc, n_key, n_out, n_meta = (int(x) for x in head[2:])
            if n_key != len(k) or f.read(n_key) != k:
                return None
            out, meta = f.read(n_out), f.read(n_meta + 1)   # two reads: the output is not copied
        if len(out) != n_out or len(meta) != n_meta or zlib.crc32(meta, zlib.crc32(out)) != crc:
            return None
        notes, status = marshal.loads(meta)
        if type(status) is not int or type(notes) is not list or any(type(n) is not str for n in notes):
            return None
        return out, notes, status
    except (OSError, ValueError, EOFError, TypeError):
        return None


def remember(name, k, out, notes, status):
    """Remember an output (bytes), its notes (str) and exit status under key k (`key`)."""
    import marshal
    import zlib

    meta = marshal.dumps((list(notes), int(status)), 0)   # an exit status may be an IntEnum
    crc = zlib.crc32(meta, zlib.crc32(out))
    head = b"%s %d %d %d %d %d\n" % (_MEMO, MEMO_VERSION, crc, len(k), len(out), len(meta))
    return write_private(path(name), head, k, out, meta)
