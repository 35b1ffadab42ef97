#!/usr/bin/env python3
"""panto-ls --all over many sessions vs parsing every line with orjson.

    bench/bench_ls.py [--sessions 10000] [--size 1G] [--scale 0.02] [--repeat R] [--seed S] [--keep DIR]

SPEC §10 targets, over 10,000 sessions of 1 GB in all: the first listing
(no cache) at most 0.33x the time of a bare Python script that parses every
line of every file with orjson (what a naive lister does); a repeated
listing where nothing changed at most 0.05x. The sessions come from
gen_sessions.py (--scale 0.02: many small lines, where per-line work costs
most; --scale 1: few long lines, ~12 of ~10 KB a session), are read from
the page cache by both, and the two listings are checked to agree on ids
and message counts. Each pair runs side by side --repeat times: the ratios
are printed as best, median and worst.
"""
import argparse
import os
import shutil
import sys
import tempfile

import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import gen_sessions  # noqa: E402

FIRST, REPEATED = 0.33, 0.05
NAIVE = r"""
import os, sys, orjson
root = sys.argv[1]
rows = []
for d in os.scandir(root):
    for e in os.scandir(d.path):
        if not e.name.endswith(".jsonl"):
            continue
        st = e.stat()
        header, n, prompt = None, 0, None
        with open(e.path, "rb") as f:
            for line in f:
                obj = orjson.loads(line)
                if header is None:
                    header = obj
                    continue
                if obj.get("type") == "message" and obj["message"]["role"] in ("user", "assistant"):
                    n += 1
                    if prompt is None and obj["message"]["role"] == "user":
                        prompt = obj["message"]["content"][0].get("text")
        rows.append((st.st_mtime_ns, header["id"], n))
rows.sort(reverse=True)
out = sys.stdout.buffer
for m, i, n in rows:
    out.write(orjson.dumps({"id": i, "messages": n}) + b"\n")
"""


def run(argv, env):
    return common.timed(argv, env, capture=True)


def counts(out):
    return sorted((o["id"], o["messages"]) for o in map(orjson.loads, out.splitlines()))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    gen_sessions.tree_arguments(ap)
    a = ap.parse_args(argv)
    exe = common.command("panto-ls")
    tmp = tempfile.mkdtemp(prefix="panto-bench-")
    try:
        root, files, total = gen_sessions.bench_tree(a, tmp)
        home = os.path.join(tmp, "home")
        os.makedirs(home)
        cache = os.path.join(tmp, "cache")
        env = common.isolated_env(home, PANTO_SESSION_DIR=root, XDG_CACHE_HOME=cache)
        naive_cmd = [sys.executable, "-c", NAIVE, root]
        ls_cmd = [exe, "--all", "--json"]
        run(naive_cmd, env)                               # warm the page cache
        firsts, agains = [], []
        for _ in range(a.repeat):
            dt_naive, naive_out = run(naive_cmd, env)
            shutil.rmtree(cache, ignore_errors=True)      # a first listing: no cache
            dt, ls_out = run(ls_cmd, env)
            firsts.append(dt / dt_naive)
            dt, again = run(ls_cmd, env)
            agains.append(dt / dt_naive)
        agree = counts(naive_out) == counts(ls_out) == counts(again)
        print(f"panto-ls --all over {len(files)} sessions, {total / 1e9:.2f} GB, {a.repeat} runs side by side")
        print(f"  parse every line with orjson   {dt_naive:7.3f} s (last run)")
        for label, ratios, target in (("first run (no cache)", firsts, FIRST), ("repeated run", agains, REPEATED)):
            r = sorted(ratios)
            print(f"  panto-ls, {label:20s} {r[0]:.3f}x (median {r[len(r) // 2]:.3f}x, worst {r[-1]:.3f}x)"
                  f"  target <= {target}x: {'ok' if r[-1] <= target else 'MISSES'}")
        print(f"  ids and message counts agree with the full parse: {'yes' if agree else 'NO'}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
