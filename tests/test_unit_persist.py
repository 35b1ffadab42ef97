"""pantolib.persist on its own, on real files: a cache reads back only whole,
of its name and of this code (else as nothing), only from a private regular
file of ours within its bound (never waiting on a FIFO nor reading /dev/zero);
it is written 0600 in a 0700 folder whatever the umask, and a write that
cannot be done only returns False. Identity, git's racy rule and the covered
range's checksum decide when an entry about a file may be believed."""
import os
import stat
import threading
import time
import zlib

import pytest

from builders import settled
from pantolib import persist


def _mode(p):
    return stat.S_IMODE(os.stat(p).st_mode)


def test_save_and_load(tmp_path, isolated):
    file = persist.path("x-cache")
    assert file == os.path.join(os.environ["XDG_CACHE_HOME"], "panto", "x-cache")
    assert persist.path("x", {"HOME": "/h"}) == "/h/.cache/panto/x"
    old = os.umask(0)
    try:
        assert persist.save(file, "x-cache", {"a": [1, "é"]}) is True
    finally:
        os.umask(old)
    assert _mode(file) == 0o600 and _mode(os.path.dirname(file)) == 0o700
    assert persist.load(file, "x-cache") == {"a": [1, "é"]}
    assert persist.load(file, "y-cache") is None                # another cache's name
    assert persist.load(str(tmp_path / "missing"), "x-cache") is None
    assert [f for f in os.listdir(os.path.dirname(file)) if f.endswith(".tmp")] == []
    head = open(file, "rb").readline()
    assert head.startswith(b"panto-persist 1 x-cache " + persist.code().encode() + b" ")


def _whole(name, body, code=None, crc=None, length=None):
    return b"panto-persist 1 %s %s %d %d\n" % (name, (code or persist.code()).encode(),
                                               len(body) if length is None else length,
                                               zlib.crc32(body) if crc is None else crc) + body


@pytest.mark.parametrize("data", [
    b"",
    b"panto-persist 1 c",                                     # no line feed: not whole
    b"not a cache\n{}",
    _whole(b"c", b'{"a":1}')[:-1],                           # cut
    _whole(b"c", b'{"a":1}') + b"x",                         # longer than it says
    _whole(b"c", b'{"a":1}', crc=1),                          # the body does not match its CRC
    _whole(b"c", b'{"a":2}', crc=zlib.crc32(b'{"a":1}')),     # one digit changed
    _whole(b"c", b'{"a":1}', code="0123456789abcdef"),        # written by other code
    _whole(b"c", b'{"a":1}').replace(b"panto-persist 1", b"panto-persist 2"),   # another format
    _whole(b"c", b'{"a":'),                                   # matches, but is cut JSON
])
def test_a_cache_that_is_not_whole_or_not_ours_reads_as_none(tmp_path, data):
    file = tmp_path / "c"
    file.write_bytes(data)
    os.chmod(file, 0o600)
    assert persist.load(str(file), "c") is None


def test_a_whole_cache_written_by_hand_reads(tmp_path):
    file = tmp_path / "c"
    file.write_bytes(_whole(b"c", b"[1,2]"))
    os.chmod(file, 0o600)
    assert persist.load(str(file), "c") == [1, 2]
    os.chmod(file, 0o644)                         # readable by others: not private, not trusted
    assert persist.load(str(file), "c") is None
    os.chmod(file, 0o606)
    assert persist.load(str(file), "c") is None


