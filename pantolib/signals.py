"""What every panto command does with SIGINT, SIGTERM and SIGHUP: one table.

bin/panto-launcher reads it first, before any other import (this module
imports only _signal), and so does pantolib/launch.py when the REPL starts
a command; the commands then take, hold or release their signals through
the functions below, and nothing else in panto changes how a signal is
taken (a command may only catch() one for a moment or finish()).

A closed terminal (SIGHUP) and a polite kill (SIGTERM) are taken the way
Ctrl-C is: what a command has received is never cut short, panto-send keeps
a partial reply as `aborted`, panto-tool writes the result of the call it
stopped, and panto-log append finishes its input. A command stopped by
signal N exits 128 + N (130, 143, 129), the status a shell reports for a
process the signal ended.

How each is taken:

- IGNORE: never. The command finishes its input and ends at EOF
  (`panto-log append`; `panto-log replay` into a pipe or a file, so that the
  next command never gets a stream cut short: a prompt appended after it
  would branch the session at an earlier entry).
- TAKE: from the command's error boundary on (cli.run, arm()) it raises
  KeyboardInterrupt, handled as the command handles Ctrl-C; before that it
  is blocked, so it can never strike inside Python's start-up or the
  command's first imports.
- HOLD: blocked until the command has passed its input on (release()): one
  that came meanwhile ends it then, without a request and without running a
  call, but never without passing the stream on; after that, as TAKE.
- END (the REPL): taken as TAKE, so it cancels the turn as Ctrl-C does
  (the session kept whole), then panto ends (ending() says so).

In the commands a person interrupts while they work (panto-send,
panto-tool, the REPL), every import of a module not loaded yet holds the
signals (guard_imports): one taken inside the import system can strike its
own cleanup, which prints a traceback and loses the KeyboardInterrupt.

The bin/ scripts ignore all three before Python starts (a signal inside
Python's own start-up would kill the command before any of its code runs:
ignored there, the signal is lost, never the command), and the REPL blocks
them around each fork; both states survive exec, and start() sets what the
table says. A signal ignored by the one who started panto (`nohup`) cannot
be told apart from the scripts' own: it is taken as the table says.
"""
import _signal

INT, TERM, HUP = _signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP
SIGNALS = (INT, TERM, HUP)
IGNORE, TAKE, HOLD, END = "ignore", "take", "hold", "end"

TABLE = {
    # command                 SIGINT  SIGTERM SIGHUP
    "panto":                 (TAKE,   END,    END),
    "panto-send":            (HOLD,   HOLD,   HOLD),
    "panto-tool":            (HOLD,   HOLD,   HOLD),
    "panto-log append":      (IGNORE, IGNORE, IGNORE),
    "panto-log replay |":    (IGNORE, IGNORE, IGNORE),    # stdout not a terminal
    "panto-log":             (TAKE,   TAKE,   TAKE),
    "panto-ls":              (TAKE,   TAKE,   TAKE),
    "panto-cost":            (TAKE,   TAKE,   TAKE),
}

received = []       # the signals taken, in order (status() and ending() read it)
_modes = {}         # signal -> how this process takes it (set by start())


def row(name, argv):
    """The table's row for command `name` run with `argv`."""
    if name == "panto-log" and argv[:1] == ["append"]:
        return TABLE["panto-log append"]
    if name == "panto-log" and argv[:1] == ["replay"] and not _isatty(1):
        return TABLE["panto-log replay |"]
    return TABLE[name]


def _isatty(fd):
    import os

    return os.isatty(fd)


def start(name, argv):
    """Before anything else is imported: ignore what the command ignores,
    block the rest (with its handler set) until the boundary opens."""
    _modes.clear()
    _modes.update(zip(SIGNALS, row(name, argv)))
    taken = [s for s, m in _modes.items() if m != IGNORE]
    _signal.pthread_sigmask(_signal.SIG_BLOCK, taken)
    for sig, mode in _modes.items():
        _signal.signal(sig, _signal.SIG_IGN if mode == IGNORE else _take)
    ignored = [s for s, m in _modes.items() if m == IGNORE]
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, ignored)   # one blocked by the REPL is dropped


def _take(signum, frame):
    received.append(signum)
    raise KeyboardInterrupt


def arm():
    """At the error boundary: TAKE and END signals are taken from now on
    (HOLD ones wait for release())."""
    now = [s for s, m in _modes.items() if m in (TAKE, END)]
    if now:
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, now)


