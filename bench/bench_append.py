#!/usr/bin/env python3
"""panto-log append of N entries vs a bare os.write + fsync loop.

    bench/bench_append.py [--entries N] [--repeat R] [--seed S] [--kb] [--history MB]

SPEC §10 target: within 1.10x of a Python process that reads the same lines
from stdin and, for each, does one os.write to the session file and one
fsync, then writes the line to stdout. Both start as fresh processes (their
start-up is counted), append to a copy of the same session in the same
directory, and are run alternately, best of --repeat. Each is also run on
an empty stream, so the per-entry cost can be told apart from start-up
(which bench_startup.py measures on its own). The entries are
realistic (gen_sessions.py: text from 100 B to 20 KB, tool results up to
50 KB); --kb makes every entry a user or assistant message of about 1 KB,
where the work per line besides write and fsync shows most. --history
appends to a session that already holds MB of entries, as a long session
does: the file panto-log append opens is then large, and its index cache
(built once before the runs, restored with the file before each run, as
the previous turn would leave it) spares reading it again; without the
cache that read is part of the per-entry cost.
"""
import argparse
import os
import random
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import gen_sessions  # noqa: E402

TARGET = 1.10
BARE = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    os.write(fd, line)
    os.fsync(fd)
    out.write(line)
    out.flush()
"""


def kb_entries(n, rng):
    """n message entries of about 1 KB each, alternately user and assistant."""
    import orjson

    out, parent = [], None
    for k in range(n):
        eid = f"{k:08x}"
        text = "".join(rng.choice("abcdefghij klmnop qrstuvwxyz") for _ in range(rng.randint(800, 1000)))
        e = gen_sessions.plain_entry(eid, parent, text, user=k % 2 == 0)
        out.append(orjson.dumps(e) + b"\n")
        parent = eid
    return out


def once(argv, data_path, env):
    return common.timed(argv, env, stdin_path=data_path)[0]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kb", action="store_true", help="entries of about 1 KB each")
    ap.add_argument("--history", type=float, default=0, help="MB of entries already in the session")
    a = ap.parse_args(argv)
    exe = common.command("panto-log")
    tmp = tempfile.mkdtemp(prefix="panto-bench-", dir=os.environ.get("PANTO_BENCH_DIR"))
    try:
        home = os.path.join(tmp, "home")
        os.makedirs(home)
        env = common.isolated_env(home)
        # a long generated session: its first line is the header, the rest are entries
        src = os.path.join(tmp, "gen.jsonl")
        gen_sessions.write_session(src, 10**9, random.Random(a.seed), "/home/user/proj",
                                   target_bytes=a.entries * 20_000 + int(a.history * (1 << 20)))
        with open(src, "rb") as f:
            lines = f.read().splitlines(keepends=True)
        if a.kb:
            lines = lines[:2] + kb_entries(a.entries, random.Random(a.seed))
        if len(lines) < a.entries + 2:
            sys.exit("generated session too short")
        old = 2
        if a.history:
            target, size = a.history * (1 << 20), 0
            while size < target and old < len(lines) - a.entries:
                size += len(lines[old])
                old += 1
        seed_part = b"".join(lines[:old])             # header + system entry (+ history): the file to append to
        new = lines[old:a.entries + old]               # the entries to append (headerless stream)
        data = os.path.join(tmp, "stream.jsonl")
        with open(data, "wb") as f:
            f.writelines(new)
        size = sum(map(len, new))
        fresh = os.path.join(tmp, "session.jsonl")

        kept = {}

        def reset():
            with open(fresh, "r+b" if os.path.exists(fresh) else "wb") as f:
                f.write(seed_part)          # in place: the same file, as the last turn left it
                f.truncate()
                f.flush()
                os.fsync(f.fileno())
            if kept:        # (a panto without the cache leaves none)
                os.utime(fresh, ns=kept["times"])
                with open(kept["path"], "wb") as f:
                    f.write(kept["data"])
            return fresh

        if a.history:       # the index cache the previous turn would have left
            reset()
            last = os.path.join(tmp, "last.jsonl")     # an entry the file has: append writes nothing
            with open(last, "wb") as f:
                f.write(lines[old - 1])
            common.timed([exe, "append", fresh], env, stdin_path=last)
            st = os.stat(fresh)
            index_dir = os.path.join(env["XDG_CACHE_HOME"], "panto", "index")
            for name in os.listdir(index_dir) if os.path.isdir(index_dir) else ():
                with open(os.path.join(index_dir, name), "rb") as f:
                    kept.update(times=(st.st_atime_ns, st.st_mtime_ns), path=os.path.join(index_dir, name),
                                data=f.read())

        cases = {
            "bare os.write + fsync loop": lambda: [sys.executable, "-c", BARE, reset()],
            "panto-log append FILE": lambda: [exe, "append", reset()],
        }
        empty = os.path.join(tmp, "empty.jsonl")
        open(empty, "wb").close()
        best = {k: float("inf") for k in cases}
        start = {k: float("inf") for k in cases}
        rounds = []         # per round, side by side: {name: (whole run, empty stream)}
        for _ in range(a.repeat):
            rounds.append({})
            for name, make in cases.items():
                whole, nothing = once(make(), data, env), once(make(), empty, env)
                rounds[-1][name] = (whole, nothing)
                best[name] = min(best[name], whole)
                start[name] = min(start[name], nothing)
        reset()
        once(cases["panto-log append FILE"](), data, env)
        with open(fresh, "rb") as f:
            assert f.read() == seed_part + b"".join(new), "panto-log append did not write every entry"
        ref = best["bare os.write + fsync loop"]
        per = {k: (best[k] - start[k]) / len(new) for k in cases}
        ref_per = per["bare os.write + fsync loop"]
        print(f"append of {len(new)} entries ({size / 1e6:.1f} MB) to a session of {len(seed_part) / 1e6:.1f} MB, "
              f"best of {a.repeat} (target: within {TARGET}x)")
        print(f"  {'':28s} {'whole run':>9s}  {'start-up':>8s}  {'per entry':>9s}")
        for name, dt in best.items():
            print(f"  {name:28s} {dt:7.3f} s  {start[name] * 1e3:5.0f} ms  {per[name] * 1e6:6.0f} us"
                  f"  {dt / ref:5.2f}x whole, {per[name] / ref_per:5.2f}x per entry")
        r = per["panto-log append FILE"] / ref_per
        print(f"panto-log append / bare loop, per entry (start-up apart, see bench_startup.py), best runs: "
              f"{r:.2f}x")
        ratios = sorted((p[0] - p[1]) / (b[0] - b[1]) for b, p in
                        ((x["bare os.write + fsync loop"], x["panto-log append FILE"]) for x in rounds))
        whole = sorted(x["panto-log append FILE"][0] / x["bare os.write + fsync loop"][0] for x in rounds)
        import statistics

        med = statistics.median(ratios)
        print(f"side by side, {a.repeat} rounds (load {os.getloadavg()[0]:.2f}): per entry best {ratios[0]:.2f} / "
              f"median {med:.2f} / worst {ratios[-1]:.2f}; whole run best {whole[0]:.2f} / median "
              f"{statistics.median(whole):.2f} / worst {whole[-1]:.2f} "
              f"({'ok' if med <= TARGET else 'MISSES'}, target <= {TARGET}x)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
