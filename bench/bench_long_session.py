#!/usr/bin/env python3
"""A plumbing turn on a long session costs what its path costs (SPEC §10
"Long sessions stay fast": at most 1.5x).

Two sessions in the same run: SMALL, a generated session of ~1 MB, and
LONG, ~100 MB of generated history, then a compaction (firstKeptId null: it
keeps nothing from before), then the same ~1 MB of entries as SMALL after
it. A turn sends the same conversation for both. Timed, start to exit:

  panto-log replay --context F | panto-send --quiet ... PROMPT | panto-log append F

against the scripted server (tests/sse_server.py) on 127.0.0.1, which answers
at once. One turn on each file is run first (it builds the index cache, as
the first turn after a resume would: timed apart, as "cold"). Then --runs
rounds, each timing one turn on SMALL and one on LONG; the ratio LONG/SMALL
of each round is printed, with its median and spread. The same is measured
for the complete-stream pipeline (`panto-log replay F`) as the reference of
what --context saves. With --repl, the same for turns of `panto --resume`
in a pseudo-terminal (Enter -> request arrived, last byte -> prompt back,
as bench_repl.py measures them; resuming itself reads the file whole and is
not counted).

The floor: the same pipeline with each panto command replaced by `cat`.

Usage: bench/bench_long_session.py [--size MB] [--path MB] [--runs R] [--repl]
"""
import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import orjson

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import sse_server as S  # noqa: E402

sys.path.insert(0, HERE)
import bench_repl  # noqa: E402  (its pty driver; it marks when a request arrived and was served)
import common  # noqa: E402
import gen_sessions as G  # noqa: E402

TARGET = 1.5
PIPE = ('panto-log replay {flags} "$1" | panto-send --quiet -p openai -m gpt-bench "$2" '
        '| panto-log append "$1" >/dev/null')


def _lines(path):
    with open(path, "rb") as f:
        return f.read().splitlines(keepends=True)


def make_pair(tmp, cwd, long_mb, path_mb):
    """(small, long) session files in the sessions folder of cwd."""
    from pantolib import paths

    small_src, history = os.path.join(tmp, "small.gen"), os.path.join(tmp, "history.gen")
    G.write_session(small_src, 10**6, random.Random(11), cwd, target_bytes=int(path_mb * (1 << 20)))
    G.write_session(history, 10**6, random.Random(12), cwd,
                    target_bytes=int((long_mb - path_mb) * (1 << 20)))
    small, old = _lines(small_src), _lines(history)
    taken = {orjson.loads(x)["id"] for x in old[1:]}
    tail = small[2:]      # SMALL's entries after its header and system entry
    if taken & {orjson.loads(x)["id"] for x in tail}:
        sys.exit("generated ids collide: try another size")
    leaf = orjson.loads(old[-1])["id"]
    comp = {"type": "compaction", "id": "c0ffee00", "parentId": leaf, "timestamp": "2026-04-25T17:40:16.000Z",
            "summary": "The work so far, summarized.", "firstKeptId": None, "provider": "openai", "model": "gpt-4o"}
    first = orjson.loads(tail[0])
    first["parentId"] = comp["id"]
    long_lines = old + [orjson.dumps(comp) + b"\n", orjson.dumps(first) + b"\n"] + tail[1:]
    out = []
    for name, data in (("small", small), ("long", long_lines)):
        header = orjson.loads(data[0])
        p = paths.session_path(header, {"PANTO_SESSION_DIR": os.path.join(tmp, "home", "sessions")})
        os.makedirs(os.path.dirname(p), mode=0o700, exist_ok=True)
        with open(p, "wb") as f:
            f.writelines(data)
        out.append(p)
    return out


def turn(srv, reply, env, cwd, path, flags, prompt):
    srv.push(reply)
    start = time.perf_counter()
    p = subprocess.run(["sh", "-c", PIPE.format(flags=flags), "-", path, prompt], env=env, cwd=cwd,
                       stdin=subprocess.DEVNULL, capture_output=True)
    dt = time.perf_counter() - start
    if p.returncode != 0:
        sys.exit("the pipeline failed: " + p.stderr.decode(errors="replace"))
    return dt


