#!/usr/bin/env python3
"""panto-ls --all --grep TEXT over many sessions vs `grep -rilF TEXT` on the same folder.

    bench/bench_grep.py [--sessions 10000] [--size 1G] [--scale 0.02] [--hits 0.05]
                        [--repeat R] [--seed S] [--keep DIR]

SPEC §10 target: over 10,000 sessions (1 GB) within 3x of `grep -rilF`, and
the same set of sessions, for a word that appears only in message text. The
sessions come from gen_sessions.py (--scale 0.02: many small lines); a word
the generator never writes is planted, in another case, in the text of a
user message in the middle of a fraction (--hits) of them. Both read from
the page cache. panto-ls is timed with its listing cache warm (a repeated
search) and cold (the first one after a change to every file).
"""
import argparse
import os
import random
import shutil
import sys
import tempfile

import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import gen_sessions  # noqa: E402

TARGET = 3.0
WORD = "flock"


def plant(files, fraction, seed):
    """Put WORD (as 'FLock') in a user message in the middle of some files."""
    rng = random.Random(seed)
    chosen = sorted(rng.sample(files, max(1, int(len(files) * fraction))))
    for path in chosen:
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")[:-1]
        mid = max(1, len(lines) // 2)
        e = {"type": "message", "id": f"{rng.getrandbits(32):08x}", "parentId": None,
             "timestamp": "2026-02-01T00:00:00.000Z", "provider": "openai", "model": "gpt-4o",
             "message": {"role": "user", "content": [{"type": "text", "text": "take the FLock \"first\""}]}}
        lines.insert(mid, orjson.dumps(e))
        with open(path, "wb") as f:
            f.write(b"\n".join(lines) + b"\n")
    return set(chosen)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    gen_sessions.tree_arguments(ap)
    ap.add_argument("--hits", type=float, default=0.05, help="fraction of sessions that mention the word")
    a = ap.parse_args(argv)
    exe = common.command("panto-ls")
    grep = common.command("grep")
    tmp = tempfile.mkdtemp(prefix="panto-bench-")
    try:
        root, files, total = gen_sessions.bench_tree(a, tmp, lambda made: plant(made, a.hits, a.seed))
        home = os.path.join(tmp, "home")
        os.makedirs(home)
        cache = os.path.join(tmp, "cache")
        env = common.isolated_env(home, PANTO_SESSION_DIR=root, XDG_CACHE_HOME=cache)
        grep_cmd = [grep, "-rilF", WORD, root]
        ls_cmd = [exe, "--all", "--json", "--grep", WORD]
        common.timed(grep_cmd + ["--include=*.jsonl"], env, capture=True)     # warm the page cache
        common.timed([exe, "--all"], env)                                      # and the listing cache
        ref = warm = cold = float("inf")
        for _ in range(a.repeat):
            dt, grep_out = common.timed(grep_cmd, env, capture=True)
            ref = min(ref, dt)
            dt, ls_out = common.timed(ls_cmd, env, capture=True)
            warm = min(warm, dt)
        for _ in range(a.repeat):
            shutil.rmtree(cache, ignore_errors=True)
            dt, _ = common.timed(ls_cmd, env, capture=True)
            cold = min(cold, dt)
        found = {os.path.realpath(p) for p in grep_out.decode().splitlines()}
        listed = {os.path.realpath(orjson.loads(x)["path"]) for x in ls_out.splitlines()}
        print(f"panto-ls --all --grep over {len(files)} sessions, {total / 1e9:.2f} GB, "
              f"{len(found)} mention '{WORD}', best of {a.repeat}")
        print(f"  grep -rilF                      {ref:7.3f} s")
        print(f"  panto-ls --grep (listing cached){warm:7.3f} s  {warm / ref:5.2f}x grep"
              f"  ({'ok' if warm / ref <= TARGET else 'MISSES'}, target <= {TARGET:.0f}x)")
        print(f"  panto-ls --grep (no cache)      {cold:7.3f} s  {cold / ref:5.2f}x grep")
        print(f"  the same sessions as grep: {'yes' if found == listed else 'NO'} ({len(listed)} listed)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
