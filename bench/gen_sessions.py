#!/usr/bin/env python3
"""Generate realistic panto session files, deterministically, for benchmarks.

Library use (other benchmarks import this file):

    import gen_sessions as g
    rng = random.Random(1)
    g.write_session(path, n_turns=50, rng=rng, cwd="/home/me/proj")  # -> (bytes, assistant entries)
    g.make_tree(root, n_sessions=1000, total_bytes=1 << 30, seed=1)   # -> list of paths

`make_tree` lays files out like the sessions directory:
ROOT/<encoded cwd>/<session id>.jsonl, a folder per working directory, so
`PANTO_SESSION_DIR=ROOT panto-ls --all` and `panto-cost --all` see them.

A session is a header, a system entry, then turns: a user prompt (100 B to
2 KB), assistant replies (text 100 B to 20 KB, sometimes thinking, sometimes
tool uses), user entries with tool results (up to 50 KB), in one parent
chain. Providers and models are mixed (Anthropic usage with cache reads and
writes, some 1-hour; OpenAI with cached input and reasoning; a local model
with no price), and a few turns have no usage. Same seed, same bytes.

Command line:

    bench/gen_sessions.py ROOT [--sessions N] [--size SIZE] [--seed S] [--scale F]

SIZE takes K, M and G suffixes (powers of 1024).
"""
import argparse
import os
import random
import sys

import orjson

# (provider, model, usage style)
MODELS = [
    ("anthropic", "claude-sonnet-4-20250514", "anthropic"),
    ("anthropic", "claude-sonnet-4-20250514", "anthropic"),
    ("anthropic", "claude-opus-4-20250514", "anthropic"),
    ("openai", "gpt-4o", "openai"),
    ("openai", "gpt-4o-mini", "openai"),
    ("openai", "gpt-4.1", "openai"),
    ("openai", "o4-mini", "reasoning"),
    ("openai", "local-llama", "openai"),  # not in the bench's price table: unpriced
]
BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
WORDS = ("the of and to in is that for it as with was on be by this are or from at an "
         "function return value error file test line class import self none true false "
         "session stream entry assistant user message content usage token cache model "
         "def if else while for try except raise async await yield lambda dict list str "
         'path "quoted" {braces} [brackets] tab\tnewline\n backslash\\ unicode é ü 漢字 →').split(" ")


class Text:
    """Random text of any length cut from one pre-built corpus (fast)."""

    def __init__(self, rng, size=1 << 20):
        words = [rng.choice(WORDS) for _ in range(size // 5)]
        self.corpus = " ".join(words)
        self.rng = rng

    def __call__(self, n):
        n = min(n, len(self.corpus) // 2)
        start = self.rng.randrange(0, len(self.corpus) - n)
        return self.corpus[start:start + n]


def _text_for(rng):
    # one corpus per Random object, built on first use
    t = getattr(rng, "_gen_text", None)
    if t is None:
        t = Text(rng)
        rng._gen_text = t
    return t


def session_id(rng, ms):
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | rng.getrandbits(12) << 64
    value |= 0b10 << 62 | rng.getrandbits(62)
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def iso(ms):
    import time

    secs, rest = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{rest:03d}Z"


def encode_cwd(cwd):
    body = cwd.lstrip("/")
    for ch in "/\\:":
        body = body.replace(ch, "-")
    return f"--{body}--"


def usage(rng, style, prompt_tokens):
    """A usage object as panto writes it (zero extras omitted), or None (unknown)."""
    if rng.random() < 0.02:
        return None
    out = rng.randint(20, 4000)
    if style == "anthropic":
        cr = rng.randint(0, prompt_tokens)
        cw = rng.randint(0, 3000) if rng.random() < 0.5 else 0
        u = {"input": rng.randint(1, 3000), "output": out, "cacheRead": cr, "cacheWrite": cw}
        if cw and rng.random() < 0.3:
            u["cacheWrite1h"] = rng.randint(0, cw)
    else:
        cached = rng.randint(0, prompt_tokens) // 128 * 128
        u = {"input": max(prompt_tokens - cached, 1), "output": out, "cacheRead": cached}
        if style == "reasoning":
            u["reasoning"] = rng.randint(0, out)
    return {k: v for k, v in u.items() if v or k in ("input", "output")}


def plain_entry(eid, parent, text, user):
    """A user (stamped) or assistant (with usage) message entry of one text block."""
    if user:
        return {"type": "message", "id": eid, "parentId": parent, "timestamp": "2026-04-25T17:40:16.000Z",
                "provider": "openai", "model": "gpt-4o",
                "message": {"role": "user", "content": [{"type": "text", "text": text}]}}
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": "2026-04-25T17:40:17.000Z",
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}],
                        "provider": "openai", "model": "gpt-4o", "stopReason": "stop",
                        "usage": {"input": 100, "output": 20}}}


