"""Ctrl-C at any moment: the prompt is never lost, a tool that ran keeps its
result (never "not run"), a question declines its call and ends the turn, and
the screen shows the cancel once. Real processes: panto on a pseudo-terminal,
the plumbing in real pipelines, a loopback server.

The sweep (Ctrl-C at many moments of each phase of a turn) runs a few rounds
here; bench/bench_sigint.py repl runs hundreds (PANTO_TEST_SWEEP_ROUNDS too).
"""
import fcntl
import glob
import json
import os
import pty
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time

import pytest

from builders import user_texts
from sse_server import Server, openai_text, openai_tools
from repl_term import KEY, Term as _Term

SID = "0199aaaa-bbbb-7ccc-8ddd-0000000000c1"
QUESTION = "allow bash?"
PASTE_ON = "\x1b[?2004h"
PLUMBING = ("panto-send: interrupted", "panto-tool: interrupted", "panto-log: interrupted")
SWEEP_ROUNDS = int(os.environ.get("PANTO_TEST_SWEEP_ROUNDS", "4"))


class PhaseServer(Server):
    """Answers by what the request asks, not from a queue: a request a
    Ctrl-C prevented leaves nothing behind for the next one. A prompt
    `PHASE round N` gets the reply of its phase; tool results get a text."""

    def _record(self, req):
        with self._lock:
            self.requests.append(req)
            n = len(self.requests)
        msgs = (req.body or {}).get("messages") or [{}]
        last = msgs[-1]
        if last.get("role") == "tool":
            return openai_text("noted")
        m = re.search(r"(\w+) round (\d+)", json.dumps(last))
        phase, k = (m.group(1), m.group(2)) if m else ("other", "0")
        if phase == "before":       # the first byte comes late: a Ctrl-C lands before it
            return openai_text("late reply", pieces=["late ", "reply"], delay=1.5)
        if phase == "stream":
            return openai_text("drip " * 40, pieces=["drip "] * 40, delay=0.05)
        if phase in ("tool", "ask", "bash"):
            command = f"touch ran-{phase}-{k}; echo start; sleep 20; echo end"
            return openai_tools([(f"call_{phase}_{k}_{n}", "bash", json.dumps({"command": command}))])
        return openai_text(f"reply to {phase} {k}")


