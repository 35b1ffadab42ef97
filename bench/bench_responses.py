#!/usr/bin/env python3
"""panto-send --api openai_responses against a bare httpx + httpx-sse client,
on the same loopback Responses stream.

The stream is scripted as OpenAI's streaming reference shows it
(tests/responses_server.py): `event:` lines, a `sequence_number` on every
event, the message item added and done around its `response.output_text.delta`
events, then `response.completed` with usage. Measured as bench_send.py
measures chat completions (same spawning, same timing, same medians):

  time to first byte   spawn -> first streamed text byte on stderr (a short stream)
  per-event overhead   first byte -> exit, over a stream of N text delta events

The reference parses each event with orjson, writes the text of each text
delta to a buffered stderr and stops at `response.completed`. Targets
(SPEC §10): TTFB within 1.2x, per-event within 1.15x.

Usage: bench/bench_responses.py [--events N] [--runs R]
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import responses_server as R  # noqa: E402
import sse_server as S  # noqa: E402

sys.path.insert(0, HERE)
import bench_send  # noqa: E402
import common  # noqa: E402

REFERENCE = r"""
import sys
import httpx, httpx_sse, orjson
url = sys.argv[1]
body = {"model": "gpt-bench", "stream": True, "store": False,
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}
err = sys.stderr.buffer
first = True
with httpx.Client(timeout=60) as client:
    with httpx_sse.connect_sse(client, "POST", url, json=body,
                               headers={"authorization": "Bearer none"}) as es:
        for ev in es.iter_sse():
            obj = orjson.loads(ev.data)
            t = obj.get("type")
            if t == "response.output_text.delta":
                err.write(obj["delta"].encode())
                if first:
                    err.flush()
                    first = False
            elif t == "response.completed":
                break
err.write(b"\n")
err.flush()
"""


def stream(n):
    """A Responses stream with n text delta events, as one pre-built body."""
    s = R.Stream(model="gpt-bench")
    s.message("tok " * n, n=4)
    rep = s.completed(usage=R.usage(10, n))
    rep["chunks"] = ["".join(rep["chunks"])]
    rep["split"] = 16384
    return rep


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    send = common.command("panto-send")
    with S.Server() as srv:
        env = dict(os.environ, OPENAI_BASE_URL=srv.url + "/v1", OPENAI_API_KEY="none")
        cmds = {"panto-send": [send, "--api", "openai_responses", "--live", "hi"],
                "reference": [sys.executable, "-c", REFERENCE, srv.url + "/v1/responses"]}
        bench_send.compare(srv, cmds, env, stream(10), stream(a.events), a.runs, a.events)


if __name__ == "__main__":
    main()
