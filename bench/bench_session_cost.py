#!/usr/bin/env python3
"""What an agent session costs: a 30-step tool loop through the real
panto-send, priced with list prices, against ideal prompt caching.

The server (bench/anthropic_cache_server.py) caches prompts by Anthropic's
documented rules and reports usage as the API does. Each step sends the
session so far; the model answers with a tool call, and the next step adds
its result (~2k tokens) to a ~6k-token prefix (a long --system plus the
tool definitions). The cost of each run is computed from the usage panto
recorded in the session, with claude-sonnet-5-5's list prices per million
tokens: input $2, output $10, 5-minute cache write $2.50, 1-hour cache
write $4, cache read $0.10 (the read price since 2026-10-07; $0.20 before).

Ideal caching (SPEC 10): every request reads the previous request's whole
prompt from the cache and writes only what is new, at the 5-minute rate.
Targets: --cache 5m and 1h at most 1.1x ideal; at most 0.35x --cache off.

Usage: bench/bench_session_cost.py [--steps N]
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile

import orjson

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402
from anthropic_cache_server import CacheServer  # noqa: E402

MODEL = "claude-sonnet-5-5"
PRICE = {"input": 2.00, "output": 10.00, "write5m": 2.50, "write1h": 4.00, "read": 0.10}  # $ per MTok
WORDS = ("alpha beta gamma delta file line error value return import class def self test "
         "config path index token cache write read stream entry session model server").split()


def text_of(n_tokens, seed):
    rnd = random.Random(seed)
    words, size = [], 0
    while size < n_tokens * 4:
        w = rnd.choice(WORDS)
        words.append(w)
        size += len(w) + 1
    return " ".join(words)


def reply(steps):
    """The scripted model: a bash call per step, then a closing text."""
    def answer(body):
        n = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if n + 1 >= steps:
            return [{"type": "text", "text": "All steps are done."}]
        return [{"type": "tool_use", "id": f"toolu_{n:04d}", "name": "bash",
                 "input": {"command": f"cat part{n}.txt"}}]
    return answer


def cost(u):
    """$ of one usage entry as panto recorded it."""
    w1h = u.get("cacheWrite1h", 0)
    return (u.get("input", 0) * PRICE["input"] + u.get("output", 0) * PRICE["output"]
            + u.get("cacheRead", 0) * PRICE["read"] + (u.get("cacheWrite", 0) - w1h) * PRICE["write5m"]
            + w1h * PRICE["write1h"]) / 1e6


def ideal(log):
    """$ of the same requests under ideal caching."""
    total, prev = 0.0, 0
    for r in log:
        total += (prev * PRICE["read"] + (r["prompt"] - prev) * PRICE["write5m"]
                  + r["output"] * PRICE["output"]) / 1e6
        prev = r["prompt"]
    return total


def run(mode, steps, send, env, system):
    with CacheServer(reply(steps)) as srv:
        env = dict(env, ANTHROPIC_BASE_URL=srv.url, ANTHROPIC_API_KEY="bench-key-0123456789abcdef")
        session = b""
        for step in range(steps):
            args = [send, "-p", "anthropic", "-m", MODEL, "--tools", "--cache", mode, "--quiet"]
            if step == 0:
                args += ["--system", system, "Work through the parts one by one."]
            p = subprocess.run(args, input=session, capture_output=True, env=env)
            if p.returncode != 0:
                sys.exit(f"panto-send failed at step {step} (--cache {mode}): {p.stderr.decode()[:400]}")
            session = p.stdout
            last = orjson.loads(session.rstrip(b"\n").rsplit(b"\n", 1)[-1])
            uses = [b for b in last["message"]["content"] if b["type"] == "toolUse"]
            if not uses:
                break
            result = {"type": "message", "id": os.urandom(4).hex(), "parentId": last["id"],
                      "timestamp": last["timestamp"], "provider": "anthropic", "model": MODEL,
                      "message": {"role": "user", "content": [
                          {"type": "toolResult", "toolUseId": uses[0]["id"], "content": text_of(2000, step)}]}}
            session += orjson.dumps(result) + b"\n"
        recorded = [orjson.loads(x)["message"]["usage"] for x in session.split(b"\n")
                    if b'"role":"assistant"' in x]
        log = list(srv.log)
    if len(recorded) != len(log):
        sys.exit(f"--cache {mode}: {len(log)} requests but {len(recorded)} replies recorded")
    for r, u in zip(log, recorded):  # panto recorded what the server reported
        wire = r["usage"]
        assert u.get("input", 0) == wire["input_tokens"] and u.get("cacheRead", 0) == wire["cache_read_input_tokens"]
        assert u.get("cacheWrite", 0) == wire["cache_creation_input_tokens"], (u, wire)
    return sum(cost(u) for u in recorded), ideal(log), log, recorded


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    a = ap.parse_args()
    send = common.command("panto-send")
    with tempfile.TemporaryDirectory() as home:
        env = common.isolated_env(home)
        system = "You are a careful coding agent. " + text_of(6000 - 400, "system")  # + ~400 of tools
        results = {mode: run(mode, a.steps, send, env, system) for mode in ("5m", "1h", "off")}
    off = results["off"][0]
    ok = True
    print(f"{a.steps}-step tool loop, {MODEL} list prices (ideal: read the previous prompt, write the new part at 5m)")
    first = results["off"][2]
    print(f"prompt: {first[0]['prompt']:,} tokens at step 1, {first[-1]['prompt']:,} at step {len(first)}")
    for mode, (dollars, ideal_cost, log, recorded) in results.items():
        read = sum(u.get("cacheRead", 0) for u in recorded)
        write = sum(u.get("cacheWrite", 0) for u in recorded)
        fresh = sum(u.get("input", 0) for u in recorded)
        r_ideal, r_off = dollars / ideal_cost, dollars / off
        line = (f"--cache {mode:3}  ${dollars:.4f}  {r_ideal:.3f}x ideal (${ideal_cost:.4f})  {r_off:.3f}x off  "
                f"[input {fresh:,}  cache read {read:,}  cache write {write:,}]")
        if mode != "off":
            good = r_ideal <= 1.10 and r_off <= 0.35
            ok &= good
            line += "  ok" if good else "  MISSED (targets: <= 1.10x ideal, <= 0.35x off)"
        print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
