"""panto-tool and the built-in tools, against a scratch directory."""
import json
import os
import subprocess
import shutil
import termios
import time

import pytest

from conftest import assert_clean_error, run
from tool_term import PASTE_OFF, PASTE_ON, SGR, Term, answered, results, stream_with, tool


def one(call, *args, env=None):
    data = stream_with(call)
    block = results(tool(data, "--yes", *args, env=env), data)[0]
    assert block["toolUseId"] == "call_0"
    return block["content"], block.get("isError", False)


def test_list_prints_schemas():
    p = run(["panto-tool", "--list"])
    schemas = json.loads(p.stdout)
    assert [s["name"] for s in schemas] == ["bash", "read", "write", "edit"]
    for s in schemas:
        assert s["description"] and s["parameters"]["type"] == "object"
        assert set(s["parameters"]["required"]) <= set(s["parameters"]["properties"])


def test_schemas_function_matches_list():
    from pantolib import tools

    assert json.loads(run(["panto-tool", "--list"]).stdout) == tools.schemas()


def test_bash_runs_in_working_directory(isolated):
    (isolated / "a.txt").write_text("x")
    out, err = one(("bash", {"command": "pwd; ls; echo oops >&2"}))
    assert not err
    assert out.split("\n")[:3] == [str(isolated), "a.txt", "oops"]


def test_bash_stdin_is_closed():
    out, err = one(("bash", {"command": "cat; echo done"}))
    assert (out, err) == ("done\n", False)


def test_bash_exit_status_is_an_error():
    out, err = one(("bash", {"command": "echo partial; exit 3"}))
    assert err and out == "partial\n[exit status 3]"


def test_bash_megabytes_of_output_are_capped():
    start = time.monotonic()
    out, err = one(("bash", {"command": "head -c 6000000 /dev/zero | tr '\\0' a; echo; echo THE-END"}))
    assert not err
    assert len(out.encode()) < 52 * 1024
    assert out.startswith("aaaa") and out.endswith("THE-END\n")
    assert "[… 2 lines, 6.0 MB: the first 25,600 and last 25,600 bytes kept]" in out
    assert time.monotonic() - start < 20


def test_bash_timeout_kills_the_whole_group(isolated):
    start = time.monotonic()
    out, err = one(("bash", {"command": "sleep 300 & echo $! > child.pid; echo started; sleep 300", "timeout": 1}))
    assert err and out.startswith("started\n") and "timed out after 1 s" in out
    assert time.monotonic() - start < 15
    pid = int((isolated / "child.pid").read_text())
    for _ in range(100):   # the orphan is reaped by init shortly after it dies
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(")")[-1].split()[0] in "ZX":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        pytest.fail("the background child of a timed-out command is still running")


def test_default_timeout_option():
    out, err = one(("bash", {"command": "sleep 30"}), "--timeout=0.5")
    assert err and "timed out after 0.5 s" in out


def test_bash_leftover_background_process_does_not_hang(isolated):
    start = time.monotonic()
    out, err = one(("bash", {"command": "sleep 300 & echo $! > bg.pid; echo ok"}))
    assert (out, err) == ("ok\n", False)
    assert time.monotonic() - start < 10