def repl_turns(srv, reply, env, cwd, path, runs):
    """Per-turn overhead of the REPL resumed on `path`: a list of seconds."""
    sid = orjson.loads(open(path, "rb").readline())["id"]
    t = bench_repl.Term([shutil.which("panto"), "--resume", sid, "--no-tools", "-p", "openai", "-m", "gpt-bench"],
                        env, cwd)
    t.wait_for(b"panto \xe2\x80\x94", timeout=600)
    t.wait_for(b"> ", timeout=600)
    out = []
    for i in range(runs + 1):         # the first turn builds the index cache: not counted
        srv.push(reply)
        n = len(srv.requests)
        enter = time.monotonic()
        t.send(f"repl prompt {i}\r".encode())
        t.wait_for(b"ok.")
        back = t.wait_for(b"> ")
        if i:
            out.append(srv.requests[n].t - enter + back - bench_repl.SERVED["t"])
    time.sleep(0.2)
    t.send(b"\x04")
    try:
        t.p.wait(10)
    except subprocess.TimeoutExpired:     # the timing is done: do not wait on the way out
        t.p.kill()
        t.p.wait()
    os.close(t.fd)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=float, default=100, help="LONG session size in MB")
    ap.add_argument("--path", type=float, default=1, help="SMALL session (and LONG's path) in MB")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--repl", action="store_true", help="also time turns of the REPL")
    a = ap.parse_args()
    for name in ("panto-log", "panto-send"):
        common.command(name)
    tmp = tempfile.mkdtemp(prefix="panto-bench-long-", dir=os.environ.get("PANTO_BENCH_DIR"))
    cwd = os.path.join(tmp, "work")
    os.makedirs(cwd)
    try:
        small, long_ = make_pair(tmp, cwd, a.size, a.path)
        sizes = [os.path.getsize(p) for p in (small, long_)]
        reply = S.openai_text("ok.", usage={"prompt_tokens": 10, "completion_tokens": 1})
        results = {}
        with S.Server() as srv:
            env = common.isolated_env(os.path.join(tmp, "home"), OPENAI_BASE_URL=srv.url + "/v1",
                                      OPENAI_API_KEY="none")
            n = 0
            for label, flags in (("--context", "--context"), ("complete stream", "")):
                cold = [turn(srv, reply, env, cwd, p, flags, f"cold {label}") for p in (small, long_)]
                ratios, times = [], []
                for i in range(a.runs):
                    n += 1
                    ts = [turn(srv, reply, env, cwd, p, flags, f"prompt {n}") for p in (small, long_)]
                    times.append(ts)
                    ratios.append(ts[1] / ts[0])
                results[label] = (cold, times, ratios)
            floor = []
            for i in range(a.runs):
                ts = []
                for p in (small, long_):
                    start = time.perf_counter()
                    subprocess.run(["sh", "-c", 'cat "$1" | cat | cat >/dev/null', "-", p], check=True)
                    ts.append(time.perf_counter() - start)
                floor.append(ts)
            if a.repl:
                env["TERM"] = "xterm-256color"
                env["XDG_STATE_HOME"] = os.path.join(tmp, "home", ".state")
                repl = [repl_turns(srv, reply, env, cwd, p, a.runs) for p in (small, long_)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"plumbing turn: LONG {sizes[1] / (1 << 20):.0f} MB (its path after the compaction "
          f"~{a.path:g} MB) vs SMALL {sizes[0] / (1 << 20):.1f} MB, {a.runs} rounds")
    for label, (cold, times, ratios) in results.items():
        med = statistics.median(ratios)
        print(f"  replay {label:16s} first turn (cold) {cold[0]:.3f} s / {cold[1]:.3f} s; "
              f"SMALL {statistics.median(t[0] for t in times):.3f} s, LONG {statistics.median(t[1] for t in times):.3f} s; "
              f"LONG/SMALL {med:.2f}x (rounds: {', '.join(f'{r:.2f}' for r in ratios)}; "
              f"spread {min(ratios):.2f}-{max(ratios):.2f})")
    if a.repl:
        ratios = [b / s for s, b in zip(*repl)]
        print(f"  REPL turn overhead  SMALL {statistics.median(repl[0]):.3f} s, LONG {statistics.median(repl[1]):.3f} s; "
              f"LONG/SMALL {statistics.median(ratios):.2f}x (turns: {', '.join(f'{r:.2f}' for r in ratios)})")
    for label in ("--context", "complete stream"):
        r = sorted(results[label][2])
        med = statistics.median(r)
        print(f"LONG/SMALL with {label}: best {r[0]:.2f} / median {med:.2f} / worst {r[-1]:.2f} "
              f"({'ok' if med <= TARGET else 'MISSES'}, target <= {TARGET}x)")
    s, b = (statistics.median(t[i] for t in floor) for i in (0, 1))
    print(f"floor (each panto command replaced by cat): SMALL {s:.3f} s, LONG {b:.3f} s; "
          f"LONG costs the complete-stream turn {b - s:.3f} s more even so (load: {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
