"""Run the tool calls the model asked for and append their results.

Usage:
  panto-tool [--yes] [--timeout=SECONDS] [--quiet | --live] [--rule=RULE]... [--no-rule-files] [--granted-fd=FD]
  panto-tool --check [--rule=RULE]... [--no-rule-files] [--] COMMAND...
  panto-tool --list
  panto-tool -h | --help
  panto-tool --version

Reads a panto stream, passes it through unchanged, runs the tool uses of the
leaf assistant entry that have no result yet (in the working directory) and
appends one user entry with a toolResult per use. bash, write and edit (and
read outside the working directory) ask on the terminal, one key: y(es),
n(o), a then Enter or A (always: the rule the question names, for this run)
or v(iew all of a write or edit the question cuts), unless a rule allows the
call. Rules come
from the user's $XDG_CONFIG_HOME/panto/allow, PANTO_ALLOW_FILE and --rule.

Options:
  --yes                Run every call without asking.
  --timeout=SECONDS    Default time limit of a bash call [default: 120].
  --quiet              Do not show the calls and their output on stderr.
  --live               Show them even when stderr is not a terminal.
  --rule=RULE          Also allow what RULE allows (bash:WORDS, write or edit).
  --no-rule-files      Read neither the user's allow file nor PANTO_ALLOW_FILE.
  --granted-fd=FD      Write each rule "always" adds, one a line, to the open
                       file descriptor FD (commands never get it); with it,
                       Esc while a call runs stops it as Ctrl-C does, and
                       other keys typed meanwhile are written there too
                       (a line keys:HEX) for the program that started it.
  --check              Print `allow RULE` (exit 0) or `ask: WHY` (exit 1): what
                       the rules say of the bash command line COMMAND.
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
    from pantolib import signals

    # Ctrl-C, SIGTERM and SIGHUP at the question or during a call stop it,
    # its result written; until the input is passed on they are held (run(),
    # HOLD in pantolib/signals.py).
    signals.hold()
    args = cli.parse(__doc__, argv)
    from pantolib.errors import UsageError

    if args["--list"]:
        import orjson

        from pantolib import tools

        cli.stdout().write(orjson.dumps(tools.schemas(), option=orjson.OPT_INDENT_2) + b"\n")
        return cli.OK
    rules = load_rules(args)
    if args["--check"]:
        return check(" ".join(args["COMMAND"]), rules)
    try:
        timeout = float(args["--timeout"])
        if not timeout > 0:
            raise ValueError
    except ValueError:
        raise UsageError(f"--timeout must be a positive number of seconds, not '{args['--timeout']}'") from None
    channel = granted_channel(args["--granted-fd"])
    return run(args["--yes"], timeout, live=args["--live"] or (not args["--quiet"] and sys.stderr.isatty()),
               rules=rules, channel=channel)


def load_rules(args):
    """The rules in effect: the rules files (unless --no-rule-files), then --rule."""
    from pantolib import permissions
    from pantolib.errors import UsageError

    if args["--no-rule-files"]:
        rules = permissions.Rules()
    else:
        rules, problems = permissions.load()
        for problem in problems:
            cli.warn(NAME, problem)
    for text in args["--rule"]:
        try:
            rules.add(permissions.parse(text), "--rule")
        except ValueError as e:
            raise UsageError(f"--rule: {e}") from None
    return rules


def check(command, rules):
    from pantolib import permissions

    verdict = permissions.check(command, rules)
    out = cli.stdout()
    if verdict.allowed:
        out.write(f"allow {verdict.rule.text}\n".encode("utf-8", "surrogateescape"))
        return cli.OK
    out.write(f"ask: {verdict.why}\n".encode("utf-8", "surrogateescape"))
    return cli.FAIL


def granted_channel(fd_text):
    """A Channel writing to --granted-fd (kept from every command), or None."""
    from pantolib.errors import UsageError

    if fd_text is None:
        return None
    try:
        fd = int(fd_text)
        if fd < 3:           # never into the stream or the display
            raise ValueError
        os.fstat(fd)
        os.set_inheritable(fd, False)
    except (ValueError, OSError):
        raise UsageError(f"--granted-fd: '{fd_text}' is not an open file descriptor above 2") from None
    return Channel(fd)


class Channel:
    """What panto-tool tells the program that started it (--granted-fd), one
    line each: the rules "always" adds, and keys typed while a call ran."""

    def __init__(self, fd):
        self.fd = fd

    def _line(self, text):
        try:
            os.write(self.fd, (text + "\n").encode("utf-8", "surrogateescape"))
        except OSError:
            pass     # panto is gone: the rule still holds for this run of panto-tool

    def rule(self, rule):
        self._line(rule.text)

    def keys(self, data):
        if data:
            self._line("keys:" + data.hex())


def run(yes, timeout, live, rules=None, channel=None):
    from pantolib import signals, stream
    from pantolib.conversation import Session
    from pantolib.tools import runner

    out = cli.stdout()
    session = Session.read(cli.stdin())
    out.writelines(line.raw for line in session.lines)
    out.flush()   # downstream persists the calls before any of them runs
    if signals.release():     # a signal before any call started: none is run
        if session.unanswered_tool_uses():
            cli.warn(NAME, "interrupted before the calls ran (none was run)")
        return signals.status()
    cwd = os.getcwd()
    # the questions follow the calls' display in order when it is on a terminal
    ask_on = 2 if live and os.isatty(2) else None
    approver = runner.Approver(yes=yes, rules=rules, report=channel and channel.rule, out=ask_on)
    try:
        entry, interrupted = runner.answer(session, approver,
                                           runner.Display(live, cwd, keep=channel and channel.keys),
                                           cwd=cwd, timeout=timeout)
    finally:
        approver.close()
    if entry is None:
        return cli.OK
    signals.finish()    # every call has its result: they are written whatever comes
    out.write(stream.dumps(entry))
    out.flush()
    if approver.no_tty and not yes:
        cli.warn(NAME, "calls that need confirmation were declined: no terminal (use --yes to allow them)")
    if interrupted:
        cli.warn(NAME, "interrupted (the results so far are passed on)")
        return signals.status()
    return cli.OK