def _in_time(fn, seconds=5):
    """fn() in a thread that must end within `seconds` (nothing may block)."""
    got = []
    t = threading.Thread(target=lambda: got.append(fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "blocked"
    return got[0]


def test_what_is_not_a_private_regular_file_within_its_bound_is_never_read(tmp_path):
    file = str(tmp_path / "c")
    assert persist.save(file, "c", [1]) and persist.load(file, "c") == [1]
    os.unlink(file)
    os.mkfifo(file, 0o600)
    assert _in_time(lambda: persist.load(file, "c")) is None          # never waits for a writer
    os.unlink(file)
    os.symlink("/dev/zero", file)
    assert _in_time(lambda: persist.load(file, "c")) is None          # never reads for ever
    os.unlink(file)
    good = str(tmp_path / "good")
    assert persist.save(good, "c", [1])
    os.symlink(good, file)
    assert persist.load(file, "c") is None                            # a symlink, even to a good one
    os.unlink(file)
    assert persist.save(file, "c", list(range(1000)))
    assert persist.load(file, "c", limit=100) is None                 # larger than its bound
    assert persist.load(file, "c") == list(range(1000))
    os.mkdir(str(tmp_path / "d"))
    assert persist.load(str(tmp_path / "d"), "c") is None


@pytest.mark.skipif(os.geteuid() != 0, reason="a file of another user needs root to make")
def test_a_file_of_another_user_is_not_read(tmp_path):
    file = str(tmp_path / "c")
    assert persist.save(file, "c", [1])
    os.chown(file, 4321, 4321)
    assert persist.load(file, "c") is None


def test_what_cannot_be_saved_returns_false(tmp_path):
    assert persist.save(str(tmp_path / "c"), "c", {"set": {1, 2}}) is False      # not JSON
    assert persist.save(str(tmp_path / "c"), "c", 2**70) is False                 # too big for orjson
    (tmp_path / "file").write_text("x")
    assert persist.save(str(tmp_path / "file" / "c"), "c", {}) is False           # no folder there
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "c").mkdir()                                                # a folder in the way
    assert persist.write(str(tmp_path / "d" / "c"), "c", b"x") is False
    assert os.listdir(tmp_path / "d") == ["c"]                                    # its temporary file removed
    assert not os.path.exists(tmp_path / "c")


def test_a_fifo_where_the_cache_goes_is_replaced_never_waited_on(tmp_path):
    file = str(tmp_path / "c")
    os.mkfifo(file, 0o600)
    assert _in_time(lambda: persist.save(file, "c", [1])) is True
    assert persist.load(file, "c") == [1]


def test_key_depends_on_every_part_and_the_zone(monkeypatch):
    k = persist.key("a", [1, 2])
    assert k == persist.key("a", [1, 2]) and type(k) is bytes
    assert k != persist.key("a", [1, 3]) and k != persist.key("a") and k != persist.key("a", (1, 2))
    assert persist.key("a", [1, 2]) != persist.key("a", [1, 2], None) and persist.key(True) != persist.key(1)
    monkeypatch.setenv("TZ", "XST+5")
    time.tzset()
    try:
        assert persist.zone()[:3] == ["XST+5", 5 * 3600, 5 * 3600]
        assert persist.key("a", [1, 2]) != k
    finally:
        monkeypatch.undo()
        time.tzset()
    assert persist.key("a", [1, 2]) == k


def test_idents(tmp_path):
    (tmp_path / "f").write_text("abc")
    st = os.stat(tmp_path / "f")
    assert persist.idents([("f", st)]) == [("f", st.st_dev, st.st_ino, 3, st.st_mtime_ns, st.st_ctime_ns)]
    assert persist.ident(st) == [st.st_dev, st.st_ino, 3, st.st_mtime_ns, st.st_ctime_ns]


def test_recall_what_was_remembered_under_its_key(isolated):
    k1, k2 = persist.key("k1"), persist.key("k2")
    assert persist.recall("memo", k1) is None
    persist.remember("memo", k1, persist.now(), "report ✓\n".encode(), ("a note",), 1)
    assert persist.recall("memo", k1) == ("report ✓\n".encode(), ["a note"], 1)
    assert persist.recall("memo", k2) is None
    persist.remember("memo", k2, persist.now(), b"other", [], 0)
    assert persist.recall("memo", k1) is None and persist.recall("memo", k2) == (b"other", [], 0)


def test_key_is_the_same_bytes_whatever_is_shared_or_interned():
    """marshal's format 0 has no references: a value written twice, or a string
    the interpreter interned, gives the bytes a fresh copy gives."""
    import sys

    name = "".join(["se", "ssion"])
    shared = ("p", 1, 2)
    one = persist.key({"--by": name}, [shared, shared], "/a/\udcff")     # a file name that is not UTF-8
    two = persist.key({"--by": sys.intern("session")}, [("p", 1, 2), tuple(["p", 1, 2])], "/a/\udcff")
    assert one == two


def test_a_memo_that_is_not_whole_or_not_ours_is_forgotten(isolated):
    k = persist.key("k")
    persist.remember("memo.memo", k, persist.now(), b"out\n", ["n\u00e9"], 0)
    path = persist.path("memo.memo")
    good = open(path, "rb").read()
    assert good.startswith(b"panto-persist 1 memo.memo ") and k in good
    assert persist.recall("memo.memo", k) == (b"out\n", ["n\u00e9"], 0)
    head, body = good.split(b"\n", 1)
    for bad in (b"", b"panto-persist", head + b"\n" + body[:-1], head + b"\n" + body + b"x",
                good.replace(b"out", b"our"), good.replace(b"panto-persist 1", b"panto-persist 2"),
                head.replace(b"memo.memo", b"memo.other") + b"\n" + body, b"panto-persist 1 x y z w\n"):
        with open(path, "wb") as f:
            f.write(bad)
        assert persist.recall("memo.memo", k) is None, bad
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_a_memo_of_a_racy_file_is_not_recalled(isolated, tmp_path):
    """A file changed within a timestamp tick of the memo's stamp may have
    changed again unseen: the memo is not believed."""
    f = tmp_path / "f"
    f.write_text("x")
    k = persist.key("k")
    persist.remember("m", k, persist.now(), b"out", [], 0)
    assert persist.recall("m", k, [os.stat(f)]) is None
    settled(str(f))
    persist.remember("m", k, persist.now(), b"out", [], 0)
    assert persist.recall("m", k, [os.stat(f)]) == (b"out", [], 0)


def test_racy():
    s = persist.SECOND
    fine = 1_700_000_000 * s + 123_456_789
    assert persist.racy([0, 0, 0, fine, fine], fine + persist.FINE - 1)
    assert not persist.racy([0, 0, 0, fine, fine], fine + persist.FINE)
    whole = 1_700_000_000 * s          # a filesystem with 1 s timestamps: the whole second is racy
    assert persist.racy([0, 0, 0, whole, whole], whole + s + s // 2)
    assert not persist.racy([0, 0, 0, whole, whole], whole + 2 * s)
    assert persist.racy([0, 0, 0, whole - 10 * s, fine], fine + 1)    # the mtime put back: the ctime tells
    assert persist.racy([0, 0, 0, fine, fine], None)                  # no stamp: never believed


def test_a_settled_identity_is_believed_however_recent_and_only_while_it_holds(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    st = os.stat(f)
    kept, stamp = persist.ident(st), persist.now()
    assert persist.racy(kept, stamp) and not persist.fresh(kept, stamp, st)
    assert persist.fresh(kept, stamp, st, True)
    assert not persist.fresh(kept, stamp, st, "yes")       # (read from a cache: only True counts)
    f.write_text("y")
    assert not persist.fresh(kept, stamp, os.stat(f), True)


def test_settles_only_where_every_change_after_a_stat_shows(tmp_path, monkeypatch):
    """The probe's answer agrees with the kernel's behaviour, seen directly on
    a file of the same folder: where a change right after a stat can keep the
    ctime (a coarse clock), it says no."""
    monkeypatch.setattr(persist, "_SETTLES", {})
    (tmp_path / "d").mkdir()
    f = tmp_path / "d" / "f"
    f.write_bytes(b"x")
    got = persist.settles(str(f), os.stat(f).st_dev)
    assert got in (True, False)
    fd = os.open(f, os.O_WRONLY | os.O_APPEND)
    try:
        alike = 0
        for _ in range(200):
            before = os.fstat(fd).st_ctime_ns
            os.write(fd, b"y")
            alike += os.fstat(fd).st_ctime_ns == before
    finally:
        os.close(fd)
    assert not (got and alike), (got, alike)
    if alike > 100:
        assert got is False
    assert persist.settles(str(f), os.stat(f).st_dev) is got        # once per device
    assert os.listdir(tmp_path / "d") == ["f"]                # the probe's file had no name


def test_a_probe_too_slow_every_time_proves_nothing(tmp_path, monkeypatch):
    """However often a probe that saw every change is made again, one that
    never finishes within PROBE_NS answers no (here the budget is none)."""
    monkeypatch.setattr(persist, "_SETTLES", {})
    monkeypatch.setattr(persist, "PROBE_NS", 0)
    (tmp_path / "d").mkdir()
    assert persist.settles(str(tmp_path / "d" / "f"), os.stat(tmp_path).st_dev) is False
    assert os.listdir(tmp_path / "d") == []                   # the probe's file had no name


def test_settles_says_no_where_it_cannot_probe(tmp_path, monkeypatch):
    monkeypatch.setattr(persist, "_SETTLES", {})
    proc = os.stat("/proc/self/status")
    assert persist.settles("/proc/self/status", proc.st_dev) is False     # no unnamed files there
    monkeypatch.setattr(persist, "_SETTLES", {})
    assert persist.settles(str(tmp_path / "f"), proc.st_dev) is False       # the folder is on another device


def test_code_is_the_installed_files_and_changes_with_any_of_them(tmp_path):
    """An edited install at the same version is other code: a copy of the
    package, one module touched, has another fingerprint."""
    import shutil
    import subprocess
    import sys

    import pantolib

    copy = tmp_path / "site"
    shutil.copytree(os.path.dirname(pantolib.__file__), copy / "pantolib",
                    ignore=shutil.ignore_patterns("__pycache__"))
    run = [sys.executable, "-c", "from pantolib import persist; print(persist.code())"]
    env = dict(os.environ, PYTHONPATH=str(copy))
    one = subprocess.run(run, env=env, capture_output=True, check=True, cwd=tmp_path).stdout
    assert subprocess.run(run, env=env, capture_output=True, check=True, cwd=tmp_path).stdout == one
    os.utime(copy / "pantolib" / "prices.py")
    two = subprocess.run(run, env=env, capture_output=True, check=True, cwd=tmp_path).stdout
    assert len(one.strip()) == 16 and two != one


def test_covers_finds_an_edit_anywhere_before_the_offset(tmp_path):
    f = tmp_path / "s"
    data = b"".join(b'{"n": %d}\n' % i for i in range(1000))
    f.write_bytes(data)
    fd = os.open(f, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        kept, value = persist.ident(st), persist.crc(fd, len(data))
        assert value == zlib.crc32(data)
        assert persist.covers(fd, st, kept, len(data), value)
        assert persist.crc(fd, len(data) + 1) is None             # past the end
        with open(f, "r+b") as w:                                 # same length, in the middle
            w.seek(len(data) // 2)
            w.write(b"7")
        assert not persist.covers(fd, os.fstat(fd), kept, len(data), value)
        with open(f, "r+b") as w:
            w.seek(len(data) // 2)
            w.write(data[len(data) // 2:len(data) // 2 + 1])      # put back, then grown
        with open(f, "ab") as w:
            w.write(b'{"n": 1000}\n')
        st = os.fstat(fd)
        assert persist.covers(fd, st, kept, len(data), value)     # only grew: read on from the offset
        assert not persist.covers(fd, st, kept, len(data) - 3, persist.crc(fd, len(data) - 3))   # not a line's end
        assert not persist.covers(fd, st, [0, 0] + kept[2:], len(data), value)                 # another file
    finally:
        os.close(fd)


def test_a_memo_whose_body_is_not_one_is_forgotten(isolated):
    import marshal

    k = persist.key("k")
    for body in (b"\xff not marshal", marshal.dumps([1, 2], 0), marshal.dumps((k, 0, "not bytes", [], 0), 0),
                 marshal.dumps((k, 0, b"out", ["n", 3], 0), 0), marshal.dumps((k, 0, b"out", [], "0"), 0)):
        assert persist.write(persist.path("m"), "m", body)
        assert persist.recall("m", k) is None, body
    assert persist.remember("m", k, "no stamp", b"out", [], 0)
    assert persist.recall("m", k) == (b"out", [], 0)
    assert persist.recall("m", k, [os.stat(persist.path("m"))]) is None     # no stamp: every file is racy


def test_a_memo_keeps_its_output_as_bytes_after_its_length_and_a_bad_length_is_forgotten(isolated):
    """A memo's body: the key's length and the key, (stamp, notes, status, the
    output's length), then the output as it is, handed back as a view of what
    was read. A length the body cannot hold, or fields of other types, make
    no memo."""
    import marshal

    k = persist.key("k")
    head = b"%d\n" % len(k) + k
    assert persist.remember("m", k, persist.now(), b"\x00out\xff", ["n"], 3)
    body = bytes(persist.read(persist.path("m"), "m"))
    assert body == head + marshal.dumps((marshal.loads(body[len(head):])[0], ["n"], 3, 5), 0) + b"\x00out\xff"
    got = persist.recall("m", k)
    assert got == (b"\x00out\xff", ["n"], 3) and type(got[0]) is memoryview and got[0].readonly
    fields = marshal.dumps((1, [], 0, 3), 0)
    room = len(fields) + 3
    for rest in ((1, [], 0, room + 1), (1, [], 0, -1), (1, [], 0, "3"), (1, [3], 0, 3), (1, [], "0", 3),
                 (1, [], 0), (1, [], 0, 3, 4), [1, [], 0, 3]):
        assert persist.write(persist.path("m"), "m", head + marshal.dumps(rest, 0) + b"out")
        assert persist.recall("m", k) is None, rest
    assert persist.write(persist.path("m"), "m", head + marshal.dumps((1, [], 0, room), 0) + b"out")
    assert persist.recall("m", k) == (marshal.dumps((1, [], 0, room), 0) + b"out", [], 0)   # the whole rest: it fits