def test_read_with_offset_and_limit(isolated):
    (isolated / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    out, err = one(("read", {"path": "f.txt", "offset": 3, "limit": 2}))
    assert not err
    assert out == "line 3\nline 4\n[showing lines 3-4 of 10 (limit); continue with offset=5]"
    out, err = one(("read", {"path": "f.txt", "offset": 9}))
    assert (out, err) == ("line 9\nline 10", False)


def test_read_caps_a_large_file(isolated):
    (isolated / "big.txt").write_text("".join(f"{i:099d}\n" for i in range(5000)))
    out, err = one(("read", {"path": "big.txt"}))
    assert not err and len(out.encode()) < 51 * 1024
    assert out.endswith("(50 KB cap); continue with offset=513]")


def test_read_missing_and_binary_files(isolated):
    out, err = one(("read", {"path": "nope.txt"}))
    assert err and "No such file" in out
    (isolated / "b.bin").write_bytes(b"\x00\x01\x02")
    out, err = one(("read", {"path": "b.bin"}))
    assert err and "binary" in out


def test_write_creates_missing_directories(isolated):
    out, err = one(("write", {"path": "new/deep/f.txt", "content": "héllo\n"}))
    assert not err and "created 'new/deep/f.txt'" in out
    assert (isolated / "new" / "deep" / "f.txt").read_text() == "héllo\n"
    out, err = one(("write", {"path": "new/deep/f.txt", "content": "again"}))
    assert not err and "replaced" in out
    assert (isolated / "new" / "deep" / "f.txt").read_text() == "again"


def test_edit_exact_unique_match(isolated):
    f = isolated / "code.py"
    f.write_text("def a():\n    return 1\n\ndef b():\n    return 1\n")
    out, err = one(("edit", {"path": "code.py", "old_text": "def b():\n    return 1", "new_text": "def b():\n    return 2"}))
    assert not err and "line 4" in out
    assert f.read_text() == "def a():\n    return 1\n\ndef b():\n    return 2\n"


def test_edit_with_zero_matches(isolated):
    f = isolated / "code.py"
    f.write_text("x = 1\n")
    out, err = one(("edit", {"path": "code.py", "old_text": "y = 1", "new_text": "y = 2"}))
    assert err and "not found" in out
    assert f.read_text() == "x = 1\n"


def test_edit_with_two_matches(isolated):
    f = isolated / "code.py"
    f.write_text("return 1\nx\nreturn 1\n")
    out, err = one(("edit", {"path": "code.py", "old_text": "return 1", "new_text": "return 2"}))
    assert err and "occurs 2 times" in out and "lines 1, 3" in out
    assert f.read_text() == "return 1\nx\nreturn 1\n"


def test_unknown_tool_and_bad_arguments():
    data = stream_with(("launch", "{}"), ("bash", "{not json"), ("read", "[1]"), ("read", {"path": 7}),
                       ("edit", {"path": "x"}))
    blocks = results(tool(data, "--yes"), data)
    assert [b["toolUseId"] for b in blocks] == [f"call_{i}" for i in range(5)]
    assert all(b["isError"] is True for b in blocks)
    assert "unknown tool 'launch'" in blocks[0]["content"]
    assert "not valid JSON" in blocks[1]["content"]
    assert "JSON object" in blocks[2]["content"]
    assert "'path' must be a string" in blocks[3]["content"]
    assert "missing required argument 'old_text'" in blocks[4]["content"]


def test_success_has_no_iserror_key():
    data = stream_with(("bash", {"command": "true"}))
    block = results(tool(data, "--yes"), data)[0]
    assert "isError" not in block and block["content"] == "(no output)"


def test_no_terminal_declines_mutating_calls_but_reads(isolated):
    (isolated / "f.txt").write_text("data\n")
    data = stream_with(("bash", {"command": "touch ran"}), ("read", {"path": "f.txt"}),
                       ("write", {"path": "w.txt", "content": "x"}))
    p = tool(data)
    blocks = results(p, data)
    assert blocks[0]["isError"] and "no terminal" in blocks[0]["content"]
    assert blocks[1] == {"type": "toolResult", "toolUseId": "call_1", "content": "data"}
    assert blocks[2]["isError"]
    assert not (isolated / "ran").exists() and not (isolated / "w.txt").exists()
    assert b"--yes" in p.stderr and b"Traceback" not in p.stderr


def test_nothing_to_run_passes_through_unchanged():
    data = stream_with(("bash", {"command": "true"}))
    answered = tool(data, "--yes").stdout
    p = tool(answered, "--yes")
    assert p.returncode == 0 and p.stdout == answered
    p = tool(b"")
    assert p.returncode == 0 and p.stdout == b""


def test_pass_through_is_byte_for_byte():
    odd = (b'{"type":"bookmark","id":"cccccccc","parentId":"bbbbbbbb","timestamp":"t",  "note" : "\\u00e9 spaced"}\n')
    data = stream_with(("bash", {"command": "echo hi"})).replace(b'"go"', b'"g\\u006f \xe2\x80\xa8"')
    data += odd
    p = tool(data, "--yes")
    assert p.stdout.startswith(data)
    # the bookmark is the leaf now, not the assistant entry: its calls are still found via the path
    assert p.returncode == 0


def test_headerless_stream_and_stamp():
    data = stream_with(("bash", {"command": "echo hi"}), header=False)
    assert results(tool(data, "--yes"), data)[0]["content"] == "hi\n"


def test_api_keys_do_not_leak(isolated):
    key = "sk-test-SECRET-0123456789"
    (isolated / ".env").write_text(f"OPENAI_API_KEY={key}\n")
    env = dict(os.environ, OPENAI_API_KEY=key, MY_SERVICE_API_KEY="another-secret-value")
    data = stream_with(("bash", {"command": 'echo "env:[$OPENAI_API_KEY][$MY_SERVICE_API_KEY]"; cat .env'}),
                       ("read", {"path": ".env"}))
    p = tool(data, "--yes", env=env)
    blocks = results(p, data)
    assert key.encode() not in p.stdout + p.stderr
    assert b"another-secret-value" not in p.stdout
    assert blocks[0]["content"] == "env:[][]\nOPENAI_API_KEY=[redacted]\n"
    assert blocks[1]["content"] == "OPENAI_API_KEY=[redacted]"


def test_no_piece_of_a_key_survives_a_cut_in_capped_output(isolated):
    """A key that straddles the cut of capped output is not left half visible."""
    key = "sk-test-SECRET-abcdefghijklmnopqrstuvwxyz"
    half = 25 * 1024
    (isolated / "big.txt").write_text("x" * (half - 10) + key + "y" * 60000 + key[:5] + "\n")
    env = dict(os.environ, OPENAI_API_KEY=key)
    data = stream_with(("bash", {"command": "cat big.txt"}), ("read", {"path": "big.txt"}))
    p = tool(data, "--yes", env=env)
    blocks = results(p, data)
    assert "bytes kept]" in blocks[0]["content"] and "line cut" in blocks[1]["content"]
    for block in blocks:
        text = block["content"]
        assert "SECRET" not in text and key[:10] not in text, text[half - 40:half + 40]
        assert "[redacted]" in text
    # the read tool cuts a long line at 50 KB: a key there loses its head too
    (isolated / "edge.txt").write_text("z" * (50 * 1024 - 12) + key + "\n")
    data = stream_with(("read", {"path": "edge.txt"}))
    text = results(tool(data, "--yes", env=env), data)[0]["content"]
    assert "line cut" in text and "SECRET" not in text and key[:6] not in text


def test_bare_entry_is_a_clean_error():
    data = stream_with(("bash", {"command": "true"}))
    data += b'{"type":"message","message":{"role":"user","content":[]}}\n'
    p = tool(data, "--yes")
    assert_clean_error(p, 1, "panto-tool")


def test_bad_timeout_is_usage_error():
    assert_clean_error(run(["panto-tool", "--timeout=abc"]), 2, "panto-tool")


# -- confirmation on a real terminal ----------------------------------------------


QUESTION = b"allow bash?"


def test_confirmation_is_one_key_without_enter(isolated):
    data = stream_with(("bash", {"command": "echo one > one.txt"}), ("bash", {"command": "echo two > two.txt"}),
                       ("write", {"path": "w.txt", "content": "w"}))
    t = Term(data)
    t.expect(QUESTION)
    t.send(b"y")
    t.expect(QUESTION, 2)
    t.send(b"q")                     # not an answer: asked again, nothing decided
    t.expect(b"(press y/n)")
    t.decline(b"N")
    t.expect(b"allow write?")
    t.send(b"\r")                    # Enter alone is no
    code, out, err = t.finish()
    assert code == 0, err
    blocks = answered(out, data)
    assert "isError" not in blocks[0] and (isolated / "one.txt").exists()
    assert blocks[1]["isError"] and "declined" in blocks[1]["content"] and not (isolated / "two.txt").exists()
    assert blocks[2]["isError"] and not (isolated / "w.txt").exists()
    # cbreak while asking, the terminal's own mode afterwards
    assert t.mode[3] & termios.ICANON and t.mode[3] & termios.ECHO


def test_confirmation_shows_the_whole_command_with_escapes_visible(isolated):
    spoof = "rm -rf ~/important-stuff # \r\x1b[2K  echo hello world"
    long = "echo " + "x" * 3000 + " HIDDEN-TAIL"
    data = stream_with(("bash", {"command": spoof}), ("bash", {"command": long}))
    t = Term(data)
    t.expect(QUESTION)
    t.decline()
    t.expect(QUESTION, 2)
    t.decline()
    code, out, err = t.finish()
    assert code == 0, err
    assert b"rm -rf ~/important-stuff # ^M^[[2K  echo hello world" in t.seen
    assert b"\x1b[2K" not in t.seen and b"# \r" not in t.seen
    assert b"HIDDEN-TAIL" in t.seen          # a long command is shown whole, not cut
    assert all(b["isError"] for b in answered(out, data))


def test_keys_typed_before_the_question_are_discarded(isolated):
    data = stream_with(("bash", {"command": "touch ran"}))
    t = Term(data, typeahead=b"y")
    t.expect(QUESTION)
    assert not (isolated / "ran").exists()
    t.decline()
    code, out, err = t.finish()
    assert code == 0, err
    assert answered(out, data)[0]["isError"] and not (isolated / "ran").exists()


def test_a_paste_never_answers(isolated):
    data = stream_with(("bash", {"command": "touch ran"}))
    t = Term(data)
    t.expect(QUESTION)
    t.send(b"yy")                    # several keys in one read: a paste without brackets
    t.expect(b"several keys at once do not answer")
    t.send(b"\x1b[200~y\x1b[201~")
    t.expect(b"pasted text does not answer")
    t.send(b"\x1b[200~a")            # a paste arriving in pieces
    t.send(b"y\x1b[20")
    t.send(b"1~")
    t.expect(b"pasted text does not answer", 2)
    assert not (isolated / "ran").exists()
    t.decline()
    code, out, err = t.finish()
    assert code == 0, err
    assert answered(out, data)[0]["isError"] and not (isolated / "ran").exists()
    # bracketed paste on while asking, off afterwards
    assert t.seen.index(PASTE_ON) < t.seen.index(QUESTION) < t.seen.rindex(PASTE_OFF)


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["default", "started-with-sigint-ignored"])
def test_ctrl_c_at_the_question_is_no_and_stops_cleanly(isolated, sigint_ignored):
    data = stream_with(("bash", {"command": "touch one"}), ("bash", {"command": "touch two"}))
    t = Term(data, sigint_ignored=sigint_ignored)
    t.expect(QUESTION)
    t.send(b"\x03")                  # the terminal turns it into SIGINT
    code, out, err = t.finish()
    assert code == 130 and err == b"panto-tool: interrupted (the results so far are passed on)\n", err
    blocks = answered(out, data)
    assert blocks[0]["content"] == "not run: declined (Ctrl-C at the confirmation)" and blocks[0]["isError"]
    assert "not run" in blocks[1]["content"]
    assert not (isolated / "one").exists() and not (isolated / "two").exists()
    assert t.mode[3] & termios.ICANON and t.mode[3] & termios.ECHO
    assert t.seen.rindex(PASTE_OFF) > t.seen.index(QUESTION)


