"""panto-tool's tests' parts: a session whose leaf asks for tool calls
(stream_with), panto-tool run without a terminal (tool, results) or on a
pseudo-terminal that is its controlling terminal (Term)."""
import fcntl
import json
import os
import pty
import re
import select
import signal
import shutil
import subprocess
import termios
import time

SID = "0199aaaa-0000-7000-8000-00000000abcd"

HEADER = {"type": "session", "version": 1, "id": SID, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/x"}


def stream_with(*calls, header=True, extra=b""):
    """A session whose leaf assistant entry asks for `calls` (name, input text)."""
    lines = [HEADER] if header else []
    lines.append({"type": "message", "id": "aaaaaaaa", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
                  "provider": "openai", "model": "gpt-4o",
                  "message": {"role": "user", "content": [{"type": "text", "text": "go"}]}})
    content = [{"type": "toolUse", "id": f"call_{i}", "name": n,
                "input": a if isinstance(a, str) else json.dumps(a)} for i, (n, a) in enumerate(calls)]
    lines.append({"type": "message", "id": "bbbbbbbb", "parentId": "aaaaaaaa", "timestamp": "2026-01-01T00:00:01.000Z",
                  "message": {"role": "assistant", "content": content, "provider": "openai", "model": "gpt-4o",
                              "stopReason": "toolUse"}})
    return b"".join(json.dumps(x, ensure_ascii=False).encode() + b"\n" for x in lines) + extra


def tool(data, *args, env=None, timeout=60):
    """Run panto-tool with no controlling terminal (a new session)."""
    exe = shutil.which("panto-tool")
    return subprocess.run([exe, *args], input=data, capture_output=True, env=env, timeout=timeout,
                          start_new_session=True)


def results(proc, data):
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(data)
    rest = proc.stdout[len(data):].splitlines()
    assert len(rest) == 1
    entry = json.loads(rest[0])
    assert entry["parentId"] == "bbbbbbbb" and entry["message"]["role"] == "user"
    assert (entry["provider"], entry["model"]) == ("openai", "gpt-4o")
    assert len(entry["id"]) == 8
    return entry["message"]["content"]

PASTE_ON, PASTE_OFF = b"\x1b[?2004h", b"\x1b[?2004l"

DECLINE_LINE = b"instead (Enter: just decline): "
SGR = re.compile(rb"\x1b\[[0-9;]*m")


class Term:
    """panto-tool with a pseudo-terminal as its controlling terminal (and as
    its stderr with stderr_tty, as in the REPL); keys are written to the
    terminal only after the text they answer has appeared."""

    def __init__(self, data, *args, env=None, stderr_tty=False, typeahead=b"", sigint_ignored=False):
        self.master, slave = pty.openpty()
        self.slave = os.dup(slave)   # kept: the terminal's mode is read after the run
        if typeahead:                # typed before panto-tool even started
            os.write(self.master, typeahead)
        exe = shutil.which("panto-tool")
        self.p = subprocess.Popen([exe, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=slave if stderr_tty else subprocess.PIPE, env=env,
                                  start_new_session=True, pass_fds=(slave,),
                                  preexec_fn=lambda: self._child(slave, sigint_ignored))
        os.close(slave)
        self.p.stdin.write(data)
        self.p.stdin.close()
        self.p.stdin = None
        self.seen = b""

    @staticmethod
    def _child(slave, sigint_ignored):
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        if sigint_ignored:     # as a REPL may start it, so that start-up cannot be interrupted
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    def _read(self, wait):
        if select.select([self.master], [], [], wait)[0]:
            try:
                self.seen += os.read(self.master, 65536)
            except OSError:
                pass

    def expect(self, needle, count=1, timeout=30):
        deadline = time.monotonic() + timeout
        while self.seen.count(needle) < count:
            assert time.monotonic() < deadline and self.p.poll() is None, (needle, self.seen[-2000:])
            self._read(0.05)

    def send(self, keys):
        os.write(self.master, keys)

    def decline(self, key=b"n"):
        """Answer no (key), then Enter alone at the line it opens for an instruction."""
        before = self.seen.count(DECLINE_LINE)
        self.send(key)
        self.expect(DECLINE_LINE, before + 1)
        self.send(b"\r")

    def finish(self):
        out, err = self.p.communicate(timeout=30)
        self._read(0)
        while select.select([self.master], [], [], 0)[0]:
            before = len(self.seen)
            self._read(0)
            if len(self.seen) == before:
                break
        self.mode = termios.tcgetattr(self.slave)
        os.close(self.slave)
        os.close(self.master)
        return self.p.returncode, out, err


def answered(out, data):
    return json.loads(out[len(data):])["message"]["content"]
