#!/usr/bin/env python3
"""Start-up of panto-ls, panto-cost and panto-log on small input vs `python3 -c 'import orjson'`.

    bench/bench_startup.py [--runs N]

SPEC §10 target: each command within 1.5x of the reference. Every command
runs N times, interleaved with the reference so drift hits both alike; the
median of each is compared. An isolated temporary HOME, PANTO_SESSION_DIR
and XDG_CACHE_HOME hold one small session, so nothing of the user's is read.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import orjson

TARGET = 1.5


def small_session(cwd):
    sid = "0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee"
    lines = [{"type": "session", "version": 1, "id": sid, "timestamp": "2026-04-25T17:40:15.990Z", "cwd": cwd},
             {"type": "message", "id": "00000001", "parentId": None, "timestamp": "2026-04-25T17:40:16.000Z",
              "provider": "openai", "model": "gpt-4o",
              "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]}},
             {"type": "message", "id": "00000002", "parentId": "00000001", "timestamp": "2026-04-25T17:40:17.000Z",
              "message": {"role": "assistant", "content": [{"type": "text", "text": "hello"}], "provider": "openai",
                          "model": "gpt-4o", "stopReason": "stop", "usage": {"input": 10, "output": 3}}}]
    return sid, b"".join(orjson.dumps(x) + b"\n" for x in lines)


def once(argv, stdin_path, env, cwd):
    return common.timed(argv, env, stdin_path=stdin_path, cwd=cwd)[0]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=40)
    a = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="panto-bench-")
    try:
        home = os.path.join(tmp, "home")
        work = os.path.join(tmp, "work")
        os.makedirs(home)
        os.makedirs(work)
        env = common.isolated_env(home)
        sid, data = small_session(work)
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from pantolib import paths
        sdir = paths.session_dir(work, env)
        os.makedirs(sdir)
        session = os.path.join(sdir, sid + ".jsonl")
        with open(session, "wb") as f:
            f.write(data)
        small = os.path.join(tmp, "small.jsonl")
        with open(small, "wb") as f:
            f.write(data)
        empty = os.devnull

        exe = common.command

        cases = {
            "reference: python3 -c 'import orjson'": ([sys.executable, "-c", "import orjson"], empty),
            "panto-ls": ([exe("panto-ls")], empty),
            "panto-cost < small": ([exe("panto-cost")], small),
            "panto-log replay SESSION": ([exe("panto-log"), "replay", session], empty),
            "panto-log append < small": ([exe("panto-log"), "append"], small),
            "python3 (bare interpreter)": ([sys.executable, "-c", "pass"], empty),
        }
        times = {k: [] for k in cases}
        for name, (argv_, stdin) in cases.items():   # warm up
            once(argv_, stdin, env, work)
        for _ in range(a.runs):
            for name, (argv_, stdin) in cases.items():
                times[name].append(once(argv_, stdin, env, work))
        ref = statistics.median(times["reference: python3 -c 'import orjson'"])
        print(f"start-up, median of {a.runs} runs (target: within {TARGET}x of the reference)")
        worst = 0
        for name, ts in times.items():
            med = statistics.median(ts)
            ratio = med / ref
            mark = ""
            if name.startswith("panto"):
                worst = max(worst, ratio)
                mark = "  ok" if ratio <= TARGET else "  MISSES"
            print(f"  {name:40s} {med * 1000:7.1f} ms  {ratio:5.2f}x{mark}")
        print(f"worst panto ratio: {worst:.2f}x (target <= {TARGET}x)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
