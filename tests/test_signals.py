"""SIGTERM and SIGHUP are taken like Ctrl-C (pantolib/signals.py): a
partial reply is kept as `aborted`, the prompt is kept, panto-log append
finishes its input, panto-tool writes the result of the call it stopped,
and no request goes out when nothing downstream can keep its reply.

The sweep sends the signal to the whole pipeline's process group (as a
closed terminal or `kill -TERM -PGID` does) at a seeded random moment of
0-2 s into `panto-log replay F | panto-send PROMPT | panto-log append F`,
against a loopback server that streams its reply over about a second.
PANTO_SIGNAL_ROUNDS sets the rounds per signal (the issue's 100 by hand).
"""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import time

import pytest

from builders import lines, read, session_file
from conftest import env_for
from procs import wait_reading
import sse_server

ROUNDS = int(os.environ.get("PANTO_SIGNAL_ROUNDS", "12"))
PIECES = [f"word{i:02d} " for i in range(40)]      # 25 ms apart: a second of streaming
REPLY = "".join(PIECES)


def pipeline(argvs, env, cwd):
    """Start the commands connected stdout to stdin, in one new process group."""
    procs, prev = [], subprocess.DEVNULL
    for k, argv in enumerate(argvs):
        p = subprocess.Popen([shutil.which(argv[0], path=env["PATH"]), *argv[1:]], stdin=prev,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd,
                             process_group=0 if k == 0 else procs[0].pid)
        if prev is not subprocess.DEVNULL:
            prev.close()
        prev = p.stdout
        procs.append(p)
    return procs


def finish(procs):
    """(statuses, stderr texts, the last command's stdout), once every command has ended."""
    out = procs[-1].stdout.read()
    errs = [p.stderr.read().decode(errors="replace") for p in procs]
    return [p.wait(60) for p in procs], errs, out


def texts(entry):
    return "".join(b.get("text", "") for b in entry["message"]["content"] if b.get("type") == "text")


def one_round(srv, env, work, path, sig, delay, n):
    """One run of the pipeline with `sig` `delay` seconds in; the checks every round owes."""
    before = len(srv.requests)
    srv.push(sse_server.openai_text(REPLY, pieces=PIECES,
                                    usage={"prompt_tokens": 20, "completion_tokens": 40}, delay=0.025))
    prompt = f"prompt {n}"
    procs = pipeline([["panto-log", "replay", path], ["panto-send", "-m", "gpt-4o", "--quiet", prompt],
                      ["panto-log", "append", path]], env, work)
    time.sleep(delay)           # the random moment (the checks below wait for events, not time)
    try:
        os.killpg(procs[0].pid, sig)
    except ProcessLookupError:
        pass                    # all done already
    statuses, errs, out = finish(procs)
    assert not any("Traceback" in e for e in errs), errs
    assert statuses[0] == 0 and statuses[2] == 0, (statuses, errs)     # replay and append finish their input
    assert statuses[1] in (0, 128 + sig), (statuses, errs)            # never killed: it stops as Ctrl-C stops it
    saved = read(path)
    assert out == saved[len(out) - len(saved):] if out else True
    entries = lines(saved)[1:]
    ids = [e["id"] for e in entries]
    assert len(ids) == len(set(ids)), "an entry written twice"
    users = [e for e in entries if e["message"]["role"] == "user" and texts(e) == prompt]
    assert len(users) == 1, (f"the prompt is lost: {prompt!r}", statuses, errs)
    replies = [e for e in entries if e["parentId"] == users[0]["id"]]
    if len(srv.requests) == before:      # no request: no reply to keep
        assert replies == [], replies
        return "no request"
    assert len(srv.requests) == before + 1
    if not replies:     # paid for, nothing arrived before the signal: said so, and nothing to keep
        assert statuses[1] == 128 + sig and "interrupted before the reply began" in errs[1], (statuses, errs)
        return "nothing arrived"
    (reply,) = replies
    stop = reply["message"]["stopReason"]
    assert stop in ("stop", "aborted"), stop
    assert REPLY.startswith(texts(reply)), texts(reply)
    if stop == "stop":
        assert texts(reply) == REPLY
        return "complete"
    assert statuses[1] == 128 + sig, (statuses, errs)
    return "aborted"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_a_signal_at_any_moment_of_a_turn_loses_no_prompt_and_no_paid_reply(isolated, srv, sig):
    work = str(isolated)
    path = session_file(work, turns=2)
    env = env_for(srv)
    rng = random.Random(sig)
    seen = {}
    for n in range(ROUNDS):
        how = one_round(srv, env, work, path, sig, rng.uniform(0, 2), n)
        seen[how] = seen.get(how, 0) + 1
    print(signal.Signals(sig).name, seen)
    assert seen.get("aborted", 0) + seen.get("complete", 0) > 0, seen