def test_no_color_in_the_question(isolated):
    data = stream_with(("bash", {"command": "true"}))
    for env, coloured in ((dict(os.environ, NO_COLOR="1"), False), (dict(os.environ), True)):
        t = Term(data, env=env)
        t.expect(QUESTION)
        t.decline()
        assert t.finish()[0] == 0
        assert bool(SGR.search(t.seen)) is coloured, t.seen


def test_invalid_json_arguments_run_nothing_and_ask_nothing(isolated):
    data = stream_with(("bash", '{"command": "touch ran"'), ("write", '{"path": "w.txt", "content": "x",}'))
    t = Term(data)
    code, out, err = t.finish()
    assert code == 0, err
    assert b"allow" not in t.seen
    for block in answered(out, data):
        assert block["isError"] and "arguments were not valid JSON" in block["content"]
        assert block["content"].startswith("not run")
    assert not (isolated / "ran").exists() and not (isolated / "w.txt").exists()


# -- "always" ------------------------------------------------------------------------

def test_always_adds_the_rule_the_question_names_for_this_run(isolated, tmp_path):
    allow = tmp_path / "allowed"
    allow.write_text("# mine\n")
    env = dict(os.environ, PANTO_ALLOW_FILE=str(allow))
    (isolated / "x").mkdir()
    data = stream_with(("bash", {"command": "ls"}), ("bash", {"command": "ls -a"}),
                       ("bash", {"command": "rm -rf x"}), ("bash", {"command": "ls; rm -rf x"}),
                       ("bash", {"command": "ls `rm -rf x`"}))
    t = Term(data, env=env)
    t.expect(b"[a]lways for 'ls' in this run")
    t.send(b"A")
    for n in (2, 3, 4):              # ls -a is not asked; the other three are, with no "always"
        t.expect(QUESTION, n)
        t.decline()
    code, out, err = t.finish()
    assert code == 0, err
    assert t.seen.count(QUESTION) == 4 and t.seen.count(b"[a]lways") == 1
    assert b"'rm' deletes or changes files" in t.seen and b"not one simple command" in t.seen
    blocks = answered(out, data)
    assert [b.get("isError", False) for b in blocks] == [False, False, True, True, True]
    assert (isolated / "x").is_dir()
    assert allow.read_text() == "# mine\n"          # read, never written
    # the next run asks again (here: no terminal, so declined)
    data = stream_with(("bash", {"command": "ls -l"}))
    assert "no terminal" in results(tool(data, env=env), data)[0]["content"]
    assert not list((isolated.parent / "home").rglob("allow*"))   # no state anywhere


