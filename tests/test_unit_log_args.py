"""panto-log's two commands of every turn (`append [FILE]`, `replay
[--context] [SESSION | --last]`) are parsed without docopt: the answer is
docopt's, for every argument list the shortcut takes; it leaves every other
to docopt."""
import itertools
import os
import subprocess

import pytest
from docopt import DocoptExit, docopt

from pantolib.cmd import log

WORDS = ["x", "y", "--last", "--context", "--la", "--cont", "-", "--", "--at=3", "--no-repair", "-h", "append"]


def docopts(argv):
    try:
        return dict(docopt(log.__doc__, argv, version="v"))
    except (DocoptExit, SystemExit):
        return None


@pytest.mark.parametrize("command", ["append", "replay", "tree", "import"])
def test_what_the_shortcut_takes_docopt_answers_alike(command):
    taken = 0
    for n in range(4):
        for rest in itertools.product(WORDS, repeat=n):
            argv = [command, *rest]
            got = log._plain(argv)
            if got is not None:
                assert got == docopts(argv), argv
                taken += 1
    assert taken == {"append": 4, "replay": 14}.get(command, 0)     # (a word may be "append": a file so named)


@pytest.mark.parametrize("argv", [["append"], ["append", "f.jsonl"], ["replay"], ["replay", "f.jsonl"],
                                  ["replay", "--last"], ["replay", "--context", "f.jsonl"],
                                  ["replay", "--last", "--context"], ["replay", "abc", "--context"]])
def test_the_forms_of_a_turn_are_taken(argv):
    assert log._plain(argv) == docopts(argv)


def test_a_turn_does_not_import_docopt(tmp_path, isolated):
    """The real commands: a replay and an append of a session start without
    docopt; a replay with --at imports it (docopt parses that)."""
    path = tmp_path / "s.jsonl"
    lines = (b'{"type":"session","version":1,"id":"0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee",'
             b'"timestamp":"2026-04-25T17:40:15.990Z","cwd":"/w"}\n'
             b'{"type":"message","id":"00000001","parentId":null,"timestamp":"2026-04-25T17:40:16.000Z",'
             b'"message":{"role":"user","content":[{"type":"text","text":"hi"}]}}\n'
             b'{"type":"message","id":"00000002","parentId":"00000001","timestamp":"2026-04-25T17:40:17.000Z",'
             b'"message":{"role":"assistant","content":[{"type":"text","text":"hello"}],"provider":"openai",'
             b'"model":"gpt-4o","stopReason":"stop","usage":{"input":10,"output":3}}}\n')
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")

    def imports(*argv, stdin=b""):
        p = subprocess.run(["panto-log", *argv], input=stdin, env=env, capture_output=True, timeout=60)
        assert p.returncode == 0, p.stderr
        return {row.split("|")[-1].strip() for row in p.stderr.decode().splitlines() if row.startswith("import time:")}

    assert "docopt" not in imports("append", str(path), stdin=lines)
    assert path.read_bytes() == lines
    assert "docopt" not in imports("replay", str(path))
    assert "docopt" not in imports("replay", "--context", str(path))
    assert "docopt" in imports("replay", "--no-repair", str(path))