def test_no_request_when_the_appender_is_gone(isolated, srv):
    """append killed (-9) before panto-send writes: the input and the prompt
    meet a closed pipe, so no request is sent: one line, exit 1."""
    work = str(isolated)
    path = session_file(work, turns=1)
    env = env_for(srv)
    srv.push(sse_server.openai_text("never asked for"))
    send_in_r, send_in_w = os.pipe()
    append = subprocess.Popen([shutil.which("panto-log", path=env["PATH"]), "append", path],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=env, cwd=work)
    send = subprocess.Popen([shutil.which("panto-send", path=env["PATH"]), "-m", "gpt-4o", "hello"],
                            stdin=send_in_r, stdout=append.stdin, stderr=subprocess.PIPE, env=env, cwd=work)
    os.close(send_in_r)
    append.stdin.close()
    append.kill()
    assert append.wait(10) == -signal.SIGKILL
    with open(send_in_w, "wb") as f:        # only now does panto-send get its input
        f.write(read(path))
    err = send.stderr.read()
    assert send.wait(60) == 1, err
    assert err == (b"panto-send: standard output is closed: nothing downstream keeps the reply "
                   b"(the request is not sent)\n")
    assert srv.requests == []


def test_append_finishes_its_input_through_term_and_hup(isolated):
    """panto-log append ignores SIGTERM and SIGHUP as it ignores SIGINT: what
    comes after them is still written, and it ends at EOF, exit 0."""
    from builders import header, msg

    work = str(isolated)
    path = os.path.join(work, "s.jsonl")
    p = subprocess.Popen(["panto-log", "append", path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    first = header(work) + msg("a1", None, "user", "one") + msg("a2", "a1", "assistant", "two")
    p.stdin.write(first)
    p.stdin.flush()
    wait_reading(p)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        p.send_signal(sig)
    rest = msg("a3", "a2", "user", "three") + msg("a4", "a3", "assistant", "four")
    p.stdin.write(rest)
    p.stdin.close()
    out, err = p.stdout.read(), p.stderr.read()
    assert p.wait(60) == 0, err
    assert out == first + rest == read(path)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_panto_tool_stops_a_running_call_and_writes_its_result(isolated, sig):
    """SIGTERM/SIGHUP while a bash call runs: the call's group is stopped, its
    result (the output so far) and the other call's "not run" are written,
    exit 128 + the signal."""
    from builders import header, jsonl, msg

    work = str(isolated)
    use = {"type": "message", "id": "bbbbbbbb", "parentId": "aaaaaaaa", "timestamp": "2026-01-01T00:00:01.000Z",
           "message": {"role": "assistant", "provider": "openai", "model": "gpt-4o", "stopReason": "toolUse",
                       "content": [{"type": "toolUse", "id": "call_1", "name": "bash",
                                    "input": json.dumps({"command": "echo start; touch started; sleep 30; echo end"})},
                                   {"type": "toolUse", "id": "call_2", "name": "bash",
                                    "input": json.dumps({"command": "touch second"})}]}}
    stream = header(work) + msg("aaaaaaaa", None, "user", "go") + jsonl(use)
    p = subprocess.Popen(["panto-tool", "--yes", "--quiet"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=work)
    p.stdin.write(stream)
    p.stdin.close()
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(work, "started")):
        assert time.monotonic() < deadline and p.poll() is None, "the command never started"
        time.sleep(0.02)
    p.send_signal(sig)
    out, err = p.stdout.read(), p.stderr.read()
    assert p.wait(60) == 128 + sig, err
    assert err == b"panto-tool: interrupted (the results so far are passed on)\n"
    assert out.startswith(stream)
    (result,) = lines(out[len(stream):])
    first, second = result["message"]["content"]
    assert first["toolUseId"] == "call_1" and first["isError"]
    name = signal.Signals(sig).name
    assert re.fullmatch(rf"interrupted after \d+\.\d s \({name}: the call was stopped\)\nstart\n", first["content"])
    assert second["toolUseId"] == "call_2" and second["content"].startswith("not run")
    assert not os.path.exists(os.path.join(work, "second"))
    gone = subprocess.run(["pgrep", "-f", "sleep 30; echo end"], capture_output=True)
    assert gone.returncode == 1, gone.stdout


@pytest.mark.parametrize("first", [False, True], ids=["resumed", "new"])
def test_a_closed_terminal_ends_the_repl_keeping_the_turn(isolated, srv, first):
    """The terminal closes while a reply streams (the master side of the pty
    goes away, then SIGHUP reaches the REPL's process group, as a shell sends
    it to its jobs): the prompt and the reply so far are in the session file,
    and panto exits 129."""
    from conftest import repl_env
    from repl_term import Term, make_session, read_entries, session_files

    env = repl_env(srv, isolated)
    if not first:
        make_session(srv, env, "an older question", "old answer")
    srv.push(sse_server.openai_text(REPLY, pieces=PIECES, delay=0.05))
    t = Term(["--yes", "--no-tools"] + ([] if first else ["--continue"]), env)
    t.expect("> ")
    t.line("hang up on me")
    t.expect("word03")                       # the reply streams
    os.close(t.fd)                           # the terminal is gone ...
    os.killpg(t.p.pid, signal.SIGHUP)        # ... and its shell hangs up its jobs
    assert t.p.wait(60) == 128 + signal.SIGHUP
    (path,) = session_files(isolated)
    entries = read_entries(path)
    user = [e for e in entries if e["type"] == "message" and texts(e) == "hang up on me"]
    assert len(user) == 1
    (reply,) = [e for e in entries if e.get("parentId") == user[0]["id"]]
    assert reply["message"]["stopReason"] in ("aborted", "stop")
    assert texts(reply).startswith("word00 word01 word02 word03") and REPLY.startswith(texts(reply))


def test_the_table_has_a_row_for_every_command():
    from pantolib import launch, signals

    for name in launch.MODULES:
        assert len(signals.row(name, ["--help"])) == len(signals.SIGNALS), name
    assert signals.row("panto-log", ["append", "F"]) == (signals.IGNORE,) * 3
    assert signals.row("panto-send", []) == signals.row("panto-tool", []) == (signals.HOLD,) * 3
    assert signals.row("panto", [])[1:] == (signals.END,) * 2


def test_a_reply_nothing_keeps_is_cut_short(isolated, srv):
    """The appender goes away while the reply streams: panto-send stops
    reading it (the rest is not paid for), one line, exit 1."""
    work = str(isolated)
    path = session_file(work, turns=1)
    srv.push(sse_server.openai_text(REPLY, pieces=PIECES, delay=0.05))
    r, w = os.pipe()
    send = subprocess.Popen([shutil.which("panto-send"), "-m", "gpt-4o", "--live", "hello"],
                            stdin=subprocess.PIPE, stdout=w, stderr=subprocess.PIPE, env=env_for(srv), cwd=work)
    os.close(w)
    send.stdin.write(read(path))
    send.stdin.close()
    err = b""
    while b"word03" not in err:             # the reply streams
        piece = os.read(send.stderr.fileno(), 65536)
        assert piece, err
        err += piece
    os.close(r)                             # the appender is gone
    err += send.stderr.read()
    assert send.wait(60) == 1, err
    assert err.endswith(b"panto-send: standard output is closed: nothing downstream keeps the reply "
                        b"(the request is cut short)\n"), err
    assert b"word39" not in err             # the rest was never read
