"""pantolib.cache on its own, on real files: a cache reads back only whole
and of its version (else as empty), is written 0600 in a 0700 folder
whatever the umask, and a write that cannot be done only returns False."""
import os
import stat
import time
import zlib

import orjson
import pytest

from pantolib import cache


def _mode(p):
    return stat.S_IMODE(os.stat(p).st_mode)


def test_save_and_load(tmp_path, isolated):
    file = cache.path("x-cache.json")
    assert file == os.path.join(os.environ["XDG_CACHE_HOME"], "panto", "x-cache.json")
    assert cache.path("x.json", {"HOME": "/h"}) == "/h/.cache/panto/x.json"
    old = os.umask(0)
    try:
        assert cache.save(file, 3, {"a": [1, "é"]}, {"key": "k1"}) is True
    finally:
        os.umask(old)
    assert _mode(file) == 0o600 and _mode(os.path.dirname(file)) == 0o700
    assert cache.load(file, 3) == {"a": [1, "é"]}
    assert cache.load(file, 3, {"key": "k1"}) == {"a": [1, "é"]}
    assert cache.load(file, 3, {"key": "k2"}) is None      # another key
    assert cache.load(file, 4) is None                     # another version
    assert cache.load(str(tmp_path / "missing"), 3) is None
    assert [f for f in os.listdir(os.path.dirname(file)) if f.endswith(".tmp")] == []


@pytest.mark.parametrize("data", [
    b"",
    b'{"version":3,"crc32":0}',                            # no line feed: not whole
    b"not json\n{}",
    b"[3]\n{}",
    b'{"version":3,"crc32":1}\n{"a":1}',                   # the body does not match its CRC
    b'{"version":3,"crc32":%d}\n{"a":' % zlib.crc32(b'{"a":'),   # matches, but is cut JSON
])
def test_a_cache_that_is_not_whole_reads_as_none(tmp_path, data):
    file = tmp_path / "c.json"
    file.write_bytes(data)
    assert cache.load(str(file), 3) is None


def test_a_whole_cache_written_by_hand_reads(tmp_path):
    body = orjson.dumps([1, 2])
    file = tmp_path / "c.json"
    file.write_bytes(orjson.dumps({"version": 3, "crc32": zlib.crc32(body)}) + b"\n" + body)
    assert cache.load(str(file), 3) == [1, 2]


def test_what_cannot_be_saved_returns_false(tmp_path):
    assert cache.save(str(tmp_path / "c.json"), 1, {"set": {1, 2}}) is False      # not JSON
    assert cache.save(str(tmp_path / "c.json"), 1, 2**70) is False                 # too big for orjson
    (tmp_path / "file").write_text("x")
    assert cache.save(str(tmp_path / "file" / "c.json"), 1, {}) is False           # no folder there
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "c.json").mkdir()                                            # a folder in the way
    assert cache.write_private(str(tmp_path / "d" / "c.json"), b"x") is False
    assert os.listdir(tmp_path / "d") == ["c.json"]                                # its temporary file removed
    assert not os.path.exists(tmp_path / "c.json")


def test_key_depends_on_every_part_and_the_zone(monkeypatch):
    k = cache.key("a", [1, 2])
    assert k == cache.key("a", [1, 2]) and type(k) is bytes
    assert k != cache.key("a", [1, 3]) and k != cache.key("a") and k != cache.key("a", (1, 2))
    assert cache.key("a", [1, 2]) != cache.key("a", [1, 2], None) and cache.key(True) != cache.key(1)
    monkeypatch.setenv("TZ", "XST+5")
    time.tzset()
    try:
        assert cache.zone()[:3] == ["XST+5", 5 * 3600, 5 * 3600]
        assert cache.key("a", [1, 2]) != k
    finally:
        monkeypatch.undo()
        time.tzset()
    assert cache.key("a", [1, 2]) == k


def test_idents(tmp_path):
    (tmp_path / "f").write_text("abc")
    st = os.stat(tmp_path / "f")
    assert cache.idents([("f", st)]) == [("f", st.st_dev, st.st_ino, 3, st.st_mtime_ns, st.st_ctime_ns)]


def test_recall_what_was_remembered_under_its_key():
    k1, k2 = cache.key("k1"), cache.key("k2")
    assert cache.recall("memo.json", k1) is None
    cache.remember("memo.json", k1, "report ✓\n".encode(), ("a note",), 1)
    assert cache.recall("memo.json", k1) == ("report ✓\n".encode(), ["a note"], 1)
    assert cache.recall("memo.json", k2) is None
    cache.remember("memo.json", k2, b"other", [], 0)
    assert cache.recall("memo.json", k1) is None and cache.recall("memo.json", k2) == (b"other", [], 0)


def test_key_is_the_same_bytes_whatever_is_shared_or_interned():
    """marshal's format 0 has no references: a value written twice, or a string
    the interpreter interned, gives the bytes a fresh copy gives."""
    import sys

    name = "".join(["se", "ssion"])
    shared = ("p", 1, 2)
    one = cache.key({"--by": name}, [shared, shared], "/a/\udcff")     # a file name that is not UTF-8
    two = cache.key({"--by": sys.intern("session")}, [("p", 1, 2), tuple(["p", 1, 2])], "/a/\udcff")
    assert one == two


def test_a_memo_that_is_not_whole_or_not_ours_is_forgotten():
    k = cache.key("k")
    cache.remember("memo.memo", k, b"out\n", ["n\u00e9"], 0)
    path = cache.path("memo.memo")
    good = open(path, "rb").read()
    assert good.startswith(b"panto-memo 2 ") and k in good
    assert cache.recall("memo.memo", k) == (b"out\n", ["n\u00e9"], 0)
    head, body = good.split(b"\n", 1)
    for bad in (b"", b"panto-memo", head + b"\n" + body[:-1], head + b"\n" + body + b"x",
                good.replace(b"out", b"our"), good.replace(b"panto-memo 2", b"panto-memo 3"),
                head.replace(b"panto-memo", b"other-memo") + b"\n" + body, b"panto-memo 2 x y z w\n"):
        with open(path, "wb") as f:
            f.write(bad)
        assert cache.recall("memo.memo", k) is None, bad
    assert os.stat(path).st_mode & 0o777 == 0o600