def test_always_on_write_covers_the_working_directory_only(isolated):
    data = stream_with(("write", {"path": "a.txt", "content": "a"}), ("write", {"path": "b.txt", "content": "b"}),
                       ("write", {"path": "../out.txt", "content": "o"}))
    t = Term(data)
    t.expect(b"[a]lways for 'write' in this run")
    t.send(b"A")
    t.expect(b"allow write outside the working directory? [y]es [n]o \x1b")   # no "always" there
    t.decline()
    code, out, err = t.finish()
    assert code == 0, err
    assert t.seen.count(b"allow write") == 2
    assert (isolated / "b.txt").read_text() == "b" and not (isolated.parent / "out.txt").exists()
    # a write rule given on the command line: inside runs unasked, outside and edit still ask
    (isolated / "a.txt").write_text("a")
    data = stream_with(("write", {"path": "c.txt", "content": "c"}), ("write", {"path": "../out.txt", "content": "o"}),
                       ("edit", {"path": "a.txt", "old_text": "a", "new_text": "A"}))
    blocks = results(tool(data, "--rule", "write"), data)
    assert "isError" not in blocks[0] and (isolated / "c.txt").read_text() == "c"
    assert blocks[1]["isError"] and not (isolated.parent / "out.txt").exists()
    assert blocks[2]["isError"] and (isolated / "a.txt").read_text() == "a"