class Term(_Term):
    """panto on a pseudo-terminal, in a working directory of the caller's choosing."""

    def __init__(self, args, env, cwd=None):
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 250, 0, 0))
        self.p = subprocess.Popen([shutil.which("panto", path=env.get("PATH")), *args], stdin=slave,
                                  stdout=slave, stderr=slave, env=env, cwd=cwd, start_new_session=True,
                                  preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)
        self.fd, self.buf, self.pos = master, b"", 0

    def wait(self, seconds):
        """Read what comes for this long (keeps the terminal drained)."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            self._read(min(left, 0.01))

    def sync(self, tag):
        """Wait until the REPL has taken a command typed now: the turn before it is over."""
        self.turn(f"/sync-{tag}", f"unknown command '/sync-{tag}'", timeout=60)


def environment(tmp, srv):
    home = os.path.join(tmp, "home")
    work = os.path.join(tmp, "work")
    os.makedirs(home, exist_ok=True)
    os.makedirs(work, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "PANTO_", "XDG_"))}
    env.update(HOME=home, XDG_DATA_HOME=os.path.join(home, ".local", "share"),
               XDG_CONFIG_HOME=os.path.join(home, ".config"), XDG_CACHE_HOME=os.path.join(home, ".cache"),
               XDG_STATE_HOME=os.path.join(home, ".local", "state"), PANTO_SESSION_DIR=os.path.join(home, "sessions"),
               OPENAI_BASE_URL=srv.url + "/v1", OPENAI_API_KEY=KEY, OPENAI_MODEL="gpt-4o",
               TERM="xterm-256color", LC_ALL="C.UTF-8", TMPDIR=tmp)
    return env, work


def entries_of(env):
    out = []
    for path in glob.glob(os.path.join(env["PANTO_SESSION_DIR"], "*", "*.jsonl")):
        with open(path, "rb") as f:
            out += [json.loads(x) for x in f if x.strip()][1:]
    return out


def blocks(entries, kind):
    return [b for e in entries if e["type"] == "message" for b in e["message"]["content"] if b["type"] == kind]


def sweep(rounds, seed=1, verbose=False, tmp=None, phases=("before", "stream", "tool", "ask")):
    """Ctrl-C at random moments of each phase of a turn, `rounds` times each:
    {phase: counts}. Each phase runs in one panto, resumed from a session."""
    import tempfile

    own = tmp is None
    tmp = tmp or tempfile.mkdtemp(prefix="panto-sweep-")
    rng = random.Random(seed)
    totals = {}
    srv = PhaseServer().start()
    try:
        for phase in phases:
            env, work = environment(os.path.join(tmp, phase), srv)
            c = totals[phase] = dict(rounds=0, lost_prompts=0, lost_results=0, false_not_run=0, tracebacks=0,
                                     plumbing=0, caret=0, declined=0, asked=0, requests_after_cancel=0, interrupted=0,
                                     back=[])
            t = Term([] if phase == "ask" else ["--yes"], env, cwd=work)
            t.expect("> ")
            t.turn("warm round 0", "reply to warm 0")
            for k in range(1, rounds + 1):
                text = f"{phase} round {k}"
                before = len(srv.requests)
                t.line(text)
                t.expect(text)
                entered = time.monotonic()
                if phase == "ask":
                    t.expect(QUESTION, 60)
                    c["asked"] += 1
                    t.wait(rng.uniform(0.0, 0.3))
                else:
                    low, high = (0.02, 0.5) if phase == "before" else (0.5, 2.0)
                    t.wait(max(0.0, entered + rng.uniform(low, high) - time.monotonic()))
                t.send(b"\x03")
                pressed = time.monotonic()
                t.expect(PASTE_ON, 60)          # the next prompt is being drawn
                c["back"].append(time.monotonic() - pressed)
                t.sync(f"{phase}-{k}")
                c["rounds"] += 1
                seen = t.screen[-3000:]
                entries = entries_of(env)
                if text not in user_texts(entries):
                    c["lost_prompts"] += 1
                results = {b["toolUseId"]: b for b in blocks(entries, "toolResult")}
                for use in blocks(entries, "toolUse"):
                    ran = os.path.exists(os.path.join(work, json.loads(use["input"])["command"].split()[1][:-1]))
                    result = results.get(use["id"])
                    if ran and result is None:
                        c["lost_results"] += 1
                    if ran and result is not None and str(result["content"]).startswith("not run"):
                        c["false_not_run"] += 1
                    if result is not None and use["id"].startswith(f"call_{phase}_{k}_"):
                        c["declined"] += "declined (Ctrl-C" in str(result["content"])
                        c["interrupted"] += str(result["content"]).startswith("interrupted after")
                # the turn ended with the cancel: no request carried its tool results
                c["requests_after_cancel"] += sum(1 for r in srv.requests[before:]
                                                  if (r.body.get("messages") or [{}])[-1].get("role") == "tool")
                trouble = c["lost_prompts"] + c["lost_results"] + c["false_not_run"] + c["requests_after_cancel"]
                if c["back"][-1] > 5 or "Traceback" in seen or trouble > c.get("trouble", 0):
                    c.setdefault("screens", []).append(seen)
                    c["trouble"] = trouble
            assert t.quit() == 0
            screen = t.screen
            c["tracebacks"] = screen.count("Traceback")
            c["plumbing"] = sum(screen.count(p) for p in PLUMBING)
            c["caret"] = screen.count("^C")
            if verbose:
                for screen in c.get("screens", [])[:3]:
                    print("--- a round to look at:\n" + screen, flush=True)
                print(phase, {k: v for k, v in c.items() if k not in ("back", "screens")},
                      f"prompt back: median {sorted(c['back'])[len(c['back']) // 2]:.2f}s max {max(c['back']):.2f}s",
                      flush=True)
    finally:
        srv.close()
        if own:
            shutil.rmtree(tmp, ignore_errors=True)
    return totals


def test_a_sweep_of_ctrl_c_moments_loses_nothing(tmp_path):
    totals = sweep(SWEEP_ROUNDS, seed=int(os.environ.get("PANTO_TEST_SEED", "0")) or 5, tmp=str(tmp_path))
    for phase, c in totals.items():
        assert c["rounds"] == SWEEP_ROUNDS, (phase, c)
        assert c["lost_prompts"] == 0, (phase, c)
        assert c["lost_results"] == 0, (phase, c)
        assert c["false_not_run"] == 0, (phase, c)
        assert c["tracebacks"] == 0 and c["plumbing"] == 0 and c["caret"] == 0, (phase, c)
        assert c["requests_after_cancel"] == 0, (phase, c)
    assert totals["ask"]["declined"] == totals["ask"]["asked"] == SWEEP_ROUNDS, totals["ask"]
    assert totals["tool"]["interrupted"] >= 1, totals["tool"]   # the sweep did stop running commands


@pytest.fixture
def srv():
    with PhaseServer() as s:
        yield s


def test_ctrl_c_at_a_question_declines_the_call_and_ends_the_turn(tmp_path, srv):
    env, work = environment(str(tmp_path), srv)
    t = Term([], env, cwd=work)
    t.expect("> ")
    t.line("ask round 1")
    t.expect(QUESTION, 60)
    t.send(b"\x03")
    t.expect("[cancelled]", 60)
    t.expect("> ")
    t.sync("after")
    assert t.quit() == 0
    entries = entries_of(env)
    [result] = blocks(entries, "toolResult")
    assert result["content"] == "not run: declined (Ctrl-C at the confirmation)" and result["isError"]
    assert not os.path.exists(os.path.join(work, "ran-ask-1"))
    assert len(srv.requests) == 1           # the agent loop sent nothing after it
    assert t.screen.count("[cancelled]") == 1
    assert not any(p in t.screen for p in PLUMBING) and "^C" not in t.screen and "Traceback" not in t.screen


def test_retry_after_a_cancel_sends_the_cancelled_prompt_once(tmp_path, srv):
    env, work = environment(str(tmp_path), srv)
    t = Term(["--yes"], env, cwd=work)
    t.expect("> ")
    t.turn("first round 1", "reply to first 1")
    t.line("before round 2")
    t.expect("before round 2")
    t.send(b"\x03")                         # at once: before its request, or while it waits
    t.expect("[cancelled]", 60)
    t.expect("> ")
    t.turn("/retry", "retrying: before round 2", "late reply", timeout=60)
    assert t.quit() == 0
    entries = entries_of(env)
    assert user_texts(entries) == ["first round 1", "before round 2"]
    last = srv.requests[-1].body["messages"]
    assert "before round 2" in json.dumps(last[-1]) and "first round 1" in json.dumps(last)
    assert entries[-1]["message"]["content"][0]["text"] == "late reply"
    assert entries[-1]["parentId"] == next(e["id"] for e in entries if e["type"] == "message"
                                           and "before round 2" in json.dumps(e["message"]))


def test_the_first_prompt_of_a_new_session_is_kept_for_retry(tmp_path, srv):
    env, work = environment(str(tmp_path), srv)
    t = Term(["--yes"], env, cwd=work)
    t.expect("> ")
    t.send("before round 1\r\x03")          # Enter and Ctrl-C in one read
    t.expect("[cancelled]", 60)
    t.expect("> ")
    t.turn("/retry", "late reply", timeout=60)
    assert t.quit() == 0
    assert user_texts(entries_of(env)) == ["before round 1"]


def test_a_bash_call_interrupted_mid_run_keeps_its_result_through_the_pipeline(tmp_path, srv):
    """panto-log replay F | panto-tool --yes | panto-send --tools | panto-log append F,
    and Ctrl-C (SIGINT to the whole pipeline) while `echo start; sleep 30; echo end` runs."""
    env, work = environment(str(tmp_path), srv)
    d = os.path.join(env["PANTO_SESSION_DIR"], "x")
    os.makedirs(d)
    path = os.path.join(d, SID + ".jsonl")
    lines = [{"type": "session", "version": 1, "id": SID, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": work},
             {"type": "message", "id": "aaaaaaaa", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
              "provider": "openai", "model": "gpt-4o",
              "message": {"role": "user", "content": [{"type": "text", "text": "go"}]}},
             {"type": "message", "id": "bbbbbbbb", "parentId": "aaaaaaaa", "timestamp": "2026-01-01T00:00:01.000Z",
              "message": {"role": "assistant", "provider": "openai", "model": "gpt-4o", "stopReason": "toolUse",
                          "content": [{"type": "toolUse", "id": "call_1", "name": "bash",
                                       "input": json.dumps({"command": "echo start; touch started; sleep 30; echo end"})},
                                      {"type": "toolUse", "id": "call_2", "name": "bash",
                                       "input": json.dumps({"command": "touch second"})}]}}]
    with open(path, "w") as f:
        f.write("".join(json.dumps(x) + "\n" for x in lines))
    argvs = [["panto-log", "replay", path], ["panto-tool", "--yes", "--quiet"], ["panto-send", "--tools"],
             ["panto-log", "append", path]]
    procs, prev = [], subprocess.DEVNULL
    for k, argv in enumerate(argvs):
        p = subprocess.Popen([shutil.which(argv[0], path=env["PATH"]), *argv[1:]], stdin=prev,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=work,
                             process_group=0 if k == 0 else procs[0].pid)
        if prev is not subprocess.DEVNULL:
            prev.close()
        prev = p.stdout
        procs.append(p)
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(work, "started")):
        assert time.monotonic() < deadline and procs[1].poll() is None, "the command never started"
        time.sleep(0.02)
    os.killpg(procs[0].pid, signal.SIGINT)      # as the terminal sends it: to the whole pipeline
    out = procs[-1].stdout.read()
    errs = [p.stderr.read().decode() for p in procs]
    statuses = [p.wait(60) for p in procs]
    assert statuses == [0, 130, 130, 0], (statuses, errs)
    assert not any("Traceback" in e for e in errs), errs
    assert errs[2] == "panto-send: interrupted before the request (the input is passed on)\n", errs
    with open(path, "rb") as f:
        saved = f.read()
    assert saved == out                          # echoed only what is in the file
    entries = [json.loads(x) for x in saved.splitlines()][1:]
    assert len(entries) == 3 and entries[-1]["parentId"] == "bbbbbbbb"
    first, second = entries[-1]["message"]["content"]
    assert first["toolUseId"] == "call_1" and first["isError"]
    assert re.fullmatch(r"interrupted after \d+\.\d s \(Ctrl-C: the call was stopped\)\nstart\n", first["content"])
    assert second["toolUseId"] == "call_2" and second["content"].startswith("not run")
    assert not os.path.exists(os.path.join(work, "second"))
    assert srv.requests == []                   # no request after the Ctrl-C
    # the command's own process group is gone with it
    gone = subprocess.run(["pgrep", "-f", "sleep 30; echo end"], capture_output=True)
    assert gone.returncode == 1, gone.stdout


def test_panto_send_interrupted_before_its_request_passes_the_stream_on(tmp_path, srv):
    """SIGINT delivered while panto-send reads its input: the input and the
    prompt still go downstream, then exit 130 with no request."""
    env, work = environment(str(tmp_path), srv)
    exe = shutil.which("panto-send", path=env["PATH"])
    p = subprocess.Popen([exe, "hello there"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, cwd=work)
    header = {"type": "session", "version": 1, "id": SID, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": work}
    p.stdin.write((json.dumps(header) + "\n").encode())
    p.stdin.flush()
    from procs import wait_reading

    wait_reading(p)                 # it is in panto's code, waiting for more input
    p.send_signal(signal.SIGINT)
    p.stdin.close()
    out, err = p.stdout.read(), p.stderr.read()
    assert p.wait(60) == 130, err
    assert err == b"panto-send: interrupted before the request (the input and the prompt are passed on)\n"
    lines = [json.loads(x) for x in out.splitlines()]
    assert lines[0] == header and lines[-1]["message"]["content"][-1]["text"] == "hello there"
    assert [x["message"]["role"] for x in lines[1:]] == ["system", "user"]
    assert srv.requests == []


SPY = """
import os, sys, _signal, _thread
sys.path.insert(0, sys.argv.pop(1))
log, main = sys.argv.pop(1), _thread.get_ident()
command = sys.argv.pop(1)
from pantolib import signals
signals.start(command, sys.argv[1:])
class Spy:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if (_thread.get_ident() == main and signals._take is _signal.getsignal(_signal.SIGINT)
                and _signal.SIGINT not in _signal.pthread_sigmask(_signal.SIG_BLOCK, [])):
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.write(fd, (name + "\\n").encode())
            os.close(fd)
