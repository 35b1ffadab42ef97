"""What every built-in tool shares: its error, paths, output caps, opening
and replacing files, and hiding keys (by the one rule in pantolib.secrets)."""
import os
import re
import stat

from pantolib import files

CAP = 50 * 1024          # bytes of output a tool result may carry
# the notes the tools put where they cut output (cap_bytes, read.py): a piece
# of a key left at one of these cuts is hidden too
_CUT = re.compile(r"(\n\[… [\d,]+ lines?, [^\n]* kept\]\n| \[line cut at 50 KB\])")
# files under the home directory that are asked about even inside the working directory
PRIVATE = (".ssh", ".gnupg", ".aws", ".netrc")


class ToolError(Exception):
    """A call that failed in a way the model can act on: becomes an isError result."""


def without_keys(env=None):
    """The environment for a command: no key variables, and not the path of
    PANTO_ALLOW_FILE (a command is not told where rules are kept)."""
    from pantolib.secrets import without_keys as strip

    clean = strip(env)
    clean.pop("PANTO_ALLOW_FILE", None)
    return clean


def redact(text, keys):
    """Every key replaced by the mark, and any piece of one that a cut of
    capped output left at its edges (so no part of a key survives)."""
    if not keys:
        return text
    from pantolib import secrets as rule

    text = rule.redact(text, keys)
    parts = _CUT.split(text)   # text, note, text, note, ..., text
    for i in range(0, len(parts) - 1, 2):
        parts[i], parts[i + 2] = rule.redact_edges(parts[i], parts[i + 2], keys)
    return "".join(parts)


def resolve(path, cwd):
    if not path:
        raise ToolError("'path' is empty")
    return os.path.join(cwd, os.path.expanduser(path))


def outside(path, cwd):
    """Whether a path lies outside the working directory once symlinks are
    resolved (or in one of the home directory's private places)."""
    real = os.path.realpath(path)
    base = os.path.realpath(cwd)
    if os.path.commonpath([real, base]) != base:
        return True
    home = os.path.realpath(os.path.expanduser("~"))
    return any(real == p or real.startswith(p + os.sep)
               for p in (os.path.join(home, name) for name in PRIVATE))


def open_regular(path, shown):
    """A file descriptor open for reading on a regular file, or ToolError:
    a FIFO, a device or a directory is refused without blocking on it."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(f"'{shown}' is not a regular file ({files.kind(st.st_mode)}): it was not opened")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path, shown, cap):
    """The bytes of a regular file, refusing one larger than cap bytes."""
    fd = open_regular(path, shown)
    try:
        size = os.fstat(fd).st_size
        if size > cap:
            raise ToolError(f"'{shown}' is too large ({size} bytes; at most {cap})")
        chunks, got = [], 0
        while got <= cap:
            chunk = os.read(fd, min(1 << 20, cap + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > cap:
            raise ToolError(f"'{shown}' grew past {cap} bytes while it was read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def replace_file(path, data, shown):
    """Replace (or create) the file at path with data, atomically: a temporary
    file beside it, fsync, rename over it, the old file's mode kept. A symlink
    stays a symlink: the file it points to is replaced. On any failure the
    old file is untouched and no temporary file is left. True if it existed."""
    target = os.path.realpath(path)
    directory = os.path.dirname(target)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise ToolError(f"'{shown}' is not a regular file ({files.kind(st.st_mode)}): it was left alone")
    if st is not None:
        mode = stat.S_IMODE(st.st_mode)
    else:
        umask = os.umask(0o22)
        os.umask(umask)
        mode = 0o666 & ~umask
    tmp = os.path.join(directory, f".{os.path.basename(target)}.{os.urandom(4).hex()}.panto-tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise ToolError(f"cannot write '{shown}': no temporary file can be made in its directory "
                        f"({e.strerror}); the file was left as it was") from None
    try:
        try:
            if st is not None and (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
                try:
                    os.fchown(fd, st.st_uid, st.st_gid)
                except OSError:
                    pass
            os.fchmod(fd, mode)
            files.write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise ToolError(f"cannot write '{shown}': {e.strerror or e}; the file was left as it was") from None
        raise
    try:
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
    return st is not None


def cap_bytes(head, tail, total, cap=CAP, lines=None):
    """Join a kept head and tail of `total` bytes of output (`lines` lines:
    None counts those of head and tail), with a note of what was cut:
    `[… 18,000 lines, 2.1 MB: the first 200 and last 400 lines kept]`. The
    cut falls on line ends when the kept parts hold any, else inside a line
    (then the note counts bytes kept)."""
    if total <= cap:
        return (head + tail).decode("utf-8", "replace")
    half = cap // 2
    h, t = head[:half], tail[-half:] if tail else b""
    nl = b"\n"
    if lines is None:
        lines = h.count(nl) + t.count(nl)
    last = t or h
    lines += 1 if last and not last.endswith(nl) else 0     # a last line without its end
    if h.rfind(nl) >= 0 and (not t or t.find(nl) >= 0):
        h = h[:h.rfind(nl) + 1]
        t = t[t.find(nl) + 1:] if t else t
        tail_lines = t.count(nl) + (1 if t and not t.endswith(nl) else 0)
        kept = f"the first {h.count(nl):,} and last {tail_lines:,} lines kept"
    else:
        kept = f"the first {len(h):,} and last {len(t):,} bytes kept"
    note = f"\n[… {lines:,} line{'s' * (lines != 1)}, {size(total)}: {kept}]\n"
    return h.decode("utf-8", "replace").removesuffix("\n") + note + t.decode("utf-8", "replace")


def size(n):
    """Bytes for a person: 980 bytes, 51.2 KB, 2.1 MB (powers of 1000)."""
    if n < 1000:
        return f"{n} byte{'s' * (n != 1)}"
    for unit in ("KB", "MB", "GB"):
        n /= 1000
        if n < 1000 or unit == "GB":
            return f"{n:.1f} {unit}"


def cap_text(text, cap=CAP):
    """Cap a result that is already in memory (keeps head and tail)."""
    data = text.encode("utf-8", "surrogateescape")
    if len(data) <= cap:
        return text
    return cap_bytes(data[: cap // 2], data[-(cap // 2):], len(data), cap, data.count(b"\n"))
