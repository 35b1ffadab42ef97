"""How every panto command starts, so that Ctrl-C can never kill one inside
Python's start-up or cut a stream short.

The installed commands are the bin/ scripts: `trap '' INT` first, before
Python starts (a SIGINT inside Python's own start-up would kill the command
or end it with a traceback before any of its code runs: ignored there, the
key press is lost instead, never the command), then bin/panto-launcher, whose
first statements decide SIGINT before anything is imported:

- `panto-log append`, and `panto-log replay` writing to a pipe or a file,
  *ignore* it for good: append finishes writing every line it received, and
  replay never hands the next command a stream cut short (a prompt appended
  after it would branch the session at an earlier entry);
- every other command *blocks* it: one that arrives meanwhile waits, pending,
  and is delivered once the command is inside its error boundary (`cli.run`),
  handled like any other Ctrl-C (one line, or the command's own handling),
  never as a traceback from an import. panto-send keeps it blocked longer, up
  to its request, and panto-tool until it has passed its input on (see
  hold_sigint: a Ctrl-C then ends them without a request, without running a
  call, but never without passing the stream on).

Once the command has returned, SIGINT is blocked again, so nothing can
interrupt the final flush either. The REPL starts its children the same way
through this file (run by its path, with -P: the working directory is never
on sys.path, and the pantolib beside it is the one imported), having blocked
SIGINT itself around the fork (a blocked or ignored signal stays so across
exec):

    python -P .../pantolib/launch.py panto-send ARGS...
    python -P .../pantolib/launch.py -panto-log append FILE    (-: SIGINT ignored)
"""
import os
import signal
import sys

DEFAULT, HELD = "default", "held"
MODULES = {
    "panto": ("pantolib.cmd.panto", DEFAULT),
    "panto-send": ("pantolib.cmd.send", HELD),
    "panto-tool": ("pantolib.cmd.tool", HELD),
    "panto-log": ("pantolib.cmd.log", DEFAULT),
    "panto-ls": ("pantolib.cmd.ls", DEFAULT),
    "panto-cost": ("pantolib.cmd.cost", DEFAULT),
}


def run(name, argv=None):
    """Run command `name` (SIGINT already blocked or ignored by the caller)
    and exit with its status."""
    import importlib

    from pantolib import cli

    argv = sys.argv[1:] if argv is None else argv
    sys.argv = [name] + list(argv)
    module, mode = MODULES[name]
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    if ignored:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])   # a pending one is dropped
    wanted = not ignored and mode == DEFAULT
    func = importlib.import_module(module).main.__wrapped__

    def guarded(args):
        try:
            if wanted:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
            return func(args)
        finally:
            if not ignored:
                signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])

    leave(cli.run(name, guarded, list(argv)))


def leave(status):
    """End the process with `status`, without the interpreter's teardown: it
    frees every object one by one (a report over 10,000 sessions spent 5 ms
    of its 70 there), and a teardown while panto-send's network thread is in
    an import can crash. What a teardown would do that matters is done here:
    the atexit functions (panto-send's wait for that thread; coverage's data)
    and the flush of stdout and stderr (what cli.run did not flush after an
    error; a flush that fails then has nobody to tell). Nothing panto writes waits for one:
    sessions and caches are written and closed where they are made, and no
    object of panto has a finalizer."""
    import atexit

    atexit._run_exitfuncs()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):
            pass
    os._exit(int(status))


def hold_sigint():
    """For a command that passes its input on before it can be interrupted
    (HELD): keep SIGINT blocked, unless a person types the input (stdin is a
    terminal: then Ctrl-C works at once)."""
    how = signal.SIG_UNBLOCK if os.isatty(0) else signal.SIG_BLOCK
    signal.pthread_sigmask(how, [signal.SIGINT])


def sigint_pending():
    return signal.SIGINT in signal.sigpending()


def release_sigint(drop=True):
    """Unblock SIGINT. True when one came while it was held: then (with drop)
    it is discarded, and the caller ends the command itself (status 130)."""
    if drop and sigint_pending():
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)     # discards the pending one
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
        signal.signal(signal.SIGINT, previous)
        return True
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    return False


def main():
    name = sys.argv[1]
    if name.startswith("-"):    # "-panto-log": SIGINT ignored all along
        name = name.lstrip("-")
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    run(name, sys.argv[2:])


if __name__ == "__main__":
    _root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if _root not in sys.path:
        sys.path.insert(0, _root)
    main()