def write_session(path, n_turns, rng, cwd, target_bytes=None, start_ms=None, scale=1.0):
    """Write one session file of n_turns prompts (or until target_bytes is passed).

    `scale` multiplies every text's length (0.02 gives many small lines).
    Returns (bytes written, number of assistant entries).
    """
    corpus = _text_for(rng)

    def text(n):
        return corpus(max(8, int(n * scale)))
    ms = BASE_MS + rng.randrange(0, 90 * 86_400_000) if start_ms is None else start_ms
    provider, model, style = rng.choice(MODELS)
    ids, parent = set(), None

    def new_id():
        while True:
            i = f"{rng.getrandbits(32):08x}"
            if i not in ids:
                ids.add(i)
                return i

    header = {"type": "session", "version": 1, "id": session_id(rng, ms), "timestamp": iso(ms), "cwd": cwd}
    lines = [orjson.dumps(header)]
    size = len(lines[0]) + 1
    n_assistant = 0

    def entry(role, content, message_extra=None, stamp=True):
        nonlocal parent, ms, size
        ms += rng.randint(50, 30_000)
        e = {"type": "message", "id": new_id(), "parentId": parent, "timestamp": iso(ms)}
        if stamp and role == "user":
            e["provider"], e["model"] = provider, model
        e["message"] = {"role": role, "content": content, **(message_extra or {})}
        parent = e["id"]
        raw = orjson.dumps(e)
        lines.append(raw)
        size += len(raw) + 1

    entry("system", [{"type": "text", "text": "You are a coding agent. " + text(rng.randint(100, 600))}])
    prompt_tokens = 500
    with open(path, "wb") as f:
        for _ in range(n_turns):
            if target_bytes is not None and size >= target_bytes:
                break
            if rng.random() < 0.05:  # switch model mid-session (/model)
                provider, model, style = rng.choice(MODELS)
            entry("user", [{"type": "text", "text": text(rng.randint(100, 2000))}])
            for _step in range(rng.choice((1, 1, 2, 3, 4))):
                content = []
                if style in ("anthropic", "reasoning") and rng.random() < 0.4:
                    block = {"type": "thinking", "thinking": text(rng.randint(100, 3000))}
                    if style == "anthropic":
                        block["signature"] = text(120).encode().hex()[:200]
                    content.append(block)
                content.append({"type": "text", "text": text(rng.randint(100, 20_000))})
                uses = []
                if rng.random() < 0.5:
                    for _k in range(rng.choice((1, 1, 2))):
                        uid = f"toolu_{rng.getrandbits(64):016x}"
                        uses.append(uid)
                        args = orjson.dumps({"command": text(rng.randint(10, 200))}).decode()
                        content.append({"type": "toolUse", "id": uid, "name": "bash", "input": args})
                prompt_tokens += rng.randint(200, 6000)
                u = usage(rng, style, prompt_tokens)
                extra = {"provider": provider, "model": model, "stopReason": "toolUse" if uses else "stop"}
                if u is not None:
                    extra["usage"] = u
                entry("assistant", content, extra)
                n_assistant += 1
                if not uses:
                    break
                results = [{"type": "toolResult", "toolUseId": uid,
                            "content": text(rng.choice((200, 2000, 10_000, 50_000)))} for uid in uses]
                entry("user", results)
            if len(lines) > 64:
                f.write(b"\n".join(lines) + b"\n")
                lines.clear()
        if lines:
            f.write(b"\n".join(lines) + b"\n")
    return size, n_assistant


def make_tree(root, n_sessions, total_bytes, seed=0, n_dirs=None, scale=1.0):
    """Write n_sessions sessions of about total_bytes in all under root; return their paths."""
    rng = random.Random(seed)
    n_dirs = n_dirs or max(1, min(50, n_sessions // 10))
    cwds = [f"/home/user/{rng.choice(('src', 'code', 'work'))}/project-{i}" for i in range(n_dirs)]
    per = max(1, total_bytes // max(1, n_sessions))
    out = []
    for _ in range(n_sessions):
        cwd = rng.choice(cwds)
        d = os.path.join(root, encode_cwd(cwd))
        os.makedirs(d, exist_ok=True)
        target = int(per * rng.uniform(0.5, 1.5))
        # the id is drawn inside write_session; write to a temporary name, then rename
        tmp = os.path.join(d, ".writing.jsonl")
        write_session(tmp, 10**9, rng, cwd, target_bytes=target, scale=scale)
        with open(tmp, "rb") as f:
            sid = orjson.loads(f.readline())["id"]
        path = os.path.join(d, sid + ".jsonl")
        os.replace(tmp, path)
        out.append(path)
    return out


def tree_arguments(ap):
    """The options of a bench that runs over a generated tree of sessions."""
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--size", default="1G", help="total size, e.g. 100M or 1G")
    ap.add_argument("--scale", type=float, default=0.02, help="text length factor of the generated text")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", help="generate into (or reuse) this directory and keep it")


def bench_tree(a, tmp, after=None):
    """(root, files, total bytes) of the tree the options ask for: generated
    under tmp (or into --keep, reused when it is there); `after(files)` runs on
    a tree just generated."""
    import time

    root = a.keep or os.path.join(tmp, "sessions")
    if not (a.keep and os.path.isdir(root) and os.listdir(root)):
        t = time.perf_counter()
        made = make_tree(root, a.sessions, parse_size(a.size), a.seed, scale=a.scale)
        if after is not None:
            after(made)
        print(f"generated in {time.perf_counter() - t:.1f} s", flush=True)
    files = [os.path.join(d.path, e) for d in os.scandir(root) for e in os.listdir(d.path) if e.endswith(".jsonl")]
    return root, files, sum(os.path.getsize(f) for f in files)


def parse_size(s):
    s = s.strip().upper().removesuffix("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    return int(float(s[:-1] if s[-1:] in "KMG" else s) * mult)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write a tree of generated panto sessions.")
    ap.add_argument("root")
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--size", default="100M", help="total size, e.g. 100M or 1G")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scale", type=float, default=1.0, help="text length factor (0.02: small lines)")
    a = ap.parse_args(argv)
    paths = make_tree(a.root, a.sessions, parse_size(a.size), a.seed, scale=a.scale)
    total = sum(os.path.getsize(p) for p in paths)
    print(f"{len(paths)} sessions, {total / 1e6:.1f} MB under {a.root}", file=sys.stderr)


if __name__ == "__main__":
    main()
