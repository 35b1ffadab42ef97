"""`panto` driven on a pseudo-terminal (Term) and the sessions its tests read
and write."""
import fcntl
import json
import os
import pty
import select
import shutil
import struct
import subprocess
import termios
import time

from sse_server import openai_text

KEY = "sk-test-panto-SECRET-42"


class Term:
    """`panto` on a pseudo-terminal that is its controlling terminal."""

    def __init__(self, args, env, cols=250, rows=50):
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.cols, self.rows = cols, rows
        self.p = subprocess.Popen([shutil.which("panto"), *args], stdin=slave, stdout=slave, stderr=slave,
                                  env=env, start_new_session=True,
                                  preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)
        self.fd, self.buf, self.pos = master, b"", 0

    def _read(self, wait):
        if select.select([self.fd], [], [], wait)[0]:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                data = b""
            if not data:
                return False
            self.buf += data
        return True

    def expect(self, text, timeout=20):
        """Wait for `text` after what was already matched; return what came before it."""
        want = text.encode() if isinstance(text, str) else text
        deadline = time.monotonic() + timeout
        while True:
            i = self.buf.find(want, self.pos)
            if i >= 0:
                before = self.buf[self.pos:i]
                self.pos = i + len(want)
                return before.decode("utf-8", "replace")
            if time.monotonic() > deadline or not self._read(0.05):
                raise AssertionError(f"did not see {text!r}; the terminal shows:\n"
                                     + self.buf.decode("utf-8", "replace"))

    def send(self, text):
        os.write(self.fd, text.encode() if isinstance(text, str) else text)

    def decline(self, key="n"):
        """Answer no (key), then Enter alone at the line it opens for an instruction."""
        self.send(key)
        self.expect("instead (Enter: just decline): ")
        self.send("\r")

    def line(self, text):
        self.send(text + "\r")

    def turn(self, prompt, *shown, timeout=20):
        """Enter a prompt, see each of `shown` in order (each within `timeout`
        seconds), then the next prompt."""
        self.line(prompt)
        for text in shown:
            self.expect(text, timeout)
        self.expect("> ")

    def quit(self, timeout=20):
        self.send(b"\x04")
        return self.finish(timeout)

    def finish(self, timeout=20):
        deadline = time.monotonic() + timeout
        while self.p.poll() is None and time.monotonic() < deadline:
            self._read(0.05)
        while self._read(0.01) and select.select([self.fd], [], [], 0)[0]:
            pass
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
            raise AssertionError("panto did not exit:\n" + self.buf.decode("utf-8", "replace"))
        os.close(self.fd)
        return self.p.returncode

    @property
    def screen(self):
        return self.buf.decode("utf-8", "replace")

    def vt(self):
        """What the terminal holds now, scrollback included (a vt.Screen of everything read)."""
        from vt import Screen

        return Screen(self.cols, self.rows).feed(self.screen)

    def wait_for(self, condition, timeout=20, what="the condition"):
        """Read until condition(self) holds."""
        deadline = time.monotonic() + timeout
        while not condition(self):
            if time.monotonic() > deadline or not self._read(0.05):
                raise AssertionError(f"{what} did not come; the terminal shows:\n" + self.screen)


def session_files(isolated):
    from pantolib import paths

    d = paths.session_dir(str(isolated))
    return sorted(os.path.join(d, f) for f in os.listdir(d)) if os.path.isdir(d) else []


def read_entries(path):
    with open(path, "rb") as f:
        lines = [json.loads(x) for x in f]
    assert lines[0]["type"] == "session"
    return lines[1:]


def usage(p, c):
    return {"prompt_tokens": p, "completion_tokens": c}


def roles(entries):
    return [e["message"]["role"] for e in entries if e["type"] == "message"]


def make_session(srv, env, prompt, answer):
    srv.push(openai_text(answer, usage=usage(10, 2)))
    p = subprocess.run(["bash", "-c", 'set -o pipefail; panto-send --quiet "$1" </dev/null | panto-log append',
                        "-", prompt], capture_output=True, env=env)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.split(b"\n")[0])["id"]


def write_session(isolated, sid, leaf_blocks=None):
    from pantolib import paths

    header = {"type": "session", "version": 1, "id": sid, "timestamp": "2026-01-01T00:00:00.000Z",
              "cwd": str(isolated)}
    entries = [header,
               {"type": "message", "id": "11111111", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
                "provider": "openai", "model": "gpt-4o",
                "message": {"role": "user", "content": [{"type": "text", "text": "do it"}]}},
               {"type": "message", "id": "22222222", "parentId": "11111111",
                "timestamp": "2026-01-01T00:00:01.000Z",
                "message": {"role": "assistant", "content": leaf_blocks or [{"type": "text", "text": "done"}],
                            "provider": "openai", "model": "gpt-4o", "stopReason": "toolUse" if leaf_blocks else "stop"}}]
    path = paths.session_path(header)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("".join(json.dumps(e) + "\n" for e in entries))
    return path
