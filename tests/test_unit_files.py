"""pantolib.files on its own, on real files under tmp_path: folders made
0700, files created whole or not at all and never over another, stale
temporary files removed, byte ranges sent by sendfile or by reading."""
import array
import errno
import fcntl
import os
import signal
import stat
import tempfile
import termios
import threading

import pytest

from pantolib import files
from pantolib.errors import PantoError


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_make_dirs_makes_each_missing_parent_0700(tmp_path):
    old = os.umask(0o077 ^ 0o777)   # a umask that would leave everything open
    try:
        made = files.make_dirs(str(tmp_path / "a" / "b" / "c"))
    finally:
        os.umask(old)
    assert made == [str(tmp_path / "a"), str(tmp_path / "a" / "b"), str(tmp_path / "a" / "b" / "c")]
    assert [_mode(d) for d in made] == [0o700] * 3
    assert files.make_dirs(str(tmp_path / "a" / "b")) == []
    assert files.make_dirs(str(tmp_path / "a" / "b" / ".." / "d")) == [str(tmp_path / "a" / "d")]


def test_make_dirs_refuses_a_file_in_the_way(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(FileExistsError):
        files.make_dirs(str(tmp_path / "f" / "sub"))
    with pytest.raises(FileExistsError):
        files.make_dirs(str(tmp_path / "f"))
    assert (tmp_path / "f").read_text() == "x"


def test_write_all_writes_every_byte(tmp_path):
    path = tmp_path / "out"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        files.write_all(fd, b"")
        files.write_all(fd, b"abc")
        files.write_all(fd, memoryview(b"0123456789" * 100_000))
    finally:
        os.close(fd)
    assert path.read_bytes() == b"abc" + b"0123456789" * 100_000


@pytest.mark.parametrize("one_call", [True, False])
def test_write_durably_appends_every_byte(tmp_path, monkeypatch, one_call):
    """pwritev2 with RWF_DSYNC where the system has it, else write and fdatasync: the same bytes."""
    if not one_call:
        monkeypatch.setattr(files, "_dsync", False)
    path = tmp_path / "session"
    path.write_bytes(b"first\n")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    other = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        files.write_durably(fd, b"abc\n")
        os.write(other, b"from another descriptor\n")     # the end moved: still written at the end
        files.write_durably(fd, memoryview(b"0123456789" * 100_000 + b"\n"))
        files.write_durably(fd, b"")
    finally:
        os.close(fd)
        os.close(other)
    assert path.read_bytes() == (b"first\nabc\nfrom another descriptor\n" + b"0123456789" * 100_000 + b"\n")
    assert files._dsync is (one_call and hasattr(os, "RWF_DSYNC"))


def test_write_all_finishes_a_short_write():
    """A signal that interrupts a blocked write to a full pipe makes it return
    short; write_all writes the rest (the reader starts only then)."""
    r, w = os.pipe()
    capacity = fcntl.fcntl(r, fcntl.F_GETPIPE_SZ)
    data = bytes(range(256)) * (4 * capacity // 256)
    got, readers, ticks = bytearray(), [], []

    def read():
        while chunk := os.read(r, 1 << 16):
            got.extend(chunk)

    def on_alarm(signum, frame):
        queued = array.array("i", [0])
        fcntl.ioctl(r, termios.FIONREAD, queued)
        ticks.append(queued[0])
        # the writer is blocked on a full pipe (or, after a minute, never was: read anyway, and fail)
        if not readers and (queued[0] == capacity or len(ticks) > 3000):
            signal.setitimer(signal.ITIMER_REAL, 0)
            readers.append(threading.Thread(target=read))
            readers[0].start()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 0.02, 0.02)
    try:
        files.write_all(w, data)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        os.close(w)
        for reader in readers:
            reader.join(timeout=60)
        os.close(r)
    assert len(readers) == 1 and ticks[-1] == capacity   # so the first write was cut short
    assert bytes(got) == data


def test_failed_names_the_file_and_the_reason(tmp_path):
    e = files.failed("/x/y", OSError(errno.ENOSPC, "No space left on device"), "cannot write")
    assert isinstance(e, PantoError) and str(e) == "'/x/y': cannot write: No space left on device"
    assert str(files.failed("/x/y", OSError("odd"), "cannot write")) == "'/x/y': cannot write: odd"


def _tmp(directory, name, age, now):
    path = directory / name
    path.write_text("partial")
    os.utime(path, (now - age, now - age))
    return path


def test_remove_stale_removes_only_old_unlocked_temporary_files(tmp_path):
    now = os.stat(tmp_path).st_mtime + 10 * 3600
    old = _tmp(tmp_path, ".panto-old.tmp", 3601, now)
    young = _tmp(tmp_path, ".panto-young.tmp", 3599, now)
    locked = _tmp(tmp_path, ".panto-live.tmp", 7200, now)
    visible = _tmp(tmp_path, "panto-visible.tmp", 7200, now)
    other = _tmp(tmp_path, ".panto-other.json", 7200, now)
    foreign = _tmp(tmp_path, ".someone-else.tmp", 7200, now)    # not panto's: never touched
    (tmp_path / ".panto-dir.tmp").mkdir()
    os.utime(tmp_path / ".panto-dir.tmp", (now - 7200, now - 7200))
    os.symlink(old, tmp_path / ".panto-link.tmp")
    fd = os.open(locked, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        files.remove_stale(str(tmp_path), now=now)
    finally:
        os.close(fd)
    assert not old.exists()
    assert young.exists() and locked.exists() and visible.exists() and other.exists() and foreign.exists()
    assert (tmp_path / ".panto-dir.tmp").is_dir() and os.path.islink(tmp_path / ".panto-link.tmp")
    files.remove_stale(str(tmp_path), now=now)   # unlocked now
    assert not locked.exists()
    files.remove_stale(str(tmp_path / "missing"))
    files.remove_stale(str(visible))             # not a folder: nothing to do
    assert visible.exists()


def test_rename_noreplace(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.write_text("new")
    assert files._rename_noreplace(str(src), str(dst)) is True
    assert dst.read_text() == "new" and not src.exists()
    src.write_text("newer")
    with pytest.raises(FileExistsError):
        files._rename_noreplace(str(src), str(dst))
    assert dst.read_text() == "new" and src.read_text() == "newer"
    with pytest.raises(OSError) as e:
        files._rename_noreplace(str(tmp_path / "gone"), str(tmp_path / "other"))
    assert e.value.errno == errno.ENOENT and e.value.filename == str(tmp_path / "other")


def test_rename_noreplace_false_where_the_system_cannot(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    assert files._rename_noreplace(str(d), str(d / "inside")) is False   # EINVAL
    assert d.is_dir() and not (d / "inside").exists()


def test_place_without_links_falls_back(tmp_path):
    """A folder can be neither hard-linked (EPERM, as on a filesystem without
    links) nor renamed into itself (EINVAL, as without renameat2): the last
    resort, the final name created exclusively and written in place."""
    d = tmp_path / "d"
    d.mkdir()
    assert files.place(str(d), str(d / "final"), b"whole") is True
    assert (d / "final").read_bytes() == b"whole" and _mode(d / "final") == 0o600
    assert files.place(str(d), str(d / "final"), b"other") is False     # renameat2 finds it there
    assert (d / "final").read_bytes() == b"whole"
    with pytest.raises(TypeError):   # a write that fails in place leaves no half-made file
        files.place(str(d), str(d / "half"), "not bytes")
    assert sorted(os.listdir(d)) == ["final"]
    assert files.place(str(d), str(tmp_path / "moved"), b"") is True   # renameat2 does it
    assert not d.exists() and (tmp_path / "moved" / "final").read_bytes() == b"whole"


def test_place_across_filesystems_raises(tmp_path):
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    other = tempfile.mkdtemp(dir="/dev/shm")
    if os.stat(other).st_dev == os.stat(tmp_path).st_dev:
        os.rmdir(other)
        pytest.skip("/dev/shm is on the same filesystem")
    try:
        (tmp_path / "t").write_bytes(b"x")
        with pytest.raises(OSError) as e:
            files.place(str(tmp_path / "t"), os.path.join(other, "final"), b"x")
        assert e.value.errno == errno.EXDEV
        assert os.listdir(other) == []
    finally:
        os.rmdir(other)


def test_place_never_replaces_a_file(tmp_path):
    tmp, path = tmp_path / ".panto-x.tmp", tmp_path / "final"
    tmp.write_bytes(b"data")
    assert files.place(str(tmp), str(path), b"data") is True
    assert path.read_bytes() == b"data"
    tmp2 = tmp_path / ".panto-y.tmp"
    tmp2.write_bytes(b"other")
    assert files.place(str(tmp2), str(path), b"other") is False
    assert path.read_bytes() == b"data"
    with pytest.raises(FileNotFoundError):   # not a filesystem without links: the error stands
        files.place(str(tmp_path / "gone"), str(tmp_path / "final2"), b"")
    assert not (tmp_path / "final2").exists()


def test_create_makes_the_file_whole_and_its_folders(tmp_path):
    path = tmp_path / "new" / "deeper" / "s.jsonl"
    assert files.create(str(path), b'{"a":1}\n', "cannot create the session") is True
    assert path.read_bytes() == b'{"a":1}\n'
    assert _mode(path) == 0o600 and _mode(path.parent) == 0o700 and _mode(path.parent.parent) == 0o700
    assert files.create(str(path), b"other", "cannot create the session") is False
    assert path.read_bytes() == b'{"a":1}\n'
    assert sorted(os.listdir(path.parent)) == ["s.jsonl"]  # no temporary file left


def test_create_removes_stale_temporary_files_of_an_existing_folder(tmp_path):
    tmp_path = tmp_path / "d"
    tmp_path.mkdir()
    stale = _tmp(tmp_path, ".panto-abc.tmp", 2 * 3600, os.stat(tmp_path).st_mtime)
    os.utime(stale, (0, 0))
    assert files.create(str(tmp_path / "s.jsonl"), b"x", "cannot create") is True
    assert sorted(os.listdir(tmp_path)) == ["s.jsonl"]


def test_create_that_fails_leaves_nothing_behind(tmp_path):
    tmp_path = tmp_path / "d"
    tmp_path.mkdir()
    (tmp_path / "file").write_text("x")
    with pytest.raises(PantoError) as e:
        files.create(str(tmp_path / "file" / "s.jsonl"), b"x", "cannot create the session")
    assert str(e.value) == f"'{tmp_path / 'file' / 's.jsonl'}': cannot create the session: File exists"
    long = tmp_path / "a" / "b" / ("n" * 300)
    with pytest.raises(PantoError) as e:
        files.create(str(long), b"x", "cannot create the session")
    assert str(e.value) == f"'{long}': cannot create the session: File name too long"
    assert sorted(os.listdir(tmp_path)) == ["file"]   # the folders it made are gone too


def _source(tmp_path, data):
    src = tmp_path / "src"
    src.write_bytes(data)
    return os.open(src, os.O_RDONLY)


@pytest.mark.parametrize("append", [False, True])   # sendfile refuses a file opened to append: read and write
def test_send_a_byte_range(tmp_path, append):
    data = bytes(range(256)) * 300
    fd = _source(tmp_path, data)
    dst = tmp_path / "dst"
    try:
        with open(dst, "ab" if append else "wb") as out:
            files.send(fd, 100, 70_000, out.fileno(), out)
            files.send(fd, 5, 5, out.fileno(), out)               # nothing
            files.send(fd, len(data) - 10, len(data) + 50, out.fileno(), out)  # past the end: what there is
    finally:
        os.close(fd)
    assert dst.read_bytes() == data[100:70_000] + data[-10:]


def test_send_to_a_closed_pipe_raises(tmp_path):
    fd = _source(tmp_path, b"x" * 1000)
    r, w = os.pipe()
    os.close(r)
    try:
        with open(w, "wb", closefd=True) as out:
            with pytest.raises(BrokenPipeError):
                files.send(fd, 0, 1000, w, out)
            os.dup2(os.open(os.devnull, os.O_WRONLY), w)  # so closing the file object does not fail
    finally:
        os.close(fd)


def test_wait_for_content(tmp_path):
    files.wait_for_content(str(tmp_path / "missing"))
    (tmp_path / "full").write_text("x")
    files.wait_for_content(str(tmp_path / "full"), tries=1)
    empty = tmp_path / "empty"
    empty.write_text("")
    files.wait_for_content(str(empty), tries=2)   # gives up after its tries
    assert empty.read_text() == ""


def test_unlink_quietly(tmp_path):
    (tmp_path / "f").write_text("x")
    files.unlink_quietly(str(tmp_path / "f"))
    files.unlink_quietly(str(tmp_path / "f"))
    files.unlink_quietly(str(tmp_path))   # a folder is not unlinked, and no error
    assert tmp_path.is_dir() and not (tmp_path / "f").exists()


def test_kind_names_each_file_type():
    assert files.kind(stat.S_IFDIR) == "a directory"
    assert files.kind(stat.S_IFIFO) == "a FIFO"
    assert files.kind(stat.S_IFCHR) == "a character device"
    assert files.kind(stat.S_IFBLK) == "a block device"
    assert files.kind(stat.S_IFSOCK) == "a socket"
    assert files.kind(stat.S_IFREG) == "not a plain file"