def test_write_and_edit_of_a_rules_file_or_in_git_always_ask(isolated):
    rules = isolated / "rules"
    rules.write_text("bash:ls\n")
    env = dict(os.environ, PANTO_ALLOW_FILE=str(rules))
    data = stream_with(("write", {"path": "rules", "content": "bash:curl\n"}),
                       ("edit", {"path": "rules", "old_text": "ls", "new_text": "curl"}))
    blocks = results(tool(data, "--rule", "write", "--rule", "edit", env=env), data)
    assert all("needs confirmation" in b["content"] for b in blocks)
    assert rules.read_text() == "bash:ls\n"
    t = Term(data, env=env)
    t.expect(b"(a rules file: asked every time)")
    t.decline()
    t.expect(b"(a rules file: asked every time)", 2)
    t.decline()
    assert t.finish()[0] == 0 and b"[a]lways" not in t.seen
    # .git: its config and hooks run commands a git rule would run unasked
    (isolated / ".git" / "hooks").mkdir(parents=True)
    data = stream_with(("write", {"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\ncurl x\n"}),
                       ("write", {"path": "sub/../.git/config", "content": "[core]\nfsmonitor = evil\n"}))
    blocks = results(tool(data, "--rule", "write", env=env), data)
    assert all("needs confirmation" in b["content"] for b in blocks)
    assert not (isolated / ".git" / "config").exists()
    assert not (isolated / ".git" / "hooks" / "pre-commit").exists()


