#!/usr/bin/env python3
"""A REPL turn's own overhead on a large session (SPEC §10: at most 0.35 s).

`panto --resume` runs in a pseudo-terminal on a generated session of SIZE
(default 10 MB) against the scripted server (tests/sse_server.py) on
127.0.0.1, which answers at once with a short reply. Per turn:

  before   Enter -> the request has arrived at the server
  after    the server has written its last byte -> the prompt is back

Their sum is the REPL's own overhead: three short-lived processes re-read
the session (panto-log replay, panto-send, panto-log append) and the REPL
reads append's echo. The reference, measured in the same run, is the same
pipeline started by sh (start -> request, last byte -> exit): the ratio says
what the REPL adds to the bare plumbing.

Usage: bench/bench_repl.py [--size SIZE_MB] [--runs R]
"""
import argparse
import fcntl
import os
import pty
import random
import select
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import sse_server as S  # noqa: E402

sys.path.insert(0, HERE)
import common  # noqa: E402
import gen_sessions as G  # noqa: E402

SERVED = {}


def _serve_timed(self, rep, _orig=S._Handler._serve):
    try:
        return _orig(self, rep)
    finally:
        SERVED["t"] = time.monotonic()


S._Handler._serve = _serve_timed


def _arrived(self, *args, _orig=S.Request.__init__, **kwargs):
    # the request has arrived once its body is read: the scripted server's
    # own json.loads of it (~30 ms for 10 MB) is server time, not the REPL's
    self.t = time.monotonic()
    _orig(self, *args, **kwargs)


S.Request.__init__ = _arrived
TimedServer = S.Server


class Term:
    def __init__(self, argv, env, cwd):
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        self.p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
                                  start_new_session=True,
                                  preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)
        self.fd, self.buf = master, b""

    def wait_for(self, text, timeout=120):
        deadline = time.monotonic() + timeout
        while text not in self.buf:
            if time.monotonic() > deadline:
                sys.exit(f"panto did not show {text!r}:\n{self.buf[-2000:].decode(errors='replace')}")
            if select.select([self.fd], [], [], 0.5)[0]:
                try:
                    self.buf += os.read(self.fd, 1 << 16)
                except OSError:
                    sys.exit("panto ended:\n" + self.buf[-2000:].decode(errors="replace"))
        at = time.monotonic()
        self.buf = self.buf[self.buf.index(text) + len(text):]
        return at

    def send(self, data):
        os.write(self.fd, data)

    def close(self):
        self.send(b"\x04")
        self.p.wait(30)
        os.close(self.fd)


def make_session(home, cwd, size):
    from pantolib import paths

    env_dir = os.path.join(home, "sessions")
    os.environ["PANTO_SESSION_DIR"] = env_dir
    tmp = os.path.join(home, "gen.jsonl")
    G.write_session(tmp, n_turns=10**6, rng=random.Random(7), cwd=cwd, target_bytes=size)
    with open(tmp, "rb") as f:
        import orjson

        header = orjson.loads(f.readline())
    path = paths.session_path(header)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    shutil.move(tmp, path)
    return header["id"], path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=float, default=10, help="session size in MB")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    common.command("panto")
    home = tempfile.mkdtemp(prefix="panto-bench-repl-")
    cwd = os.path.join(home, "work")
    os.makedirs(cwd)
    try:
        sid, path = make_session(home, cwd, int(a.size * (1 << 20)))
        size = os.path.getsize(path)
        with TimedServer() as srv:
            env = common.isolated_env(home, OPENAI_BASE_URL=srv.url + "/v1", OPENAI_API_KEY="none",
                                      TERM="xterm-256color", XDG_STATE_HOME=os.path.join(home, ".state"))
            reply = S.openai_text("ok.", usage={"prompt_tokens": 10, "completion_tokens": 1})
            # the REPL
            t = Term([shutil.which("panto"), "--resume", sid, "--no-tools", "-p", "openai", "-m", "gpt-bench"],
                     env, cwd)
            t.wait_for(b"panto \xe2\x80\x94")
            t.wait_for(b"> ")
            repl = []
            for i in range(a.runs):
                srv.push(reply)
                n = len(srv.requests)
                enter = time.monotonic()
                t.send(f"bench prompt {i}\r".encode())
                t.wait_for(b"ok.")
                back = t.wait_for(b"> ")
                req = srv.requests[n]
                repl.append((req.t - enter, back - SERVED["t"]))
            t.close()
            # the same pipeline from sh
            shell = []
            pipe = ['panto-log replay "$1" | panto-send --quiet -p openai -m gpt-bench "$2" '
                    '| panto-log append "$1" >/dev/null']
            for i in range(a.runs):
                srv.push(reply)
                n = len(srv.requests)
                start = time.monotonic()
                p = subprocess.run(["sh", "-c", pipe[0], "-", path, f"shell prompt {i}"], env=env, cwd=cwd,
                                   stdin=subprocess.DEVNULL, capture_output=True)
                end = time.monotonic()
                if p.returncode != 0:
                    sys.exit("the pipeline failed: " + p.stderr.decode(errors="replace"))
                shell.append((srv.requests[n].t - start, end - SERVED["t"]))
    finally:
        shutil.rmtree(home, ignore_errors=True)

    def med(xs, k):
        return statistics.median(x[k] for x in xs)

    r_before, r_after = med(repl, 0), med(repl, 1)
    s_before, s_after = med(shell, 0), med(shell, 1)
    total, ref = r_before + r_after, s_before + s_after
    print(f"session: {size / (1 << 20):.1f} MB, {a.runs} turns each (medians)")
    print(f"REPL      Enter -> request {r_before:.3f} s   last byte -> prompt {r_after:.3f} s   "
          f"together {total:.3f} s")
    print(f"pipeline  start -> request {s_before:.3f} s   last byte -> exit   {s_after:.3f} s   "
          f"together {ref:.3f} s")
    print(f"REPL / pipeline: {total / ref:.2f}x; target: together at most 0.35 s -> "
          f"{'met' if total <= 0.35 else 'NOT met'}")


if __name__ == "__main__":
    main()
