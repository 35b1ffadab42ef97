#!/usr/bin/env python3
"""How often a Ctrl-C loses a turn: the hand-written pipeline, and the REPL.

    bench/bench_sigint.py pipeline [--rounds N] [--window S] [--signal INT|TERM|HUP] [--bin DIR]
    bench/bench_sigint.py repl [--rounds N]

pipeline: `panto-log replay --last | panto-send PROMPT | panto-log append`
(the README's main use) started N times in a process group of its own, with
SIGINT sent to the whole group (as the terminal sends it) at a random moment
in the first S seconds (default 0.1); --signal TERM or HUP sends that
instead (a `kill` of the group, a closed terminal). A round loses its turn
when the prompt is not in the session file afterwards, and loses a paid-for
reply when the server was asked (its request log holds the prompt) and the
file holds no reply to the prompt, not even an aborted one, unless
panto-send was interrupted before a byte of the reply came back (counted
apart: there was nothing to keep); a traceback on
stderr is counted apart. --bin names the directory of the commands (default: PATH), so that
two installs can be compared side by side (e.g. a checkout of the previous
release's venv as the reference).

repl: the interactive panto on a pseudo-terminal, Ctrl-C from 0.02 s to 2 s
after Enter in each phase of a turn (before the request, while the reply
streams, while a tool runs, at a tool question), counting lost prompts, lost
tool results and "not run" results for calls that ran (the test suite runs
the same sweep with a few rounds: tests/test_interrupt.py).

A loopback server (tests/sse_server.py) answers; nothing of the user's is read.
"""
import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import common  # noqa: E402


def _server(tmp):
    port_file = os.path.join(tmp, "port")
    srv = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(HERE), "tests", "sse_server.py"),
                            "--port-file", port_file, "--auto", "--log", os.path.join(tmp, "requests.jsonl")],
                           stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not os.path.exists(port_file):
        if time.monotonic() > deadline or srv.poll() is not None:
            sys.exit("the loopback server did not start")
        time.sleep(0.02)
    with open(port_file) as f:
        return srv, f"http://127.0.0.1:{f.read().strip()}"