# -- what the person sees ------------------------------------------------------------

def test_each_call_is_shown_once_on_the_terminal(isolated):
    data = stream_with(("bash", {"command": "echo MARK-$((6*7))"}), ("read", {"path": "f.txt"}))
    (isolated / "f.txt").write_text("a\nb\n")
    t = Term(data, stderr_tty=True)           # the live display is on: stderr is the terminal
    t.expect(QUESTION)
    t.send(b"y")
    code, out, err = t.finish()
    assert code == 0
    assert t.seen.count(b"echo MARK-$((6*7))") == 1      # the question is the showing
    assert b"MARK-42" in t.seen
    assert t.seen.count(b"f.txt") == 1 and b"(2 lines)" in t.seen   # read: one line


def test_live_display_plain_text(isolated):
    (isolated / "code.py").write_text("def a():\n    return 1\n\ndef b():\n    return 1\n")
    (isolated / "f.txt").write_text("one\ntwo\n")
    data = stream_with(("bash", {"command": "seq 30; echo boom >&2; exit 2"}), ("read", {"path": "f.txt"}),
                       ("edit", {"path": "code.py", "old_text": "def b():\n    return 1\n",
                                 "new_text": "def b():\n    # two\n    return 2\n"}),
                       ("write", {"path": "n.txt", "content": "x\ny\n"}))
    p = tool(data, "--yes", "--live")
    results(p, data)
    shown = p.stderr.decode()
    assert "\x1b" not in shown
    lines = shown.split("\n")
    assert lines[:14] == ["⏺ bash seq 30; echo boom >&2; exit 2", "  … (22 earlier lines not shown)",
                          *[f"  {i}" for i in range(23, 31)], "  boom", "  [exit status 2]", "⏺ read f.txt (2 lines)",
                          "⏺ edit code.py"]
    assert lines[14:] == ["  4   def b():", "  5 -     return 1", "  5 +     # two", "  6 +     return 2",
                          "  edited 'code.py': replaced 1 occurrence at line 4 (the new text is now lines 4-6)",
                          "⏺ write n.txt (4 bytes, 2 lines)", "  created 'n.txt': 4 bytes", ""]


def test_edit_diff_is_coloured_on_a_terminal_and_plain_with_no_color(isolated):
    for env, coloured in ((dict(os.environ), True), (dict(os.environ, NO_COLOR="1"), False)):
        (isolated / "f.txt").write_text("keep\nold\n")
        data = stream_with(("edit", {"path": "f.txt", "old_text": "old\n", "new_text": "new\n"}))
        t = Term(data, "--yes", env=env, stderr_tty=True)
        code, out, err = t.finish()
        assert code == 0
        assert (b"\x1b[31m  2 - old" in t.seen and b"\x1b[32m  2 + new" in t.seen) is coloured, t.seen
        assert bool(SGR.search(t.seen)) is coloured
        assert b"2 - old" in t.seen and b"2 + new" in t.seen


def test_a_key_in_the_file_does_not_reach_the_terminal_through_a_diff(isolated):
    key = "sk-proj-abcdefghijklmnop0123456789"
    (isolated / "conf.py").write_text(f"api_key = '{key}'  # v1\n")
    env = dict(os.environ, OPENAI_API_KEY=key)
    data = stream_with(("edit", {"path": "conf.py", "old_text": "# v1", "new_text": "# v2"}))
    p = tool(data, "--yes", "--live", env=env)
    results(p, data)
    assert b"api_key = '[redacted]'  # v2" in p.stderr and key[8:].encode() not in p.stderr
    t = Term(stream_with(("edit", {"path": "conf.py", "old_text": "# v2", "new_text": "# v3"})), env=env)
    t.expect(b"allow edit?")
    t.decline()
    assert t.finish()[0] == 0
    assert b"api_key = '[redacted]'  # v2" in t.seen and key[8:].encode() not in t.seen


