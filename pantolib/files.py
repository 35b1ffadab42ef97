"""Files that appear whole or not at all, and never over another.

A new session file is written to a hidden temporary file beside it, synced,
then put in place by a hard link, which fails when the name exists; where a
filesystem has no hard links, by renameat2(RENAME_NOREPLACE); where even that
is missing, by an exclusive creation of the final name, written in place
under its lock (`create` does it all). Temporary files an interrupted
creation left are removed later, once old and unlocked. Also the plumbing
the commands share: folders made 0700 and durable (`make_dirs`), every byte
of a write (`write_all`), a byte range of a file sent to a descriptor (`send`).
"""
import errno
import fcntl
import os

from pantolib.errors import PantoError

# How a creation that cannot use a hard link fails, by filesystem (vfat,
# some FUSE and network filesystems): then creation falls back to a rename
# that refuses to replace, or an exclusive open of the final name.
NO_LINK = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK, errno.ENOSYS,
           errno.EACCES}
TMP_PREFIX, TMP_SUFFIX = ".panto-", ".tmp"
TMP_MAX_AGE = 3600


def fsync_dir(directory):
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(directory):
    """Create the directory and any missing parents, each mode 0700 whatever
    the umask, each made durable in its parent. Returns those it created."""
    made = []
    d = os.path.abspath(directory)
    missing = []
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
            continue
        made.append(d)
        os.chmod(d, 0o700)
        try:
            fsync_dir(os.path.dirname(d))
        except OSError:
            pass    # a folder that cannot be synced is still made
    return made


def write_all(fd, data):
    """os.write until every byte is written (a short write is finished; an
    EINTR is retried by os.write itself, PEP 475). Nothing is written for b""."""
    n = os.write(fd, data) if data else 0
    if n < len(data):
        view = memoryview(data)
        while n < len(view):
            n += os.write(fd, view[n:])


def write_durably(fd, data):
    """Write all of data at the end of an O_APPEND file and make it durable,
    as os.write then os.fdatasync do: on Linux in one call, pwritev2 with
    RWF_DSYNC (the write is synced as it is made, one system call and one
    wait on the disk instead of two; where the kernel or the file system
    cannot, the two calls). A short write is finished, durably too."""
    global _dsync
    view = memoryview(data)
    n = 0
    while _dsync and n < len(view):
        try:
            n += os.pwritev(fd, [view[n:]], -1, os.RWF_DSYNC)
        except OSError as e:
            if e.errno not in (errno.ENOSYS, errno.EOPNOTSUPP):
                raise
            _dsync = False
    if n < len(view):
        write_all(fd, view[n:])
        os.fdatasync(fd)


_dsync = hasattr(os, "RWF_DSYNC")


def kind(mode):
    """What a file that is not a regular one is, in words (for a refusal)."""
    import stat

    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a plain file"


def waits(mode):
    """Whether a file of this mode may hold up whoever opens it to read (a
    FIFO waits for a writer; a device, a socket): neither a regular file nor
    a folder."""
    import stat

    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def failed(path, e, what):
    """The one-line error of a write that failed, naming the file (ENOSPC, EFBIG, ...)."""
    reason = e.strerror or str(e)
    return PantoError(f"'{path}': {what}: {reason}")