def _session(env, work):
    """A session of one exchange in work's sessions folder (so --last finds it): its path."""
    sys.path.insert(0, os.path.dirname(HERE))
    import orjson

    from pantolib import paths

    sid = "0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee"
    d = paths.session_dir(work, env)
    os.makedirs(d, mode=0o700)
    path = os.path.join(d, sid + ".jsonl")
    lines = [{"type": "session", "version": 1, "id": sid, "timestamp": "2026-04-25T17:40:15.990Z", "cwd": work},
             {"type": "message", "id": "00000001", "parentId": None, "timestamp": "2026-04-25T17:40:16.000Z",
              "provider": "openai", "model": "gpt-4o",
              "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]}},
             {"type": "message", "id": "00000002", "parentId": "00000001", "timestamp": "2026-04-25T17:40:17.000Z",
              "message": {"role": "assistant", "content": [{"type": "text", "text": "hello"}],
                          "provider": "openai", "model": "gpt-4o", "stopReason": "stop"}}]
    with open(path, "wb") as f:
        f.write(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    return path


def _answered(data, prompt):
    """Whether the session holds an assistant entry (whole or aborted) under the prompt's entry."""
    import orjson

    objs = [orjson.loads(line) for line in data.splitlines() if line.strip()]
    asks = {o["id"] for o in objs if o.get("type") == "message" and o["message"].get("role") == "user"
            and any(b.get("text") == prompt for b in o["message"].get("content", []))}
    return any(o.get("parentId") in asks and o.get("type") == "message" and o["message"].get("role") == "assistant"
               for o in objs)


def pipeline(a):
    tmp = tempfile.mkdtemp(prefix="panto-bench-")
    srv = None
    try:
        home, work = os.path.join(tmp, "home"), os.path.join(tmp, "work")
        os.makedirs(home)
        os.makedirs(work)
        srv, url = _server(tmp)
        env = common.isolated_env(home, OPENAI_BASE_URL=url + "/v1", OPENAI_API_KEY="sk-bench",
                                  OPENAI_MODEL="gpt-4o", LC_ALL="C.UTF-8")
        path = _session(env, work)

        def exe(name):
            return os.path.join(a.bin, name) if a.bin else common.command(name)

        rng = random.Random(a.seed)
        signum = getattr(signal, "SIG" + a.signal)
        lost = tracebacks = replied = asked = paid_lost = unbegun = 0
        causes = {}
        for i in range(a.rounds):
            prompt = f"prompt number {i:04d} of the sweep"
            argvs = [[exe("panto-log"), "replay", "--last"], [exe("panto-send"), prompt], [exe("panto-log"), "append"]]
            procs, prev = [], subprocess.DEVNULL
            errs = [tempfile.TemporaryFile() for _ in argvs]
            for k, argv in enumerate(argvs):
                last = k == len(argvs) - 1
                p = subprocess.Popen(argv, stdin=prev, stdout=subprocess.DEVNULL if last else subprocess.PIPE,
                                     stderr=errs[k], env=env, cwd=work,
                                     process_group=0 if k == 0 else procs[0].pid)
                if prev is not subprocess.DEVNULL:
                    prev.close()
                prev = p.stdout
                procs.append(p)
            time.sleep(rng.uniform(0, a.window))
            try:
                os.killpg(procs[0].pid, signum)
            except ProcessLookupError:
                pass
            for p in procs:
                p.wait(60)
            text = b""
            for f in errs:
                f.seek(0)
                text += f.read()
                f.close()
            with open(path, "rb") as f:
                data = f.read()
            if prompt.encode() not in data:
                lost += 1
                why = []
                for argv, p in zip(argvs, procs):
                    who = os.path.basename(argv[0]) + ("" if "send" in argv[0] else " " + argv[1])
                    if p.returncode < 0:
                        why.append(f"{who} killed by signal {-p.returncode}")
                    elif p.returncode:
                        why.append(f"{who} exit {p.returncode}")
                causes[", ".join(why) or "?"] = causes.get(", ".join(why) or "?", 0) + 1
            if b"Traceback" in text:
                tracebacks += 1
                if a.verbose and tracebacks <= 2:
                    print(text.decode(errors="replace"))
            if f"You said: {prompt}".encode() in data:
                replied += 1
            try:
                with open(os.path.join(tmp, "requests.jsonl"), "rb") as f:
                    was_asked = prompt.encode() in f.read()
            except FileNotFoundError:       # no request yet in this sweep
                was_asked = False
            if was_asked:
                asked += 1
                if not _answered(data, prompt) and b"before the reply began" in text:
                    unbegun += 1            # asked, but not a byte of the reply came back: nothing to keep
                elif not _answered(data, prompt):
                    paid_lost += 1
                    if a.verbose:
                        print(f"round {i}: asked, no reply kept; statuses "
                              f"{[p.returncode for p in procs]}; stderr: {text.decode(errors='replace')!r}")
        print(f"pipeline: {a.rounds} rounds, SIG{a.signal} to the whole pipeline 0-{a.window * 1000:.0f} ms "
              f"after its start (load {os.getloadavg()[0]:.2f})")
        print(f"  commands from {a.bin or 'PATH'}")
        print(f"  turns lost (prompt not in the file): {lost} ({100 * lost / a.rounds:.1f}%)")
        for why, n in sorted(causes.items(), key=lambda kv: -kv[1]):
            print(f"    {n:4d}  {why}")
        print(f"  rounds with a traceback:             {tracebacks}")
        print(f"  rounds that got their reply anyway:  {replied}")
        print(f"  rounds whose request reached the server: {asked}; of those, interrupted before a byte of "
              f"the reply came back: {unbegun}; a reply lost: {paid_lost}")
    finally:
        if srv is not None:
            srv.kill()
            srv.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def repl(a):
    import test_interrupt

    totals = test_interrupt.sweep(a.rounds, seed=a.seed, verbose=True, phases=a.phases.split(","))
    print(f"repl: {a.rounds} rounds per phase, Ctrl-C 0.02-2 s after Enter")
    for phase, t in totals.items():
        print(f"  {phase:22s} rounds {t['rounds']:4d}  lost prompts {t['lost_prompts']}  "
              f"lost tool results {t['lost_results']}  false 'not run' {t['false_not_run']}  "
              f"tracebacks {t['tracebacks']}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["pipeline", "repl"])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--window", type=float, default=0.1)
    ap.add_argument("--signal", choices=["INT", "TERM", "HUP"], default="INT", help="pipeline: the signal sent")
    ap.add_argument("--bin", help="directory of the commands (default: PATH)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--phases", default="before,stream,tool,ask", help="repl: the phases to sweep")
    a = ap.parse_args(argv)
    (pipeline if a.mode == "pipeline" else repl)(a)


if __name__ == "__main__":
    main()
