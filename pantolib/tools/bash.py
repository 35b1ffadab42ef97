"""bash: run a shell command in the working directory.

The command runs in a process group of its own, with stdin closed and
without the provider API keys in its environment. On timeout the whole
group is killed; on Ctrl-C it is sent SIGINT, then killed STOP_GRACE later,
and Interrupted carries the output so far (the caller writes the result).
When the shell exits, processes it left running in its group are killed
too, so no call outlives its result.
"""
import os
import selectors
import shutil
import signal
import subprocess
import time

from pantolib.tools.common import CAP, ToolError, cap_bytes, without_keys

DEFAULT_TIMEOUT = 120
MAX_TIMEOUT = 3600
LINGER = 0.2   # seconds to wait for the pipe to close after the shell exits

SCHEMA = {
    "name": "bash",
    "description": (
        "Run a shell command (bash -c) in the working directory and return its "
        "combined stdout and stderr. Stdin is closed. Output beyond 50 KB is cut "
        "in the middle. The command is killed after `timeout` seconds "
        f"(default {DEFAULT_TIMEOUT}). A non-zero exit status is reported as an error."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command line to run."},
            "timeout": {"type": "number", "description": f"Seconds before the command is killed (default {DEFAULT_TIMEOUT}, at most {MAX_TIMEOUT})."},
        },
        "required": ["command"],
    },
}


STOP_GRACE = 0.3   # seconds a Ctrl-C'd command has to end on SIGINT before SIGKILL


class Interrupted(KeyboardInterrupt):
    """Ctrl-C while the command ran: it was stopped with its process group;
    `output` is what it had printed (capped), `seconds` how long it ran."""

    def __init__(self, output, seconds):
        super().__init__()
        self.output, self.seconds = output, seconds


def _kill_group(proc, sig=signal.SIGKILL):
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run(args, cwd, timeout=None, watch=None):
    """watch(bytes): what the command prints, as it comes (b"" while it is quiet)."""
    command = args["command"]
    limit = _limit(args, timeout)
    out = _Output()
    sel = selectors.DefaultSelector()
    started = time.monotonic()
    proc, hit = _start(command, cwd)
    try:
        if hit:
            raise KeyboardInterrupt
        timed_out = _collect(proc, sel, out, started + limit, watch or _nothing)
    except KeyboardInterrupt:
        raise _stop(proc, sel, out, started) from None
    finally:
        sel.close()
        _kill_group(proc)   # on timeout, Ctrl-C, or what the shell left running
        proc.stdout.close()
        proc.wait()
    return _result(out.text(), limit, timed_out, proc.returncode)


def _limit(args, timeout):
    """Seconds the command may run: its own timeout, else the caller's, else
    DEFAULT_TIMEOUT; at most MAX_TIMEOUT."""
    limit = args.get("timeout")
    if limit is None:
        limit = DEFAULT_TIMEOUT if timeout is None else timeout
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0:
        raise ToolError("'timeout' must be a positive number of seconds")
    return min(limit, MAX_TIMEOUT)


class _Output:
    """What the command prints, capped: the first and the last CAP/2 bytes
    kept, all of them and their lines counted."""

    def __init__(self):
        self.head, self.tail, self.total, self.lines = bytearray(), bytearray(), 0, 0
        self.half = CAP // 2

    def keep(self, chunk):
        self.total += len(chunk)
        self.lines += chunk.count(b"\n")
        if len(self.head) < self.half:
            take = self.half - len(self.head)
            self.head += chunk[:take]
            chunk = chunk[take:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > 2 * self.half:
                del self.tail[:-self.half]

    def text(self):
        return cap_bytes(bytes(self.head), bytes(self.tail), self.total, lines=self.lines)


def _start(command, cwd):
    """(process, signals): the command started in a process group of its
    own. A signal while it starts (Ctrl-C, SIGTERM, SIGHUP) is only noted:
    the caller stops the process like any other, so it is never left running."""
    from pantolib import signals

    shell = shutil.which("bash") or "/bin/sh"
    hit = []
    with signals.catch(lambda *_: hit.append(True)):
        proc = subprocess.Popen(
            [shell, "-c", command], cwd=cwd, env=without_keys(),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return proc, hit


def _nothing(chunk):
    pass


def _collect(proc, sel, out, deadline, watch):
    """Read what the command prints into out until the shell has exited and
    the pipe is closed (or, when something it started still holds the pipe,
    LINGER after the shell exited). True when the deadline came first."""
    fd = proc.stdout.fileno()
    sel.register(fd, selectors.EVENT_READ)
    exited_at = None
    while True:
        now = time.monotonic()
        if now >= deadline:
            return True
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at > LINGER:
            break   # the shell is gone; something it started still holds the pipe
        wait = min(deadline - now, 0.05 if exited_at is None else LINGER)
        if not sel.select(wait):
            watch(b"")
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        out.keep(chunk)
        watch(chunk)
    try:    # the output is closed: let the shell finish
        proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return True
    return False


def _stop(proc, sel, out, started):
    """Ctrl-C: the whole group is sent SIGINT (as a terminal would send it;
    the caller's SIGKILL follows STOP_GRACE later), what it prints meanwhile
    is kept, and the Interrupted to raise is returned. A second Ctrl-C must
    not cut this short, nor a SIGTERM or SIGHUP."""
    from pantolib import signals

    signals.finish()
    seconds = time.monotonic() - started
    _kill_group(proc, signal.SIGINT)
    if not sel.get_map():   # it came before the output was read: what it printed is kept all the same
        sel.register(proc.stdout.fileno(), selectors.EVENT_READ)
    end = time.monotonic() + STOP_GRACE
    while (now := time.monotonic()) < end and sel.select(end - now):
        chunk = os.read(proc.stdout.fileno(), 1 << 16)
        if not chunk:
            break
        out.keep(chunk)
    return Interrupted(out.text(), seconds)


def _result(output, limit, timed_out, status):
    """(the result's text, whether it is an error) of a command that ended."""
    if timed_out:
        note = f"[timed out after {limit:g} s: the command and its process group were killed]"
    elif status:
        note = f"[killed by signal {-status}]" if status < 0 else f"[exit status {status}]"
    else:
        return output if output else "(no output)", False
    return output + ("\n" if output and not output.endswith("\n") else "") + note, True