def remove_stale(directory, now=None):
    """Remove panto's own temporary files an interrupted creation left here,
    once older than an hour; a live creator holds a lock on its file."""
    import time

    now = time.time() if now is None else now
    try:
        it = os.scandir(directory)
    except OSError:
        return
    with it:
        for d in it:
            name = d.name
            if not (name.startswith(TMP_PREFIX) and name.endswith(TMP_SUFFIX)):    # only panto's own
                continue
            try:
                if not d.is_file(follow_symlinks=False) or now - d.stat(follow_symlinks=False).st_mtime < TMP_MAX_AGE:
                    continue
                fd = os.open(d.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                os.unlink(d.path)
            except OSError:
                pass
            finally:
                os.close(fd)


def _rename_noreplace(src, dst):
    """renameat2(RENAME_NOREPLACE): True if done, False when the system lacks it.
    FileExistsError when dst exists."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    AT_FDCWD, RENAME_NOREPLACE = -100, 1
    if fn(AT_FDCWD, os.fsencode(src), AT_FDCWD, os.fsencode(dst), RENAME_NOREPLACE) == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.EEXIST:
        raise FileExistsError(err, os.strerror(err), dst)
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), dst)


def place(tmp, path, data):
    """Put the finished temporary file at path without ever replacing a file
    that appeared meanwhile. True if placed, False if path exists now."""
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    except OSError as e:
        if e.errno not in NO_LINK:
            raise
    # No hard links on this filesystem.
    try:
        if _rename_noreplace(tmp, path):
            return True
    except FileExistsError:
        return False
    # Last resort: an exclusive creation of the final name, written in place
    # under its lock (an appender that finds it waits for the lock).
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.fchmod(fd, 0o600)
        write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)
    return True


def create(path, data, what, sync_dir=True, look=None):
    """Make a file at path holding data, whole or not at all: written to a
    temporary file beside it (mode 0600, locked while live), synced, then
    put in place without ever replacing a file that appeared meanwhile
    (False then). Missing directories are made (0700); on a failure no
    temporary file and none of them is left, and the error says `what`.
    sync_dir=False leaves the directory's sync, and the removal of stale
    temporary files in it, to the caller (once for many files made there).
    look: called with the descriptor of the file written (still locked) once
    it is placed and its temporary name gone, i.e. after its last change (a
    cache entry of what it holds is keyed by what it sees); where place()
    had to write another file at path, this one has no link left."""
    import tempfile

    directory = os.path.dirname(os.path.abspath(path))
    made = []
    fd = tmp = None
    try:
        made = make_dirs(directory)
        if not made and sync_dir:
            remove_stale(directory)
        fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=TMP_SUFFIX, dir=directory)
        fcntl.flock(fd, fcntl.LOCK_EX)    # a live creation: never stale
        os.fchmod(fd, 0o600)              # whatever the umask
        write_all(fd, data)
        os.fsync(fd)
        created = place(tmp, path, data)
        if created and look is not None:
            unlink_quietly(tmp)     # (before the look: removing a name changes the file's ctime)
            tmp = None
            look(fd)
        if sync_dir:
            fsync_dir(directory)
    except OSError as e:
        if fd is not None:
            os.close(fd)
            fd = None
        if tmp is not None:
            unlink_quietly(tmp)
        for d in reversed(made):
            try:
                os.rmdir(d)
            except OSError:
                break
        raise failed(path, e, what) from None
    finally:
        if fd is not None:
            os.close(fd)
        if tmp is not None:
            unlink_quietly(tmp)
    return created


def send(fd, offset, end, out_fd, out):
    """Write bytes offset..end of the open file fd to the descriptor out_fd
    by sendfile; where it cannot be used, read them and write to out (the
    binary file object of out_fd, flushed by the caller before)."""
    begin = offset
    try:
        while offset < end:
            n = os.sendfile(out_fd, fd, offset, min(end - offset, 1 << 24))
            if n == 0:
                break
            offset += n
        return
    except OSError as e:
        if isinstance(e, BrokenPipeError) or offset > begin:
            raise
    while offset < end:
        chunk = os.pread(fd, min(end - offset, 1 << 20), offset)
        if not chunk:
            break
        out.write(chunk)
        offset += len(chunk)
    out.flush()


def wait_for_content(path, tries=400):
    import time

    for _ in range(tries):
        try:
            if os.stat(path).st_size:
                return
        except FileNotFoundError:
            return
        time.sleep(0.005)


def unlink_quietly(path):
    try:
        os.unlink(path)
    except OSError:
        pass
