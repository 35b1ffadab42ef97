#!/usr/bin/env python3
"""What compaction buys and costs, on a long generated session with tool calls.

    bench/bench_compact.py [--turns N] [--runs R]

Three runs of panto-send, interleaved, against the scripted server
(tests/sse_server.py) on 127.0.0.1, on the same session:

  reference   the next turn of the uncompacted session
  compact     panto-send --compact on it (the summary request)
  compacted   the next turn after the compaction entry

and the request bodies each sends. Reported as ratios to the reference
measured in the same run: the compacted turn's request size (the point of
compacting) and its time (building the conversation past a compaction entry
must cost no more than building the whole of it), and the compaction's own
time (writing the transcript). Medians of --runs.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import sse_server as S  # noqa: E402

sys.path.insert(0, HERE)
import common  # noqa: E402

import orjson  # noqa: E402


def session(turns):
    """Header, system, then turns of prompt, tool call, a 2 KB result and a reply."""
    out, parent, n = [], None, 0

    def add(role, content, **top):
        nonlocal parent, n
        n += 1
        e = {"type": "message", "id": f"{n:08x}", "parentId": parent, "timestamp": "2026-11-30T09:00:00.000Z"}
        e.update(top)
        m = {"role": role, "content": content}
        if role == "assistant":
            m.update(provider="openai", model="gpt-bench", stopReason="stop", usage={"input": 10, "output": 5})
        e["message"] = m
        out.append(e)
        parent = e["id"]

    stamp = {"provider": "openai", "model": "gpt-bench"}
    add("system", [{"type": "text", "text": "You are a bench."}])
    for t in range(turns):
        add("user", [{"type": "text", "text": f"step {t}: look at module {t} and fix it"}], **stamp)
        add("assistant", [{"type": "toolUse", "id": f"call_{t}", "name": "read",
                           "input": orjson.dumps({"path": f"src/m{t}.py"}).decode()}])
        add("user", [{"type": "toolResult", "toolUseId": f"call_{t}", "content": f"line {t}\n" * 256}], **stamp)
        add("assistant", [{"type": "text", "text": f"Module {t} is fixed: the loop was off by one."}])
    header = {"type": "session", "version": 1, "id": "0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee",
              "timestamp": "2026-11-30T09:00:00.000Z", "cwd": "/bench"}
    return b"".join(orjson.dumps(x) + b"\n" for x in [header, *out])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=500)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    send = common.command("panto-send")
    summary = "Goal: fix every module. Files: src/m*.py fixed. Next steps: run the tests."
    with tempfile.TemporaryDirectory() as home, S.Server() as srv:
        env = common.isolated_env(home, OPENAI_BASE_URL=srv.url + "/v1", OPENAI_API_KEY="none",
                                  PANTO_API_STYLE="openai_chat")
        plain = os.path.join(home, "plain.jsonl")
        with open(plain, "wb") as f:
            f.write(session(a.turns))
        srv.push(S.openai_text(summary, usage={"prompt_tokens": 10, "completion_tokens": 5}))
        _, out = common.timed([send, "--quiet", "--compact"], env, plain, capture=True)
        compacted = os.path.join(home, "compacted.jsonl")
        with open(compacted, "wb") as f:
            f.write(out)
        runs = {"reference": ([send, "--quiet", "next"], plain),
                "compact": ([send, "--quiet", "--compact"], plain),
                "compacted": ([send, "--quiet", "next"], compacted)}
        secs = {k: [] for k in runs}
        size = {}
        for _ in range(a.runs):  # interleaved, so drift hits all alike
            for name, (argv, path) in runs.items():
                srv.push(S.openai_text(summary if name == "compact" else "ok",
                                       usage={"prompt_tokens": 10, "completion_tokens": 5}))
                t = time.perf_counter()
                common.timed(argv, env, path)
                secs[name].append(time.perf_counter() - t)
                size[name] = len(srv.requests[-1].raw)
        mb = os.path.getsize(plain) / 1e6
    med = {k: statistics.median(v) for k, v in secs.items()}
    print(f"session: {a.turns} turns with tool calls, {mb:.1f} MB")
    for k in runs:
        print(f"{k:10s} {med[k] * 1000:7.1f} ms   request {size[k]:>10,} bytes")
    print(f"ratio compacted/reference: request size {size['compacted'] / size['reference']:.4f}x, "
          f"time {med['compacted'] / med['reference']:.2f}x")
    print(f"ratio compact/reference:   request size {size['compact'] / size['reference']:.2f}x, "
          f"time {med['compact'] / med['reference']:.2f}x")


if __name__ == "__main__":
    main()
