#!/usr/bin/env python3
"""panto-log import --all && panto-cost --all --by session vs ccusage, over many Claude Code sessions.

    bench/bench_import.py [--sessions 1000] [--turns 30] [--pad 600] [--big-mb 200] [--rounds 3] [--keep DIR]

SPEC §12 targets, over 10,000 Claude Code sessions (~1 GB): the first
import and report at most 3x the time of `ccusage claude session --offline
--json` on the same files (the median of three runs of it, beside each of
panto's; panto writes a durable archive, ccusage writes
nothing); when nothing changed each command at most 0.05x and the two
together 0.1x; after one session grew by a turn, 0.15x. And memory flat
whatever a file's size: the peak RSS of importing one --big-mb file is
compared with that of importing a small one. The repeated figures (nothing
changed; one grown, another session each round) are measured --rounds
times, and their medians are held to the targets. Sessions are generated here
(each turn a prompt and a reply in two split lines, the way Claude Code
writes them; every tenth session a resumed copy of an earlier one's first
turn), and written to disk (sync) before the first run, so that their
writeback does not wait in panto's syncs. Defaults are small (this
machine is shared): pass --sessions 10000 --turns 30 --pad 700 for the
full ~0.9 GB (921 MB). Without ccusage on PATH only
panto's figures are printed. With it, the floors of a first import follow:
a durable copy of the sources (durable_copy) and orjson.loads of every
line (common.floor), each against ccusage's time.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

FIRST, NOTHING_EACH, NOTHING_BOTH, GROWN = 3.0, 0.05, 0.1, 0.15


def sid_of(i):
    return f"{i:08x}-1111-4222-8333-444444444444"


def turn(sid, i, parent, pad, cwd):
    import orjson

    ts = f"2025-06-{1 + i // 1440 % 28:02d}T{i // 60 % 24:02d}:{i % 60:02d}:00.000Z"
    base = {"isSidechain": False, "userType": "external", "cwd": cwd, "sessionId": sid, "version": "2.0.1"}
    u, a, b = f"{sid[:8]}-u{i}", f"{sid[:8]}-a{i}", f"{sid[:8]}-b{i}"
    text = ("lorem ipsum " * (pad // 12 + 1))[:pad]
    mid, rid = f"msg_{sid[:8]}_{i}", f"req_{sid[:8]}_{i}"

    def usage(out):
        return {"input_tokens": 10 + i, "cache_creation_input_tokens": 500, "cache_read_input_tokens": 20000 + i,
                "output_tokens": out, "cache_creation": {"ephemeral_5m_input_tokens": 500,
                                                         "ephemeral_1h_input_tokens": 0}}
    recs = [
        {"parentUuid": parent, **base, "type": "user", "message": {"role": "user", "content": f"q{i} {text}"},
         "uuid": u, "timestamp": ts},
        {"parentUuid": u, **base, "requestId": rid, "type": "assistant", "uuid": a, "timestamp": ts,
         "message": {"id": mid, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                     "content": [{"type": "text", "text": f"a{i} {text}"}], "stop_reason": None,
                     "usage": usage(1)}},
        {"parentUuid": a, **base, "requestId": rid, "type": "assistant", "uuid": b, "timestamp": ts,
         "message": {"id": mid, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                     "content": [{"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": "ls"}}],
                     "stop_reason": "tool_use", "usage": usage(40 + i % 50)}},
    ]
    return b"".join(orjson.dumps(r) + b"\n" for r in recs), b


def generate(root, sessions, turns, pad):
    total = 0
    for s in range(sessions):
        sid = sid_of(s)
        cwd = f"/home/me/proj{s % 20}"
        d = os.path.join(root, "projects", "-home-me-proj%d" % (s % 20))
        os.makedirs(d, exist_ok=True)
        parts, parent = [], None
        if s % 10 == 9:          # a resumed session: begins with a copy of the previous one's first turn
            first = (s - 1) * 1000
            data, _ = turn(sid_of(s - 1), first, None, pad, f"/home/me/proj{(s - 1) % 20}")
            parts.append(data.replace(sid_of(s - 1).encode(), sid.encode()).replace(
                f"/home/me/proj{(s - 1) % 20}".encode(), cwd.encode()))
            parent = f"{sid_of(s - 1)[:8]}-b{first}"
        for i in range(turns):
            data, parent = turn(sid, s * 1000 + i, parent, pad, cwd)
            parts.append(data)
        with open(os.path.join(d, sid + ".jsonl"), "wb") as f:
            blob = b"".join(parts)
            f.write(blob)
            total += len(blob)
    return total


def grow(root, s, turns, pad):
    sid = sid_of(s)
    path = os.path.join(root, "projects", "-home-me-proj%d" % (s % 20), sid + ".jsonl")
    data, _ = turn(sid, s * 1000 + turns, f"{sid[:8]}-b{s * 1000 + turns - 1}", pad, f"/home/me/proj{s % 20}")
    with open(path, "ab") as f:
        f.write(data)


def durable_copy(sources, dest):
    """Seconds to copy each source into a new file of its own under dest (a
    folder per project, as panto's per cwd), each written whole and
    fdatasync'd as many at a time as panto-log import syncs, then each
    folder synced: what a first import must do at least to leave a durable
    archive."""
    from concurrent.futures import ThreadPoolExecutor

    from pantolib.importing import IN_FLIGHT

    def sync(fd):
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)

    t = time.perf_counter()
    folders = set()
    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        done = []
        for src in sources:
            folder = os.path.join(dest, os.path.basename(os.path.dirname(src)))
            if folder not in folders:
                os.makedirs(folder, mode=0o700)
                folders.add(folder)
            with open(src, "rb") as f:
                data = f.read()
            fd = os.open(os.path.join(folder, os.path.basename(src)), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, data)
            except BaseException:
                os.close(fd)
                raise
            done.append(pool.submit(sync, fd))
            if len(done) >= 2 * IN_FLIGHT:
                done.pop(0).result()
        for job in done:
            job.result()
    for folder in folders:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--pad", type=int, default=600)
    ap.add_argument("--big-mb", type=int, default=200)
    ap.add_argument("--keep")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the repeated figures (their median is held)")
    a = ap.parse_args()
    log, cost = common.command("panto-log"), common.command("panto-cost")
    ccusage = shutil.which("ccusage")
    tmp = a.keep or tempfile.mkdtemp(prefix="bench-import-")
    try:
        claude = os.path.join(tmp, "claude")
        t = time.perf_counter()
        size = generate(claude, a.sessions, a.turns, a.pad)
        os.sync()   # the sources at rest, as a person's are: their writeback does not slow panto's syncs
        print(f"{a.sessions} sessions, {size / 1e6:.0f} MB (generated in {time.perf_counter() - t:.1f} s)")
        home = os.path.join(tmp, "home")
        os.makedirs(home, exist_ok=True)
        env = common.isolated_env(home, CLAUDE_CONFIG_DIR=claude, XDG_STATE_HOME=os.path.join(home, ".state"),
                                  CODEX_HOME=os.path.join(tmp, "no-codex"))
        _, prices = common.timed([cost, "--example-prices"], env, capture=True)
        os.makedirs(os.path.join(home, ".config", "panto"), exist_ok=True)
        with open(os.path.join(home, ".config", "panto", "models.toml"), "wb") as f:
            f.write(prices)
        imp = [log, "import", "--all"]
        rep = [cost, "--all", "--by", "session"]

        def ours(label):
            ti, _ = common.timed(imp, env)
            tc, _ = common.timed(rep, env)
            cc = None
            if ccusage:     # its time varies by a third from run to run: the median of three, side by side
                cc = statistics.median(common.timed([ccusage, "claude", "session", "--offline", "--json"], env)[0]
                                       for _ in range(3))
            line = f"{label:<16} import {ti:7.3f} s  cost {tc:7.3f} s  together {ti + tc:7.3f} s"
            if cc:
                line += f"  ccusage {cc:7.3f} s  ratio {(ti + tc) / cc:.3f} (import {ti / cc:.3f}, cost {tc / cc:.3f})"
            print(line)
            return ti, tc, cc

        first = ours("first")
        rounds = max(1, a.rounds)
        same = [ours("nothing changed") for _ in range(rounds)]
        grown = []
        for k in range(rounds):      # another session each round, grown by a turn
            grow(claude, (a.sessions // 2 + k) % a.sessions, a.turns, a.pad)
            grown.append(ours("one grown"))
        if ccusage:
            def median(parts, rs):
                return statistics.median(sum(r[i] for i in parts) / r[2] for r in rs)

            checks = [("first", median((0, 1), [first]), FIRST),
                      ("nothing changed, import", median((0,), same), NOTHING_EACH),
                      ("nothing changed, cost", median((1,), same), NOTHING_EACH),
                      ("nothing changed, both", median((0, 1), same), NOTHING_BOTH),
                      ("one grown, both", median((0, 1), grown), GROWN)]
            print(f"  (the repeated figures: medians of {rounds} rounds)")
            for name, ratio, target in checks:
                print(f"  {name:<26} {ratio:6.3f}x  (target <= {target}x) {'ok' if ratio <= target else 'MISSED'}")
        if ccusage:      # the floors a missed target is measured against
            sources = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(os.path.join(claude, "projects"))
                             for f in fs if f.endswith(".jsonl"))
            copy = durable_copy(sources, os.path.join(tmp, "floor-copy"))
            parse = common.floor(sources)
            cc = statistics.median(r[2] for r in same + grown)
            print(f"floor, a durable copy of the sources (a file each, written and fdatasync'd as panto's are, "
                  f"folders synced): {copy:.2f} s = {copy / cc:.3f}x ccusage; orjson.loads of every line, "
                  f"one fresh Python a CPU: {parse:.2f} s = {parse / cc:.3f}x; panto's first import "
                  f"{first[0]:.2f} s = {first[0] / copy:.2f}x the copy")
        # memory: one huge source against a small one
        big = os.path.join(tmp, "big")
        small = os.path.join(tmp, "small")
        for root, size in ((small, 0), (big, a.big_mb * 1_000_000)):
            d = os.path.join(root, "projects", "-home-me-big")
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, sid_of(0) + ".jsonl"), "wb") as f:
                parent, i, written = None, 0, 0
                while i < 20 or written < size:     # 20 turns, or as many as make --big-mb
                    data, parent = turn(sid_of(0), i, parent, a.pad * 2, "/home/me/big")
                    written += f.write(data)
                    i += 1
        rss = {}
        for name, root in (("small", small), ("big", big)):
            h = os.path.join(tmp, "home-" + name)
            os.makedirs(h, exist_ok=True)
            e = common.isolated_env(h, CLAUDE_CONFIG_DIR=root, XDG_STATE_HOME=os.path.join(h, ".state"),
                                    CODEX_HOME=os.path.join(tmp, "no-codex"))
            peak = common.PeakRss(imp)
            dt, _ = common.timed(peak.argv, e)
            rss[name] = (peak.kb(), dt, os.path.getsize(os.path.join(root, "projects", "-home-me-big",
                                                                       sid_of(0) + ".jsonl")))
        for name, (kb, dt, sz) in rss.items():
            print(f"memory {name:<5} source {sz / 1e6:7.1f} MB  import {dt:6.2f} s  peak RSS "
                  f"{kb / 1024 if kb else float('nan'):6.1f} MB")
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