# -- edit: the range the new text occupies ------------------------------------------------

@pytest.mark.parametrize("old,new,said", [
    ("b\n", "B1\nB2\n", "the new text is now lines 2-3"),
    ("b\n", "B\n", "the new text is now line 2"),
    ("b", "B1\nB2", "the new text is now lines 2-3"),
    ("b\nc\n", "", "removed the text at line 2"),
])
def test_edit_reports_the_lines_the_new_text_occupies(isolated, old, new, said):
    (isolated / "f.txt").write_text("a\nb\nc\n")
    out, err = one(("edit", {"path": "f.txt", "old_text": old, "new_text": new}))
    assert not err and out.endswith(said + ")" if "now" in said else said), out


# -- read: limits, and paths outside the working directory ---------------------------------

def test_read_refuses_what_is_not_a_regular_file(isolated):
    os.mkfifo(isolated / "fifo")
    (isolated / "dir").mkdir()
    for path, what in (("fifo", "a FIFO"), ("/dev/zero", "a character device"), ("dir", "a directory")):
        out, err = one(("read", {"path": path}))     # a FIFO would hang an open() for reading
        assert err and f"not a regular file ({what})" in out, out


def _limited_memory():
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (300 << 20, 300 << 20))


def test_read_never_loads_more_than_its_cap(isolated):
    with open(isolated / "huge.txt", "wb") as f:      # 1 GB, mostly a hole: only reading it costs
        f.write(b"line\n" * 30000)
        f.truncate(1 << 30)
    data = stream_with(("read", {"path": "huge.txt", "limit": 3}), ("read", {"path": "huge.txt", "offset": 29999}),
                       ("read", {"path": "huge.txt", "offset": 30001}))
    p = subprocess.run([shutil.which("panto-tool"), "--yes"], input=data, capture_output=True, timeout=60,
                       preexec_fn=_limited_memory)
    blocks = results(p, data)
    assert blocks[0]["content"] == "line\nline\nline\n[showing lines 1-3 of at least 30000 (limit); continue with offset=4]"
    assert blocks[1]["content"] == ("line\nline\n[showing lines 29999-30000 of at least 30000 (50 KB cap); "
                                    "continue with offset=30001]")
    assert "isError" not in blocks[2] and blocks[2]["content"].startswith("\x00" * 50 * 1024 + " [line cut at 50 KB]")


def test_read_outside_the_working_directory_asks(isolated, tmp_path):
    (tmp_path / "secret.txt").write_text("secret\n")
    (isolated / "inside.txt").write_text("inside\n")
    os.symlink(tmp_path / "secret.txt", isolated / "link.txt")
    (isolated.parent / "home" / ".ssh").mkdir()
    (isolated.parent / "home" / ".ssh" / "id").write_text("key\n")
    calls = [("read", {"path": p}) for p in ("../secret.txt", str(tmp_path / "secret.txt"), "link.txt", "~/.ssh/id")]
    data = stream_with(("read", {"path": "inside.txt"}), *calls)
    t = Term(data, stderr_tty=True)
    for n, key in enumerate(b"ynyy", 1):
        t.expect(b"allow read outside the working directory?", n)
        t.decline() if key == ord("n") else t.send(bytes([key]))
    code, out, err = t.finish()
    assert code == 0, err
    assert t.seen.count(b"allow read") == 4
    assert t.seen.count(b"inside.txt") == 1 and t.seen.count(b"link.txt") == 1   # each call shown once
    assert str(tmp_path / "secret.txt").encode() in t.seen    # where the symlink really leads
    contents = [b["content"] for b in answered(out, data)]
    assert contents[0] == "inside" and contents[1] == "secret" and "declined" in contents[2]
    assert contents[3] == "secret" and contents[4] == "key"
    # without a terminal: declined, with --yes: read
    home = isolated.parent / "home"
    (home / "notes.txt").write_text("notes\n")
    home_data = stream_with(("read", {"path": "notes.txt"}), ("read", {"path": ".ssh/id"}))
    p = subprocess.run([shutil.which("panto-tool")], input=home_data, capture_output=True, cwd=home, timeout=60,
                       start_new_session=True)
    blocks = results(p, home_data)     # ~/.ssh is asked about even from the home directory
    assert blocks[0]["content"] == "notes" and "needs confirmation" in blocks[1]["content"]
    blocks = results(tool(data), data)
    assert blocks[0]["content"] == "inside" and all("outside the working directory" in b["content"] for b in blocks[1:])
    assert [b["content"] for b in results(tool(data, "--yes"), data)] == ["inside", "secret", "secret", "secret", "key"]


