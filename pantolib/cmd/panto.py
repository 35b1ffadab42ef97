"""panto — a conversational coding agent in the terminal.

Usage:
  panto sessions [--all]
  panto help
  panto [options] [--resume [ID] | -c | --continue | --last] [--] [PROMPT...]
  panto -h | --help
  panto --version

Every turn runs the plumbing as a pipeline (panto-log replay | panto-send |
panto-tool | ... | panto-log append); the session file is the only state.
PROMPT... (the words joined by spaces) is sent as the first prompt.

Options:
  --resume                  Resume the most recently active session of this
                            directory, or the session ID (an id or a unique
                            id prefix, as panto-ls shows it).
  -c --continue             Resume the most recently active session of this
                            directory (as --resume with no id).
  --last                    The same as --continue.
  -p --provider=PROVIDER    openai or anthropic (default: from the session,
                            else PANTO_API_STYLE).
  -m --model=MODEL          The model (default: from the session, else
                            OPENAI_MODEL / ANTHROPIC_MODEL).
  --api=NAME                Wire API: openai_chat, openai_responses or
                            anthropic_messages (default: PANTO_API_STYLE,
                            else the session's, else the provider's own).
  --yes                     Run tool calls without asking for confirmation.
  --no-tools                Do not offer the tools to the model.
  --no-context-files        Leave the project's instructions (AGENTS.md,
                            CLAUDE.md) out of a new session's system prompt.
  --max-steps=N             Requests per prompt, tool rounds included, before
                            panto stops and says so [default: 25].
  --all                     With sessions: every directory's sessions.
  -h --help                 Show this help.
  --version                 Show the version.

In the session: /model, /edit, /retry, /rewind, /tree, /fork, /name,
/compact, /allowed, /cost, /session, /help, /quit (see /help and panto(1)).
Enter sends; a line ending in \\ continues; a paste is one prompt.
Ctrl-C cancels the running request or tool; Ctrl-D quits.
"""
import os
import sys

from pantolib import cli

NAME = "panto"


@cli.command(NAME)
def main(argv=None):
    from pantolib import signals

    signals.guard_imports()     # a Ctrl-C never strikes inside one of the REPL's imports
    args = cli.parse(__doc__, argv)
    from pantolib import repl, screen
    from pantolib.errors import UsageError
    from pantolib.providers import APIS, NAMES as PROVIDERS

    if args["help"]:
        sys.stdout.write(__doc__)
        return cli.OK
    if args["sessions"]:
        return sessions(args["--all"])
    words = args["PROMPT"]
    if args["ID"] is not None and not args["--resume"]:
        words = [args["ID"]] + words    # docopt's ID is the first word of the prompt then
    first = " ".join(words) if words else None
    resume = args["--resume"] or args["--continue"] or args["--last"]
    provider = args["--provider"]
    if provider is not None and provider not in PROVIDERS:
        raise UsageError(f"unknown provider '{provider}' (openai or anthropic)")
    api = args["--api"]
    if api is not None and api not in APIS:
        raise UsageError(f"unknown API '{api}' (use {', '.join(APIS)})")
    if api is not None and provider is not None and APIS[api] != provider:
        raise UsageError(f"--api {api} is for provider {APIS[api]}, not {provider}")
    try:
        max_steps = int(args["--max-steps"])
        if max_steps < 1:
            raise ValueError
    except ValueError:
        raise UsageError(f"--max-steps must be a whole number of at least 1, not '{args['--max-steps']}'") from None
    path = None
    if resume:
        try:
            path = resume_path(args["ID"] if args["--resume"] else None)
        except AmbiguousId as e:     # the error line, then the candidates, one a line
            cli.warn(NAME, f"session id '{e.prefix}' is ambiguous: {len(e.found)} sessions match "
                           "(give more of it: one of these)")
            sys.stderr.write("".join(line + "\n" for line in e.listing()))
            return cli.FAIL
    from pantolib import permissions

    rules, problems = permissions.load()    # once: nothing a command writes later changes this run
    for problem in problems:
        cli.warn(NAME, problem)
    r = repl.Repl(path=path, provider=provider, model=args["--model"], api=api, yes=args["--yes"],
                  max_steps=max_steps, tools=not args["--no-tools"], history=screen.setup_history(),
                  context_files=not args["--no-context-files"], rules=rules)
    session = None
    if path is not None:
        session = r.load()
        count = sum(1 for line in session.lines if line.kind != "header")
        r.say(f"resumed session {session.header['id'] if session.header else os.path.basename(path)} "
              f"({screen.plural(count, 'entry', 'entries')})")
        started = (session.header or {}).get("cwd")
        if isinstance(started, str) and started != os.getcwd():
            from pantolib.terminal import visible_line

            r.say(f"note: this session was started in {visible_line(started)}; "
                  f"tools run here, in {visible_line(os.getcwd())}")
    elif resume:
        r.say("no sessions to resume; starting fresh.")
    r.say(r.banner(session))
    r.start_notes(session)
    if session is not None:
        r.show_last_exchange(session)
    from pantolib import signals

    try:
        r.loop(first)
    except OSError:
        if not signals.ending():
            raise
        # SIGHUP: the terminal is gone, and a write to it fails (EIO); the turn is kept
    return signals.status() if signals.ending() else cli.OK    # SIGTERM, SIGHUP: the turn kept, then out


def resume_path(session_id):
    from pantolib import paths

    if session_id is None:
        return paths.last_session()
    found = [] if os.path.exists(session_id) else paths.candidates(session_id)
    if len(found) > 1 and not any(i == session_id for i, _ in found):
        raise AmbiguousId(session_id, found)
    return paths.resolve(session_id)


class AmbiguousId(Exception):
    """An id prefix that names several sessions: the error line comes after a short list of them."""

    SHOWN = 10

    def __init__(self, prefix, found):
        super().__init__(prefix)
        self.prefix, self.found = prefix, found

    def listing(self):
        """At most SHOWN lines: short id, last activity, first prompt (or title), most recent first."""
        from pantolib import listing, scan
        from pantolib.terminal import visible_line

        rows = []
        for sid, path in self.found:
            try:
                info, _ = listing.summarize(path)
                when = scan.activity(info["last"], os.stat(path).st_mtime_ns)
            except (OSError, ValueError, scan.NotASession):
                info, when = {}, None
            rows.append((when or 0, sid, listing.local_time(when), listing.title(info) or ""))
        rows.sort(reverse=True)
        short = listing.unique_prefixes([r[1] for r in rows])
        out = []
        for _, sid, when, text in rows[:self.SHOWN]:
            first = visible_line(text.strip().split("\n")[0]) if text else "(no prompt)"
            out.append(f"  {short[sid]}  {when}  {first[:60]}")
        if len(rows) > self.SHOWN:
            out.append(f"  … and {len(rows) - self.SHOWN} more")
        return out


def sessions(every):
    from pantolib.pipeline import Pipeline, command_argv

    statuses, data = Pipeline([command_argv("panto-ls", *(["--all"] if every else []))]).run()
    if data:
        cli.stdout().write(data)
    elif statuses == [cli.OK]:
        print(f"no sessions for {os.getcwd()}")
    return cli.OK if statuses == [cli.OK] else cli.FAIL
