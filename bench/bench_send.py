#!/usr/bin/env python3
"""panto-send against a bare httpx + httpx-sse client, on the same loopback stream.

Both are spawned as processes the same way and read the same scripted
OpenAI-style stream from the test server (tests/sse_server.py) on 127.0.0.1:

  time to first byte   spawn -> first streamed text byte on stderr (a short stream)
  per-event overhead   first byte -> exit, over a stream of N text events

The reference parses each event with orjson and writes its text to a
buffered stderr (no per-event flush): the cheapest client that still shows
the reply. Targets (SPEC §10): TTFB within 1.2x, per-event within 1.15x.

Usage: bench/bench_send.py [--events N] [--runs R]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import sse_server as S  # noqa: E402

sys.path.insert(0, HERE)
import common  # noqa: E402

REFERENCE = r"""
import sys
import httpx, httpx_sse, orjson
url = sys.argv[1]
body = {"model": "gpt-bench", "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "hi"}]}
err = sys.stderr.buffer
first = True
with httpx.Client(timeout=60) as client:
    with httpx_sse.connect_sse(client, "POST", url, json=body,
                               headers={"authorization": "Bearer none"}) as es:
        for ev in es.iter_sse():
            if ev.data == "[DONE]":
                break
            obj = orjson.loads(ev.data)
            choices = obj.get("choices")
            if choices:
                text = choices[0]["delta"].get("content")
                if text:
                    err.write(text.encode())
                    if first:
                        err.flush()
                        first = False
err.write(b"\n")
err.flush()
"""


def stream(n):
    """An OpenAI chat stream of n text events, as one pre-built body."""
    rep = S.openai_text("x" * n, pieces=["tok "] * n, usage={"prompt_tokens": 10, "completion_tokens": n})
    rep["chunks"] = ["".join(rep["chunks"])]
    rep["split"] = 16384
    return rep


def timed(cmd, env):
    """(seconds to the first stderr byte, seconds from it to exit)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    fd = p.stderr.fileno()
    first = None
    while True:
        b = os.read(fd, 65536)
        if not b:
            break
        if first is None:
            first = time.perf_counter()
    p.wait()
    t_end = time.perf_counter()
    p.stderr.close()
    if p.returncode != 0 or first is None:
        raise SystemExit(f"bench: {cmd[0]} failed (status {p.returncode})")
    return first - t0, t_end - first


def compare(srv, cmds, env, short, long_, runs, events):
    """Run each command of `cmds` (name -> argv; "panto-send" and "reference")
    against the short and the long reply, interleaved, and print the medians
    and the ratios of panto-send to the reference."""
    ttfb = {k: [] for k in cmds}
    rate = {k: [] for k in cmds}
    for _ in range(runs):  # interleaved, so drift hits both alike
        for name, cmd in cmds.items():
            srv.push(short)
            ttfb[name].append(timed(cmd, env)[0])
        for name, cmd in cmds.items():
            srv.push(long_)
            rate[name].append(timed(cmd, env)[1])
    med = {k: (statistics.median(ttfb[k]), statistics.median(rate[k])) for k in cmds}
    for k, (t, r) in med.items():
        print(f"{k:11s} first byte {t * 1000:7.1f} ms   {events} events {r * 1000:7.1f} ms "
              f"({events / r:,.0f} events/s, {r / events * 1e6:.2f} us/event)")
    t_ratio = med["panto-send"][0] / med["reference"][0]
    e_ratio = med["panto-send"][1] / med["reference"][1]
    print(f"ratio first byte  {t_ratio:.2f}x  (target <= 1.20x)  {'ok' if t_ratio <= 1.2 else 'OVER'}")
    print(f"ratio per event   {e_ratio:.2f}x  (target <= 1.15x)  {'ok' if e_ratio <= 1.15 else 'OVER'}")
    return t_ratio, e_ratio


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    send = common.command("panto-send")
    with S.Server() as srv:
        env = dict(os.environ, OPENAI_BASE_URL=srv.url + "/v1", OPENAI_API_KEY="none", PANTO_API_STYLE="openai_chat")
        cmds = {"panto-send": [send, "--live", "hi"],
                "reference": [sys.executable, "-c", REFERENCE, srv.url + "/v1/chat/completions"]}
        compare(srv, cmds, env, stream(10), stream(a.events), a.runs, a.events)


if __name__ == "__main__":
    main()
