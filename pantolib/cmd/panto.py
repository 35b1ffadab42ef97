"""panto — a conversational coding agent in the terminal.

Usage:
  panto sessions [--all]
  panto help
  panto [options] [--resume [ID]]
  panto -h | --help
  panto --version

Every turn runs the plumbing as a pipeline (panto-log replay | panto-send |
panto-tool | ... | panto-log append); the session file is the only state.

Options:
  --resume                  Resume the most recently active session of this
                            directory, or the session ID (an id or a unique
                            id prefix, as panto-ls shows it).
  -p --provider=PROVIDER    openai or anthropic (default: from the session,
                            else PANTO_API_STYLE).
  -m --model=MODEL          The model (default: from the session, else
                            OPENAI_MODEL / ANTHROPIC_MODEL).
  --api=NAME                Wire API: openai_chat, openai_responses or
                            anthropic_messages (default: PANTO_API_STYLE,
                            else the session's, else the provider's own).
  --yes                     Run tool calls without asking for confirmation.
  --no-tools                Do not offer the tools to the model.
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
    args = cli.parse(__doc__, argv)
    from pantolib import repl
    from pantolib.errors import UsageError
    from pantolib.providers import APIS, NAMES as PROVIDERS

    if args["help"]:
        sys.stdout.write(__doc__)
        return cli.OK
    if args["sessions"]:
        return sessions(args["--all"])
    if args["ID"] is not None and not args["--resume"]:
        raise UsageError(f"'{args['ID']}': a session id goes after --resume")
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
    if args["--resume"]:
        path = resume_path(args["ID"])
    from pantolib import permissions

    rules, problems = permissions.load()    # once: nothing a command writes later changes this run
    for problem in problems:
        cli.warn(NAME, problem)
    r = repl.Repl(path=path, provider=provider, model=args["--model"], yes=args["--yes"],
                  max_steps=max_steps, tools=not args["--no-tools"], history=repl.setup_history())
    r.rules = rules
    r.api = api
    session = None
    if path is not None:
        session = r.load()
        count = sum(1 for line in session.lines if line.kind != "header")
        r.say(f"resumed session {session.header['id'] if session.header else os.path.basename(path)} "
              f"({repl.plural(count, 'entry', 'entries')})")
        started = (session.header or {}).get("cwd")
        if isinstance(started, str) and started != os.getcwd():
            from pantolib.terminal import visible_line

            r.say(f"note: this session was started in {visible_line(started)}; "
                  f"tools run here, in {visible_line(os.getcwd())}")
    elif args["--resume"]:
        r.say("no sessions to resume; starting fresh.")
    r.say(repl.banner(r, session))
    if session is not None:
        r.show_last_exchange(session)
    r.loop()
    return cli.OK


def resume_path(session_id):
    from pantolib import paths

    if session_id is None:
        return paths.last_session()
    return paths.resolve(session_id)


def sessions(every):
    from pantolib.pipeline import Pipeline, command_argv

    statuses, data = Pipeline([command_argv("panto-ls", *(["--all"] if every else []))]).run()
    if data:
        cli.stdout().write(data)
    elif statuses == [0]:
        print(f"no sessions for {os.getcwd()}")
    return cli.OK if statuses == [0] else cli.FAIL
