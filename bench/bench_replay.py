#!/usr/bin/env python3
"""panto-log replay of a large session vs a bare orjson-per-line loop and vs `jq -c .`.

    bench/bench_replay.py [--size 100M] [--repeat R] [--seed S] [--small]

SPEC §10 target: replay of a 100 MB session within 1.3x of a bare Python
loop that validates each line with orjson.loads and writes it out (so about
6x faster than `jq -c .`), in constant memory. All three read the same
generated session (gen_sessions.py) from the page cache and write to a pipe
drained by `cat >/dev/null`, alternately, best of --repeat. Peak memory is
shown when GNU time is installed. --small makes a session of short lines
(~200 bytes each: short prompts and replies), where the work per line, not
per byte, is what is measured.
"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import gen_sessions  # noqa: E402

TARGET_LOOP = 1.3
BARE_LOOP = r"""
import sys, orjson
out = sys.stdout.buffer
with open(sys.argv[1], "rb") as f:
    for line in f:
        orjson.loads(line)
        out.write(line)
"""


def timed(argv, env):
    peak = common.PeakRss(argv)
    argv = peak.argv
    t = time.perf_counter()
    producer = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    sink = subprocess.Popen(["cat"], stdin=producer.stdout, stdout=subprocess.DEVNULL)
    producer.stdout.close()
    err = producer.stderr.read()
    status = producer.wait()
    sink.wait()
    dt = time.perf_counter() - t
    if status != 0:
        sys.exit(f"{' '.join(argv)} failed: {err.decode(errors='replace').strip()}")
    rss = peak.kb()
    return dt, rss


def small_session(path, target, rng):
    """A session of short user and assistant entries, as panto writes them."""
    import orjson

    words = "the a file test line code run fix it is and to of in read write".split()
    with open(path, "wb") as f:
        f.write(orjson.dumps({"type": "session", "version": 1, "id": "0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee",
                              "timestamp": "2026-04-25T17:40:15.990Z", "cwd": "/home/user/proj"}) + b"\n")
        written, parent, k = 0, None, 0
        while written < target:
            k += 1
            eid = f"{k:08x}"
            text = " ".join(rng.choice(words) for _ in range(rng.randint(3, 20)))
            e = gen_sessions.plain_entry(eid, parent, text, user=bool(k % 2))
            line = orjson.dumps(e) + b"\n"
            f.write(line)
            written += len(line)
            parent = eid


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="100M", help="session size, e.g. 100M or 1G")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--small", action="store_true", help="short lines (~200 bytes) instead of realistic ones")
    a = ap.parse_args(argv)
    exe = common.command("panto-log")
    tmp = tempfile.mkdtemp(prefix="panto-bench-")
    try:
        home = os.path.join(tmp, "home")
        os.makedirs(home)
        env = common.isolated_env(home)
        path = os.path.join(tmp, "big.jsonl")
        if a.small:
            small_session(path, gen_sessions.parse_size(a.size), random.Random(a.seed))
        else:
            gen_sessions.write_session(path, 10**9, random.Random(a.seed), "/home/user/proj",
                                       target_bytes=gen_sessions.parse_size(a.size))
        size = os.path.getsize(path)
        with open(path, "rb") as f:           # into the page cache
            while f.read(1 << 24):
                pass
        cases = {
            "bare orjson.loads loop": [sys.executable, "-c", BARE_LOOP, path],
            "panto-log replay": [exe, "replay", path],
            "panto-log replay --no-repair": [exe, "replay", "--no-repair", path],
        }
        if shutil.which("jq"):
            cases["jq -c ."] = ["jq", "-c", ".", path]
        best = {k: (float("inf"), None) for k in cases}
        for _ in range(a.repeat):
            for name, cmd in cases.items():
                dt, rss = timed(cmd, env)
                if dt < best[name][0]:
                    best[name] = (dt, rss)
        ref = best["bare orjson.loads loop"][0]
        print(f"replay of a {size / 1e6:.0f} MB session, best of {a.repeat} "
              f"(target: within {TARGET_LOOP}x of the bare loop)")
        for name, (dt, rss) in best.items():
            mem = f"  {rss / 1024:7.1f} MB peak" if rss else ""
            print(f"  {name:30s} {dt:7.3f} s  {size / dt / 1e6:7.0f} MB/s  {dt / ref:5.2f}x loop{mem}")
        r = best["panto-log replay"][0] / ref
        print(f"panto-log replay / bare loop: {r:.2f}x ({'ok' if r <= TARGET_LOOP else 'MISSES'}, target <= {TARGET_LOOP}x)")
        if "jq -c ." in best:
            print(f"jq -c . / panto-log replay: {best['jq -c .'][0] / best['panto-log replay'][0]:.1f}x faster")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
