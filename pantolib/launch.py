"""How the REPL starts a plumbing command so that Ctrl-C can never kill it
inside Python's start-up.

The REPL starts each child with SIGINT *blocked* (a blocked signal stays
blocked across exec, and one that arrives meanwhile waits, pending). Here,
once the command's module is imported, SIGINT is unblocked inside the
command's error boundary (`cli.run`): a Ctrl-C pressed during start-up is
delivered at that moment and handled like any other (one line, or the
command's own `aborted` handling), never as a traceback from an import.
Once the command has returned, SIGINT is blocked again, so nothing can
interrupt the final flush either. A command started with SIGINT ignored
(`panto-log append`, named with a leading `-`) keeps ignoring it.

    python -P .../pantolib/launch.py panto-send ARGS...
    python -P .../pantolib/launch.py -panto-log append FILE

It is run by its path, with -P (the working directory is never on sys.path),
and imports the pantolib it belongs to: the same code as the REPL that
started it, installed or in a checkout.
"""
import os
import signal
import sys

MODULES = {
    "panto-send": "pantolib.cmd.send",
    "panto-tool": "pantolib.cmd.tool",
    "panto-log": "pantolib.cmd.log",
    "panto-ls": "pantolib.cmd.ls",
    "panto-cost": "pantolib.cmd.cost",
}


def main():
    import importlib

    from pantolib import cli

    name = sys.argv[1]
    wanted = not name.startswith("-")   # "-panto-log": SIGINT ignored all along
    name = name.lstrip("-")
    if not wanted:
        signal.signal(signal.SIGINT, signal.SIG_IGN)    # a pending one is dropped
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    sys.argv = [name] + sys.argv[2:]
    func = importlib.import_module(MODULES[name]).main.__wrapped__

    def guarded(argv):
        try:
            if wanted:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
            return func(argv)
        finally:
            if wanted:
                signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])

    status = cli.run(name, guarded)
    try:
        sys.stdout.flush()
    except (BrokenPipeError, OSError, ValueError):
        cli.silence_stdout()
    sys.exit(status)


if __name__ == "__main__":
    _root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if _root not in sys.path:
        sys.path.insert(0, _root)
    main()
