"""Run the tool calls the model asked for and append their results.

Usage:
  panto-tool [--yes] [--timeout=SECONDS] [--quiet | --live]
  panto-tool --list
  panto-tool -h | --help
  panto-tool --version

Reads a panto stream, passes it through unchanged, runs the tool uses of the
leaf assistant entry that have no result yet (in the working directory) and
appends one user entry with a toolResult per use. bash, write and edit (and
read outside the working directory) ask on the terminal, one key: y(es),
n(o) or a(lways: this bash command name, or this tool, for the session;
kept in the file named by PANTO_ALLOW_FILE).

Options:
  --yes                Run every call without asking.
  --timeout=SECONDS    Default time limit of a bash call [default: 120].
  --quiet              Do not show the calls and their output on stderr.
  --live               Show them even when stderr is not a terminal.
  --list               Print the JSON schemas of the built-in tools.
  -h --help            Show this help.
  --version            Show the version.
"""
import os
import sys

from pantolib import cli

NAME = "panto-tool"


@cli.command(NAME)
def main(argv=None):
    import signal

    from pantolib import launch

    # Ctrl-C at the question or during a call is handled, even when started
    # with SIGINT ignored; until the input is passed on it is held (run()).
    launch.hold_sigint()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    args = cli.parse(__doc__, argv)
    from pantolib.errors import UsageError

    if args["--list"]:
        import orjson

        from pantolib import tools

        cli.stdout().write(orjson.dumps(tools.schemas(), option=orjson.OPT_INDENT_2) + b"\n")
        return cli.OK
    try:
        timeout = float(args["--timeout"])
        if not timeout > 0:
            raise ValueError
    except ValueError:
        raise UsageError(f"--timeout must be a positive number of seconds, not '{args['--timeout']}'") from None
    return run(args["--yes"], timeout, live=args["--live"] or (not args["--quiet"] and sys.stderr.isatty()))


def run(yes, timeout, live):
    from pantolib import launch, stream
    from pantolib.conversation import Session
    from pantolib.tools import runner

    out = cli.stdout()
    session = Session.read(cli.stdin())
    out.writelines(line.raw for line in session.lines)
    out.flush()   # downstream persists the calls before any of them runs
    if launch.release_sigint():     # Ctrl-C before any call started: none is run
        if session.unanswered_tool_uses():
            cli.warn(NAME, "interrupted before the calls ran (none was run)")
        return cli.INTERRUPTED
    cwd = os.getcwd()
    approver = runner.Approver(yes=yes, allow_file=os.environ.get("PANTO_ALLOW_FILE"))
    try:
        entry, interrupted = runner.answer(session, approver, runner.Display(live, cwd),
                                           cwd=cwd, timeout=timeout)
    finally:
        approver.close()
    if approver.allowed.problem:
        cli.warn(NAME, approver.allowed.problem)
    if entry is None:
        return cli.OK
    out.write(stream.dumps(entry))
    out.flush()
    if approver.no_tty and not yes:
        cli.warn(NAME, "calls that need confirmation were declined: no terminal (use --yes to allow them)")
    if interrupted:
        cli.warn(NAME, "interrupted (the results so far are passed on)")
        return cli.INTERRUPTED
    return cli.OK