sys.meta_path.insert(0, Spy)
from pantolib import launch
launch.run(command, sys.argv[1:])
"""


def test_panto_send_imports_nothing_where_a_ctrl_c_can_strike(tmp_path, srv):
    """Once its signals are released (its input passed on), a Ctrl-C strikes
    panto-send's main thread at once: nothing may be imported there then. A
    KeyboardInterrupt inside the import system's own cleanup is printed with
    a traceback and lost, and the request goes on: a Ctrl-C in the REPL met
    httpx's lazy import of httpcore so. Its imports happen held, or in its
    network thread."""
    env, work = environment(str(tmp_path), srv)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    log = str(tmp_path / "imports")
    header = {"type": "session", "version": 1, "id": SID, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": work}
    p = subprocess.run([sys.executable, "-c", SPY, root, log, "panto-send", "hello there"], env=env, cwd=work,
                       input=(json.dumps(header) + "\n").encode(), capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.endswith(b'"stopReason":"stop"}}\n') and len(srv.requests) == 1
    imported = open(log).read().split() if os.path.exists(log) else []
    assert imported == [], imported


def test_panto_tool_imports_nothing_where_a_ctrl_c_can_strike(tmp_path, srv):
    """The same for panto-tool, whose tools load as its calls run: each of
    their imports holds the signals (signals.guard_imports)."""
    from tool_term import stream_with

    env, work = environment(str(tmp_path), srv)
    with open(os.path.join(work, "f.txt"), "w") as f:
        f.write("one two\n")
    data = stream_with(("bash", {"command": "echo hi"}), ("read", {"path": "f.txt"}),
                       ("edit", {"path": "f.txt", "old_text": "one", "new_text": "three"}))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    log = str(tmp_path / "imports")
    p = subprocess.run([sys.executable, "-c", SPY, root, log, "panto-tool", "--yes"], env=env, cwd=work,
                       input=data, capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(data) and b"hi" in p.stdout[len(data):]
    with open(os.path.join(work, "f.txt")) as f:
        assert f.read() == "three two\n"
    imported = open(log).read().split() if os.path.exists(log) else []
    assert imported == [], imported


def test_an_import_under_the_guard_holds_the_signals_and_lets_them_go(tmp_path):
    """signals.guard_imports: while a module not loaded yet is imported the
    signals are blocked, and the mask is as it was after; a signal that came
    meanwhile is raised as the import ends, in the code that imported."""
    (tmp_path / "probe_mod.py").write_text(
        "import _signal, os\n"
        "BLOCKED = _signal.SIGINT in _signal.pthread_sigmask(_signal.SIG_BLOCK, [])\n"
        "os.kill(os.getpid(), _signal.SIGINT)\n")
    code = ("import sys, _signal\n"
            "sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
            "from pantolib import signals\n"
            "signals.start('panto', [])\n"
            "signals.arm()\n"
            "signals.guard_imports()\n"
            "signals.guard_imports()\n"
            "import json\n"
            "try:\n"
            "    import probe_mod\n"
            "    print('not raised')\n"
            "except KeyboardInterrupt:\n"
            "    print('raised after', sys.modules['probe_mod'].BLOCKED)\n"
            "print('after', _signal.SIGINT in _signal.pthread_sigmask(_signal.SIG_BLOCK, []))\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path), root], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode().split("\n")[:2] == ["raised after True", "after False"]
    assert b"Traceback" not in p.stderr


def test_esc_while_a_reply_streams_cancels_it_like_ctrl_c(tmp_path, srv):
    env, work = environment(str(tmp_path), srv)
    t = Term(["--yes"], env, cwd=work)
    t.expect("> ")
    t.line("stream round 1")
    t.expect("drip drip drip", 60)
    t.send("typed ")                    # kept for the next prompt, not echoed into the reply
    t.wait(0.3)
    t.send(b"\x1b")
    t.expect("aborted · ", 60)
    t.expect("> ")
    t.turn("after round 2", "reply to after 2", timeout=60)
    assert t.quit() == 0
    entries = entries_of(env)
    assert user_texts(entries) == ["stream round 1", "typed after round 2"]
    aborted = [e for e in entries if e["type"] == "message" and e["message"].get("stopReason") == "aborted"]
    assert len(aborted) == 1 and aborted[0]["message"]["content"][0]["text"].startswith("drip drip")
    assert not any(p in t.screen for p in PLUMBING) and "Traceback" not in t.screen
    assert "typed drip" not in t.screen and "drip typed" not in t.screen
