#!/usr/bin/env python3
"""A session whose last line is huge: `panto-log replay --last` vs
`panto-log replay F` on the same file.

    bench/bench_last_line.py [--size 100M] [--rounds 3]

SPEC §10 (issue 30): finding the last session reads each session's last
entry back from the end; a last line of 100 MB must cost a read and a parse
(linear), not a re-split of the growing tail at each step back. Target:
`replay --last` within 1.5x of `replay F` (which reads the file once).
Two cases: the session alone in its folder (a lone candidate is the last
without reading its tail), and beside a small session of the same folder
(both tails are read to compare their last activity: the 100 MB line is read
back and parsed once). Each round runs each case beside `replay F`; best /
median / worst of the ratios are printed, with the machine's load.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import gen_sessions  # noqa: E402

TARGET = 1.5
SID = "0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee"
OTHER = "0199aaaa-bbbb-7ccc-8ddd-000000000000"


def write(path, cwd, size, sid=SID):
    """A header, a user prompt, and an assistant reply of `size` bytes of text."""
    head = {"type": "session", "version": 1, "id": sid, "timestamp": "2026-04-25T17:40:15.990Z", "cwd": cwd}
    user = gen_sessions.plain_entry("00000001", None, "write it all out", user=True)
    reply = gen_sessions.plain_entry("00000002", "00000001", "", user=False)
    words = b"the file test line code run fix it is and to of in read write " * (size // 64 + 1)
    line = orjson.dumps(reply).replace(b'"text":""', b'"text":"' + words[:size] + b'"', 1)
    with open(path, "wb") as f:
        for obj in (head, user):
            f.write(orjson.dumps(obj) + b"\n")
        f.write(line + b"\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="100M", help="the last line's size, e.g. 100M")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    exe = common.command("panto-log")
    tmp = tempfile.mkdtemp(prefix="panto-bench-last-", dir=os.environ.get("PANTO_BENCH_DIR"))
    try:
        home, cwd = os.path.join(tmp, "home"), os.path.join(tmp, "work")
        os.makedirs(cwd)
        env = common.isolated_env(home)
        folder = os.path.join(env["PANTO_SESSION_DIR"], gen_sessions.encode_cwd(cwd))
        os.makedirs(folder, mode=0o700)
        path = os.path.join(folder, SID + ".jsonl")
        write(path, cwd, gen_sessions.parse_size(a.size))
        common.timed([exe, "replay", path], env, cwd=cwd)        # into the page cache
        other = os.path.join(folder, OTHER + ".jsonl")
        results = {}
        for case in ("alone", "beside a small session"):
            if case != "alone":
                write(other, cwd, 1000, sid=OTHER)
                os.utime(other, (1, 1))     # older by mtime too: only the timestamps decide
            chosen = subprocess.run([exe, "replay", "--last"], env=env, cwd=cwd, capture_output=True).stdout
            if not chosen.startswith(b'{"type":"session","version":1,"id":"' + SID.encode()):
                sys.exit("replay --last chose another session")
            pairs = []
            for _ in range(a.rounds):
                whole = common.timed([exe, "replay", path], env, cwd=cwd)[0]
                last = common.timed([exe, "replay", "--last"], env, cwd=cwd)[0]
                pairs.append((whole, last))
            results[case] = pairs
        size = os.path.getsize(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"a session of {size / 1e6:.0f} MB whose last line is nearly all of it, {a.rounds} rounds "
          f"(load: {os.getloadavg()[0]:.2f})")
    for case, pairs in results.items():
        ratios = sorted(last / whole for whole, last in pairs)
        for whole, last in pairs:
            print(f"  {case:24s} replay F {whole:6.3f} s   replay --last {last:6.3f} s   {last / whole:5.2f}x")
        med = statistics.median(ratios)
        print(f"replay --last / replay F, {case}: best {ratios[0]:.2f} / median {med:.2f} / worst {ratios[-1]:.2f} "
              f"({'ok' if med <= TARGET else 'MISSES'}, target <= {TARGET}x)")


if __name__ == "__main__":
    main()
