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


def run(args, cwd, timeout=None):
    command = args["command"]
    limit = args.get("timeout")
    if limit is None:
        limit = DEFAULT_TIMEOUT if timeout is None else timeout
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0:
        raise ToolError("'timeout' must be a positive number of seconds")
    limit = min(limit, MAX_TIMEOUT)
    shell = shutil.which("bash") or "/bin/sh"
    head, tail, total = bytearray(), bytearray(), 0
    half = CAP // 2
    timed_out = False
    exited_at = None
    sel = selectors.DefaultSelector()

    def keep(chunk):
        nonlocal total, head, tail
        total += len(chunk)
        if len(head) < half:
            take = half - len(head)
            head += chunk[:take]
            chunk = chunk[take:]
        if chunk:
            tail += chunk
            if len(tail) > 2 * half:
                del tail[:-half]

    started = time.monotonic()
    deadline = started + limit
    # A Ctrl-C while the command starts is taken once `proc` exists (inside
    # the try below), so it is stopped like any other: never left running.
    hit = []
    previous = signal.signal(signal.SIGINT, lambda *_: hit.append(True))
    try:
        proc = subprocess.Popen(
            [shell, "-c", command], cwd=cwd, env=without_keys(),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except BaseException:
        signal.signal(signal.SIGINT, previous)
        raise
    try:
        signal.signal(signal.SIGINT, previous)
        if hit and previous is not signal.SIG_IGN:
            raise KeyboardInterrupt
        fd = proc.stdout.fileno()
        sel.register(fd, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > LINGER:
                break   # the shell is gone; something it started still holds the pipe
            wait = min(deadline - now, 0.05 if exited_at is None else LINGER)
            if not sel.select(wait):
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            keep(chunk)
        if not timed_out:   # the output is closed: let the shell finish
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
    except KeyboardInterrupt:
        # Ctrl-C: stop the whole group (SIGINT first, as a terminal would send
        # it, then SIGKILL), keep what it printed meanwhile, and say so. A
        # second Ctrl-C must not cut this short.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        seconds = time.monotonic() - started
        _kill_group(proc, signal.SIGINT)
        end = time.monotonic() + STOP_GRACE
        while (now := time.monotonic()) < end and sel.get_map() and sel.select(end - now):
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            if not chunk:
                break
            keep(chunk)
        raise Interrupted(cap_bytes(bytes(head), bytes(tail), total), seconds) from None
    finally:
        sel.close()
        _kill_group(proc)   # on timeout, Ctrl-C, or what the shell left running
        proc.stdout.close()
        proc.wait()
    output = cap_bytes(bytes(head), bytes(tail), total)
    if timed_out:
        note = f"[timed out after {limit:g} s: the command and its process group were killed]"
        return (output + ("\n" if output and not output.endswith("\n") else "") + note), True
    status = proc.returncode
    if status:
        if status < 0:
            note = f"[killed by signal {-status}]"
        else:
            note = f"[exit status {status}]"
        return (output + ("\n" if output and not output.endswith("\n") else "") + note), True
    return output if output else "(no output)", False
