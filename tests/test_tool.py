"""panto-tool and the built-in tools, against a scratch directory."""
import fcntl
import json
import os
import pty
import select
import subprocess
import shutil
import termios
import time

import pytest

from conftest import assert_clean_error, run

SID = "0199aaaa-0000-7000-8000-00000000abcd"
HEADER = {"type": "session", "version": 1, "id": SID, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/x"}


def stream_with(*calls, header=True, extra=b""):
    """A session whose leaf assistant entry asks for `calls` (name, input text)."""
    lines = [HEADER] if header else []
    lines.append({"type": "message", "id": "aaaaaaaa", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
                  "provider": "openai", "model": "gpt-4o",
                  "message": {"role": "user", "content": [{"type": "text", "text": "go"}]}})
    content = [{"type": "toolUse", "id": f"call_{i}", "name": n,
                "input": a if isinstance(a, str) else json.dumps(a)} for i, (n, a) in enumerate(calls)]
    lines.append({"type": "message", "id": "bbbbbbbb", "parentId": "aaaaaaaa", "timestamp": "2026-01-01T00:00:01.000Z",
                  "message": {"role": "assistant", "content": content, "provider": "openai", "model": "gpt-4o",
                              "stopReason": "toolUse"}})
    return b"".join(json.dumps(x, ensure_ascii=False).encode() + b"\n" for x in lines) + extra


def tool(data, *args, env=None, timeout=60):
    """Run panto-tool with no controlling terminal (a new session)."""
    exe = shutil.which("panto-tool")
    return subprocess.run([exe, *args], input=data, capture_output=True, env=env, timeout=timeout,
                          start_new_session=True)


def results(proc, data):
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(data)
    rest = proc.stdout[len(data):].splitlines()
    assert len(rest) == 1
    entry = json.loads(rest[0])
    assert entry["parentId"] == "bbbbbbbb" and entry["message"]["role"] == "user"
    assert (entry["provider"], entry["model"]) == ("openai", "gpt-4o")
    assert len(entry["id"]) == 8
    return entry["message"]["content"]


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
    assert "bytes cut: output was 6000009 bytes" in out
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
    assert "bytes cut" in blocks[0]["content"] and "line cut" in blocks[1]["content"]
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

def tool_on_terminal(data, answers):
    """Run panto-tool with a pseudo-terminal as its controlling terminal; answer each prompt."""
    master, slave = pty.openpty()
    exe = shutil.which("panto-tool")
    p = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True, pass_fds=(slave,),
                         preexec_fn=lambda: fcntl.ioctl(slave, termios.TIOCSCTTY, 0))
    os.close(slave)
    p.stdin.write(data)
    p.stdin.close()
    p.stdin = None
    seen, answers, answered = b"", list(answers), 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and p.poll() is None:
        if select.select([master], [], [], 0.05)[0]:
            try:
                seen += os.read(master, 4096)
            except OSError:
                break
        if answers and seen.count(b"in this session: ") > answered:
            answered += 1
            os.write(master, answers.pop(0).encode() + b"\n")
    out, err = p.communicate(timeout=10)
    os.close(master)
    return p.returncode, out, err, seen


def test_confirmation_yes_no_always(isolated):
    data = stream_with(("bash", {"command": "echo one > one.txt"}),
                       ("bash", {"command": "echo two > two.txt"}),
                       ("write", {"path": "w.txt", "content": "w"}),
                       ("bash", {"command": "echo three > three.txt"}))
    code, out, err, seen = tool_on_terminal(data, ["y", "n", "maybe", "a", "a"])
    assert code == 0, err
    blocks = [b for b in json.loads(out[len(data):])["message"]["content"]]
    assert b"echo one > one.txt" in seen and b"allow bash?" in seen and b"allow write?" in seen
    assert "isError" not in blocks[0] and (isolated / "one.txt").exists()
    assert blocks[1]["isError"] and "declined" in blocks[1]["content"]
    assert not (isolated / "two.txt").exists()
    # "maybe" is asked again; "a" allows write for the session
    assert "isError" not in blocks[2] and (isolated / "w.txt").read_text() == "w"
    # bash was allowed "always" too (the 5th answer)
    assert "isError" not in blocks[3] and (isolated / "three.txt").exists()
    state = isolated.parent / "home" / ".local" / "state" / "panto" / "allow" / SID
    assert set(state.read_text().split()) == {"write", "bash"}
    # remembered: the same session runs bash and write without asking
    code, out, err, seen = tool_on_terminal(stream_with(("bash", {"command": "echo four > four.txt"})), [])
    assert code == 0 and b"allow" not in seen and (isolated / "four.txt").exists()
