"""/rewind puts back the files write and edit changed, on a real terminal
against a scripted server (SPEC §9 "At work": Undo)."""
import json

import pytest

from conftest import repl_env
from repl_term import Term
from sse_server import openai_text, openai_tools


@pytest.fixture
def env(srv, tmp_path):
    return repl_env(srv, tmp_path)


def call(cid, name, **args):
    return (cid, name, json.dumps(args))


def test_rewind_puts_back_three_edits_and_a_write_and_leaves_a_file_changed_since(isolated, srv, env):
    before = {"a.txt": b"alpha\nkeep me\n", "b.py": b"def f():\n    return 1\n",
              "c.md": "# caf\xe9\n\ttabs\r\nend".encode(), "d.bin": b"\x00\xffold bytes\n"}
    for name, data in before.items():
        (isolated / name).write_bytes(data)
    (isolated / "e.txt").write_bytes(b"e0\n")
    srv.push(openai_text("Hello."),
             openai_tools([call("c1", "edit", path="a.txt", old_text="alpha", new_text="ALPHA"),
                           call("c2", "edit", path="b.py", old_text="return 1", new_text="return 2"),
                           call("c3", "edit", path="c.md", old_text="tabs", new_text="spaces"),
                           call("c4", "write", path="d.bin", content="all new\n"),
                           call("c5", "write", path="new.txt", content="did not exist\n"),
                           call("c6", "edit", path="e.txt", old_text="e0", new_text="e1")]),
             openai_tools([call("c7", "bash", command="echo by-a-command >> e.txt")]),
             openai_text("Done."))
    t = Term(["--yes"], env)
    t.expect("> ")
    t.turn("hi", "Hello.")
    t.turn("change the files", "Done.")
    assert (isolated / "a.txt").read_bytes() == b"ALPHA\nkeep me\n"
    assert (isolated / "e.txt").read_bytes() == b"e1\nby-a-command\n"
    t.line("/rewind")
    t.expect("rewind to (number, Enter to cancel): ")
    t.line("2")
    t.expect("taken back: change the files")
    listing = t.expect("put the 5 files back as they were? [y/n]: ")
    for name in ("a.txt", "b.py", "c.md", "d.bin", "new.txt", "e.txt"):
        assert name in listing
    assert "e.txt  (changed since" in listing
    assert "$ echo by-a-command >> e.txt" in listing           # what bash did is named, not undone
    t.line("y")
    t.expect("also put back e.txt, changed since (those later changes are lost)? [y/n]: ")
    t.line("n")
    t.expect("put back new.txt")
    t.expect("> ")
    for name, data in before.items():
        assert (isolated / name).read_bytes() == data, name
    assert not (isolated / "new.txt").exists()
    assert (isolated / "e.txt").read_bytes() == b"e1\nby-a-command\n"     # left alone
    t.send("\x15")
    assert t.quit() == 0


def test_rewind_answered_no_leaves_every_file_as_it_is(isolated, srv, env):
    (isolated / "a.txt").write_bytes(b"one\n")
    srv.push(openai_tools([call("c1", "edit", path="a.txt", old_text="one", new_text="two")]),
             openai_text("Done."))
    t = Term(["--yes"], env)
    t.expect("> ")
    t.turn("change it", "Done.")
    t.line("/rewind 1")
    t.expect("put it back as it was? [y/n]: ")
    t.line("n")
    t.expect("no file was put back")
    t.expect("> ")
    assert (isolated / "a.txt").read_bytes() == b"two\n"
    t.send("\x15")
    assert t.quit() == 0
