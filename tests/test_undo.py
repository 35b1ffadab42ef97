"""Undo: write and edit keep what a file held before (content-addressed, private),
their results record the change, and the rule /rewind restores by (pantolib.undo)."""
import hashlib
import os
import stat

from conftest import run
from tool_term import results, stream_with, tool


def sha(data):
    return hashlib.sha256(data).hexdigest()


def store(isolated):
    return isolated.parent / "home" / ".local" / "share" / "panto" / "undo"


def test_write_and_edit_results_carry_the_digests_and_the_store_keeps_the_before_contents(isolated):
    (isolated / "old.txt").write_bytes(b"one\ntwo\n")
    (isolated / "e.txt").write_bytes(b"alpha beta\n")
    data = stream_with(("write", {"path": "old.txt", "content": "new\n"}),
                       ("write", {"path": "sub/fresh.txt", "content": "made\n"}),
                       ("edit", {"path": "e.txt", "old_text": "beta", "new_text": "gamma"}))
    blocks = results(tool(data, "--yes"), data)
    assert [b.get("isError", False) for b in blocks] == [False] * 3
    assert blocks[0]["change"] == {"path": str(isolated / "old.txt"), "before": sha(b"one\ntwo\n"),
                                   "after": sha(b"new\n")}
    assert blocks[1]["change"] == {"path": str(isolated / "sub" / "fresh.txt"), "before": None,
                                   "after": sha(b"made\n")}
    assert blocks[2]["change"] == {"path": str(isolated / "e.txt"), "before": sha(b"alpha beta\n"),
                                   "after": sha(b"alpha gamma\n")}
    undo = store(isolated)
    assert sorted(os.listdir(undo)) == sorted([sha(b"one\ntwo\n"), sha(b"alpha beta\n")])
    assert (undo / sha(b"one\ntwo\n")).read_bytes() == b"one\ntwo\n"
    assert (undo / sha(b"alpha beta\n")).read_bytes() == b"alpha beta\n"
    for d in (undo, undo.parent):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    for name in os.listdir(undo):
        assert stat.S_IMODE(os.stat(undo / name).st_mode) == 0o600
    # panto-log show names the change for people
    p = run(["panto-log", "show", "-"], input=tool(data, "--yes").stdout)
    assert p.returncode == 0, p.stderr
    assert f"*changed `{isolated / 'old.txt'}`: {sha(b'new' + bytes([10]))[:12]} →" in p.stdout.decode()


def test_a_failed_edit_records_no_change_and_keeps_nothing(isolated):
    (isolated / "e.txt").write_bytes(b"alpha\n")
    data = stream_with(("edit", {"path": "e.txt", "old_text": "zeta", "new_text": "x"}))
    [block] = results(tool(data, "--yes"), data)
    assert block["isError"] and "change" not in block
    assert not store(isolated).exists()


def test_changes_and_restore(isolated):
    """The rule /rewind uses: before from a file's first change, after from its
    last; a file changed since is told apart; absent files are removed."""
    from pantolib import undo

    a, b = isolated / "a.txt", isolated / "b.txt"
    a.write_bytes(b"A0")
    ra, ba = undo.before(str(a))
    a.write_bytes(b"A1")
    c1 = undo.change(ra, ba, b"A1")["change"]
    ra, ba = undo.before(str(a))
    a.write_bytes(b"A2")
    c2 = undo.change(ra, ba, b"A2")["change"]
    rb, bb = undo.before(str(b))
    b.write_bytes(b"B1")
    c3 = undo.change(rb, bb, b"B1")["change"]
    entries = [{"type": "message", "message": {"role": "user", "content": [
        {"type": "toolResult", "toolUseId": "x", "content": "ok", "change": c} for c in (c1, c2, c3)]}}]
    found, commands = undo.changes(entries)
    assert [(f.path, f.before, f.after) for f in found] == [(str(a), sha(b"A0"), sha(b"A2")),
                                                            (str(b), None, sha(b"B1"))]
    assert commands == []
    assert not any(f.changed_since() for f in found)
    b.write_bytes(b"B by hand")
    assert found[1].changed_since()
    assert [undo.restore(f) for f in found] == [None, None]
    assert a.read_bytes() == b"A0" and not b.exists()