# -- write and edit replace files atomically ------------------------------------------------

def test_write_and_edit_replace_the_file_keeping_its_mode(isolated):
    f = isolated / "script.sh"
    f.write_text("echo old\n")
    f.chmod(0o750)
    inode = f.stat().st_ino
    out, err = one(("write", {"path": "script.sh", "content": "echo new\n"}))
    assert not err and f.read_text() == "echo new\n"
    assert f.stat().st_mode & 0o7777 == 0o750 and f.stat().st_ino != inode   # renamed over, not rewritten
    out, err = one(("edit", {"path": "script.sh", "old_text": "new", "new_text": "newer"}))
    assert not err and f.read_text() == "echo newer\n" and f.stat().st_mode & 0o7777 == 0o750
    assert sorted(os.listdir(isolated)) == ["script.sh"]


def test_write_through_a_symlink_replaces_its_target(isolated):
    (isolated / "real.txt").write_text("old")
    os.symlink("real.txt", isolated / "link.txt")
    for call in (("write", {"path": "link.txt", "content": "new"}),
                 ("edit", {"path": "link.txt", "old_text": "new", "new_text": "newer"})):
        out, err = one(call)
        assert not err, out
    assert os.readlink(isolated / "link.txt") == "real.txt" and (isolated / "real.txt").read_text() == "newer"


def _small_files():
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))    # a disk that is full after 4 KB


def test_a_failed_write_leaves_the_original_and_no_temporary_file(isolated):
    f = isolated / "f.txt"
    f.write_text("original\n")
    big = "x" * 100_000
    data = stream_with(("write", {"path": "f.txt", "content": big}),
                       ("edit", {"path": "f.txt", "old_text": "original", "new_text": big}),
                       ("write", {"path": "new.txt", "content": big}))
    p = subprocess.run([shutil.which("panto-tool"), "--yes"], input=data, capture_output=True, timeout=60,
                       preexec_fn=_small_files)
    blocks = results(p, data)
    for block in blocks:
        assert block["isError"] and "File too large" in block["content"], block
        assert "left as it was" in block["content"]
    assert f.read_text() == "original\n"
    assert sorted(os.listdir(isolated)) == ["f.txt"]


def test_write_refuses_what_is_not_a_regular_file(isolated):
    os.mkfifo(isolated / "fifo")
    for call in (("write", {"path": "fifo", "content": "x"}), ("edit", {"path": "fifo", "old_text": "a", "new_text": "b"})):
        out, err = one(call)
        assert err and "not a regular file (a FIFO)" in out


# -- secrets: the one rule ------------------------------------------------------------------

def test_keys_follow_the_one_secret_rule(isolated):
    short = "local-key-12"                              # under 16 characters: not a secret
    key = "sk-proj-abcdefghijklmnop0123456789"
    (isolated / "f.txt").write_text(f"{short}\n{key[len('sk-proj-'):]}\n")
    env = dict(os.environ, LOCAL_API_KEY=short, OPENAI_API_KEY=key)
    data = stream_with(("read", {"path": "f.txt"}), ("bash", {"command": "echo [$LOCAL_API_KEY] [$PANTO_ALLOW_FILE]"}))
    blocks = results(tool(data, "--yes", env=dict(env, PANTO_ALLOW_FILE=str(isolated / "allowed"))), data)
    assert blocks[0]["content"] == f"{short}\n[redacted]"   # the key without its prefix is hidden too
    assert blocks[1]["content"] == "[] []\n"               # no key variable, no allowance file for commands