def disarm():
    """The command has returned: nothing may interrupt its final flush."""
    taken = [s for s, m in _modes.items() if m != IGNORE]
    if taken:
        _signal.pthread_sigmask(_signal.SIG_BLOCK, taken)


def hold():
    """For a HOLD command: keep its signals blocked until release(), unless a
    person types the input (stdin is a terminal: then they work at once).
    Its imports are held from here on (guard_imports)."""
    import os

    guard_imports()
    how = _signal.SIG_UNBLOCK if os.isatty(0) else _signal.SIG_BLOCK
    _signal.pthread_sigmask(how, SIGNALS)


def guard_imports():
    """From here on, the import of a module not loaded yet runs with the
    signals held: one that comes meanwhile is taken as the import ends, in
    the code that asked for it. Taken inside the import system, a
    KeyboardInterrupt can strike its own cleanup, which prints a traceback
    and loses it (the command goes on as if no Ctrl-C came). For the
    commands a person interrupts while they work (panto-send, panto-tool,
    the REPL); an import of a module already loaded costs one lookup more."""
    import builtins
    import sys

    real = builtins.__import__
    if getattr(real, "held", False):
        return
    modules = sys.modules

    def held_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0:
            found = modules.get(name)
            if found is not None and (not fromlist or all(hasattr(found, n) for n in fromlist)):
                return real(name, globals, locals, fromlist, level)
        mask = _signal.pthread_sigmask(_signal.SIG_BLOCK, SIGNALS)
        try:
            return real(name, globals, locals, fromlist, level)
        finally:
            _signal.pthread_sigmask(_signal.SIG_SETMASK, mask)

    held_import.held = True
    builtins.__import__ = held_import


def pending():
    """A signal the command takes is waiting (blocked meanwhile)."""
    waiting = _signal.sigpending()
    return any(s in waiting for s, m in _modes.items() if m != IGNORE)


def release(drop=True):
    """Unblock the held signals. True when one came while they were held:
    then (with drop) it is discarded, recorded for status(), and the caller
    ends the command itself."""
    waiting = [s for s in _signal.sigpending() if s in SIGNALS and _modes.get(s, IGNORE) != IGNORE]
    if drop and waiting:
        for sig in waiting:
            received.append(sig)
            previous = _signal.signal(sig, _signal.SIG_IGN)     # discards the pending one
            _signal.pthread_sigmask(_signal.SIG_UNBLOCK, [sig])
            _signal.signal(sig, previous)
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, SIGNALS)
    return bool(drop and waiting)


class held:
    """A block no signal can cut (an import, a whole write): one that comes
    meanwhile is taken at its end."""

    def __enter__(self):
        self.mask = _signal.pthread_sigmask(_signal.SIG_BLOCK, SIGNALS)

    def __exit__(self, *exc):
        _signal.pthread_sigmask(_signal.SIG_SETMASK, self.mask)


class catch:
    """For a moment, every signal this process takes as KeyboardInterrupt
    calls `handler(signum, frame)` instead (a tool's command being started,
    a pipeline of the REPL counting its interruptions)."""

    def __init__(self, handler):
        self.handler = handler

    def __enter__(self):
        def caught(signum, frame):
            received.append(signum)
            self.handler(signum, frame)

        self.previous = {s: _signal.signal(s, caught) for s in SIGNALS if _signal.getsignal(s) is _take}
        return self

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            _signal.signal(sig, handler)


def worker():
    """In a process forked to do part of the command's work (jobs.py), forked
    with the signals blocked (held): each of the three, and a closed pipe,
    ends it at once and silently (the default action: the parent tells what
    stopped the command), never the command's own handler, which would raise
    in the child the KeyboardInterrupt meant for the parent. Then unblocked."""
    for sig in (*SIGNALS, _signal.SIGPIPE):
        _signal.signal(sig, _signal.SIG_DFL)
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, SIGNALS)


def finish():
    """From here on the command finishes whatever comes (a complete reply,
    the results of the calls): every signal is ignored."""
    for sig in SIGNALS:
        _signal.signal(sig, _signal.SIG_IGN)


def status():
    """The exit status of a command a signal stopped: 128 + its number (130
    for Ctrl-C, also when it came as a key or from a child)."""
    return 128 + (received[-1] if received else INT)


def cause():
    """What stopped the command, in words for a result or a note."""
    return {TERM: "SIGTERM", HUP: "SIGHUP"}.get(received[-1] if received else INT, "Ctrl-C")


def ending():
    """The REPL was told to end (SIGTERM, SIGHUP)."""
    return any(_modes.get(s) == END for s in received)
