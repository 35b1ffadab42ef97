"""Send the conversation on stdin to a model and add its reply to the stream.

Usage:
  panto-send [options] [PROMPT]
  panto-send --models [options]
  panto-send --compact [--keep N] [options] [INSTRUCTIONS]
  panto-send -h | --help
  panto-send --version

Writes the input stream, then the new user entry (PROMPT, or the text of
FILE; none when the stream already ends with a user entry), then the
assistant's reply. An empty or headerless input starts a new session.

Options:
  -p, --provider NAME   openai or anthropic (default: the session's, else PANTO_API_STYLE).
  --api NAME            Wire API: openai_chat, openai_responses or anthropic_messages
                        (default: PANTO_API_STYLE, else the session's, else the provider's
                        own, see panto-send(1)).
  -m, --model MODEL     Model id (default: the session's, else OPENAI_MODEL or ANTHROPIC_MODEL).
  --base-url URL        API base URL (default: OPENAI_BASE_URL or ANTHROPIC_BASE_URL).
  --system TEXT         System prompt of a new session (default: panto's own).
  --no-context-files    Leave the project's instructions (AGENTS.md, CLAUDE.md) out
                        of a new session's system prompt.
  -f, --file FILE       Read the prompt from FILE.
  --tools               Offer the built-in tools (bash, read, write, edit).
  --max-tokens N        Most tokens the reply may use.
  --reasoning LEVEL     off, none, minimal, low, medium, high, xhigh or max
                        (Anthropic: or a number of thinking tokens) (default: PANTO_REASONING).
  --cache MODE          Prompt caching: 5m, 1h or off (default: PANTO_CACHE, else 5m).
  --models              List the models the server offers, one per line.
  --quiet               Do not show the reply on stderr.
  --live                Show the reply on stderr even when it is not a terminal.
  --compact             Write a summary of the conversation before the last prompts
                        (a compaction entry) instead of a reply; INSTRUCTIONS are sent with it.
  --keep N              Prompts --compact keeps unsummarized [default: 2].
  --timeout SECONDS     Fail when the server sends nothing for this long [default: 120].
  --retries N           Retries after a 429 or 5xx response, 0 for none [default: 3].
  -h, --help            Show this help.
  --version             Show the version.
"""
import os
import sys

from pantolib import cli

NAME = "panto-send"
DEFAULT_SYSTEM = (
    "You are panto, a coding agent in the user's terminal. You work in the directory {cwd}. "
    "Answer briefly and precisely. When tools are offered, use them to look before you act: "
    "read files before editing them, run commands to check your work, and make small, "
    "verifiable changes. Say what you changed and what is left to do."
)


EXIT_CONTEXT_FULL = 3     # the prompt does not fit the context window: compact and retry
EXIT_INTERRUPTED = 130    # Ctrl-C while the reply streamed: the partial reply is kept
FINISH_WAIT = 2.0         # seconds an exit waits for the network thread's imports


class ContextFull(Exception):
    """The server refused the request because the prompt is too long for the model."""


@cli.command(NAME)
def main(argv=None):
    # SIGINT stays blocked (the launcher blocked it first) until the input and
    # the prompt are passed on: a Ctrl-C meanwhile waits, and then ends the
    # command without a request (see pantolib/launch.py).
    from pantolib import launch

    launch.hold_sigint()
    args = cli.parse(__doc__, argv)
    if args["--compact"] or args["--models"]:
        launch.release_sigint(drop=False)
    if args["--compact"]:
        from pantolib import compaction

        return compaction.run(args, sys.modules[__name__])
    opts = _check(args)
    if args["--models"]:
        return _models(opts)
    # A Ctrl-C inside an import can crash the interpreter (`import orjson`) or,
    # while the network thread imports too, leave a module lock taken for good
    # (a hang): every import of this command happens with SIGINT held.
    with _sigint_held():
        from pantolib import conversation, entries, providers, secrets, stream  # noqa: F401

        net = None if launch.sigint_pending() else _Network()  # the network code loads while the input is read
    prompt = args["PROMPT"]
    if args["--file"] is not None:
        with open(args["--file"], encoding="utf-8") as f:
            prompt = f.read()

    session, out_lines, taken, unstamped = _read_input(args["--system"], not args["--no-context-files"])
    out = cli.stdout()
    with _sigint_held():    # configure imports the wire module
        provider, options, key_var, keys = _configure(opts, session, out, out_lines, unstamped)
    if net is not None:
        net.prepare(options.base_url)
    user = None
    if prompt is not None:
        content = providers.not_run(session.unanswered_tool_uses()) + [entries.text(prompt)]
        user = entries.make_message("user", content, session.leaf, taken, provider=provider,
                                    model=options.model, api=options.api)
        raw = secrets.redact_bytes(stream.dumps(user), keys)
        session.add(stream.Line(raw, user, stream.ENTRY))
        out_lines.append(raw)
    state = {"network": net} if net is not None else {}  # and the reply's accumulator, once it streams
    try:
        _write_input(out, out_lines)  # downstream before anything can go wrong on the network
        del out_lines
        if launch.release_sigint():
            cli.warn(NAME, "interrupted before the request (the input"
                           f"{' and the prompt are' if user is not None else ' is'} passed on)")
            return EXIT_INTERRUPTED
        return _turn(args, session, provider, options, key_var, opts, keys, taken, out, state)
    except KeyboardInterrupt:
        return _aborted(state.get("acc"), session, taken, provider, options, keys, out)
    except ContextFull:
        cli.warn(NAME, f"the prompt is too long for the context window of {options.model} "
                       "(compact the session: panto-send --compact)")
        return EXIT_CONTEXT_FULL


def _configure(opts, session, out, out_lines, unstamped):
    """Provider, Options, key variable and the secrets to hide, for a stream
    read by _read_input; user entries written by hand get this model's stamp.
    When the configuration is wrong the input still goes downstream first."""
    from pantolib import entries, providers, secrets, stream

    try:
        provider, options, key_var = providers.configure(opts, session.active_model(), os.environ)
    except Exception:
        out.writelines(out_lines)
        raise
    options.session_id = (session.header or {}).get("id")
    for i, entry in unstamped:
        out_lines[i] = stream.dumps(entries.stamp(entry, provider, options.model, options.api))
    keys = secrets.ordered([*secrets.env_keys(os.environ), *secrets.url_keys(options.base_url)])
    return provider, options, key_var, keys


class _Network:
    """pantolib.http (httpx: ~100 ms) imported in a thread while the main
    thread reads the input, and, once the base URL is known to be https, the
    CA certificates read there too (the GIL is released meanwhile). join()
    before the first request. The thread never takes SIGINT (the main thread
    does, and handles it as always) and never reports: an import that fails
    there fails again in the main thread, which says so in one line."""

    def __init__(self):
        import signal
        import threading

        self._url = None
        self._known = threading.Event()
        self._thread = threading.Thread(target=self._run, name="panto-send network", daemon=True)
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])   # inherited by the thread
        try:
            self._thread.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        # an early exit (bad input, a usage error) must not finalize the interpreter
        # while the thread is inside an import: that crashes it (SIGSEGV) now and then.
        # Bounded: a Ctrl-C inside an import of the main thread can leave the import
        # lock taken for good, and then the thread never ends (it is left as before).
        import atexit

        atexit.register(self._finish)

    def _run(self):
        try:
            from pantolib import http

            self._known.wait()
            if self._url:
                http.prepare(self._url)
        except BaseException:   # noqa: BLE001 - the main thread meets it again
            pass

    def prepare(self, url):
        self._url = url
        self._known.set()

    def join(self, timeout=None):
        self._known.set()
        self._thread.join(timeout)

    def _finish(self):
        self.join(FINISH_WAIT)


class _sigint_held:
    """A Ctrl-C inside the block is held until its end, then raised."""

    def __enter__(self):
        import signal

        self.held = []
        self.previous = signal.signal(signal.SIGINT, lambda *_: self.held.append(True))

    def __exit__(self, *exc):
        import signal

        signal.signal(signal.SIGINT, self.previous)
        if self.held and exc[0] is None and self.previous is not signal.SIG_IGN:
            raise KeyboardInterrupt


def _write_input(out, lines):
    """Write and flush the input and the prompt whole: a Ctrl-C meanwhile is
    held until the last byte is out, then raised."""
    with _sigint_held():
        out.writelines(lines)
        out.flush()


def _turn(args, session, provider, options, key_var, opts, keys, taken, out, state):
    """Send the conversation and write the reply (the prompt is already out)."""
    leaf = session.leaf_message()
    if leaf is None or leaf["message"]["role"] != "user":
        raise _error("nothing to send: give a PROMPT or -f FILE")
    _need_key(options, key_var)
    live = None
    with _sigint_held():    # imports (see main)
        if args["--tools"]:
            from pantolib import tools

            options.tools = tools.schemas()
        if not args["--quiet"] and (args["--live"] or sys.stderr.isatty()):
            from pantolib.render import Live

            live = Live(sys.stderr, keys, dim=sys.stderr.isatty() and not os.environ.get("NO_COLOR"))
    try:
        content, stop, usage = _exchange(provider, options, session.messages(), opts, live, keys,
                                         key_var, state)
    finally:
        if live is not None:
            live.end()
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the reply is complete: nothing may cut its line
    _write_reply(out, session, taken, provider, options, keys, content, stop, usage)
    return cli.OK


def _write_reply(out, session, taken, provider, options, keys, content, stop, usage):
    from pantolib import entries, secrets, stream

    reply = entries.make_message("assistant", content, session.leaf, taken)
    msg = reply["message"]
    msg.update(provider=provider, model=options.model, api=options.api, stopReason=stop)
    if usage is not None:
        msg["usage"] = usage
    out.write(secrets.redact_bytes(stream.dumps(reply), keys))


def _aborted(acc, session, taken, provider, options, keys, out):
    """Ctrl-C while the reply streamed: keep what arrived as an assistant
    entry with stopReason "aborted" (tool uses not yet complete are dropped;
    usage as far as reported), then exit 130. A second Ctrl-C cannot cut it."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if acc is not None:
        if hasattr(acc, "partial"):
            content, usage = acc.partial()
        else:
            content, _, usage = acc.result()
            content = [b for b in content if b.get("type") != "toolUse"]
        if content or usage is not None:
            _write_reply(out, session, taken, provider, options, keys, content, "aborted", usage)
            out.flush()
            cli.warn(NAME, "interrupted: the reply so far is kept (stopReason aborted)")
            return EXIT_INTERRUPTED
    from pantolib import stream

    # a new session's file is made with its first reply: only an older one keeps the prompt
    kept = any(stream.is_assistant(line.obj) for line in session.lines)
    cli.warn(NAME, "interrupted before the reply began" + (" (the prompt is kept)" if kept else ""))
    return EXIT_INTERRUPTED


def _need_key(options, key_var):
    from pantolib import providers

    if not options.api_key and options.base_url == providers.api_module(options.api).DEFAULT_BASE_URL:
        raise _error(f"{key_var} is not set (export it, or set a base URL for a server without keys)")


def _exchange(provider, options, messages, opts, live, keys, key_var, state):
    """One request; a 400/422 naming optional fields is retried in the older
    form or without them (the module's negotiate(): every field it names in
    one retry). What a server refused is remembered for a day (providers.
    refusals), so later requests leave it out from the start."""
    with _sigint_held():    # imports (see main): the network thread's first
        if "network" in state:
            state.pop("network").join()
        from pantolib import http, providers, secrets
        from pantolib.errors import ProviderError
        from pantolib.providers import refusals, sse  # noqa: F401  (stream_reply's parser)

        mod = providers.api_module(options.api)
    retry_note = (lambda m: live.note(f"{NAME}: {m}")) if live is not None else None

    said = set()

    def note(message):
        if message in said:  # a note of build_request comes again with each retry
            return
        said.add(message)
        if live is not None:
            live.note(f"{NAME}: {message}")
        else:
            cli.warn(NAME, message)

    known = refusals.recall(options.api, options.base_url, options.model)
    options.dropped |= known
    while True:
        url, headers, body = mod.build_request(messages, options)
        for n in options.notes:
            note(n)
        options.notes.clear()
        req = http.Request(url, headers, body, timeout=opts["timeout"], retries=opts["retries"],
                           provider=provider, key_var=key_var, secrets=keys, on_retry=retry_note)
        with req:
            try:
                req.open()
            except http.StatusError as e:
                if providers.context_full(e):
                    raise ContextFull() from None
                change = mod.negotiate(e, options)
                if change:
                    note(change)
                    continue
                raise
            if options.dropped - known:   # answered without what was refused: remember it
                with _sigint_held():      # a whole file or none, and no temporary one left
                    refusals.remember(options.api, options.base_url, options.model, options.dropped - known)
                known = set(options.dropped)
            acc = state["acc"] = mod.Accumulator(on_text=live and live.text,
                                                 on_thinking=live and live.thinking)
            try:
                if req.whole is not None:
                    reply = providers.whole_reply(req.whole, mod, acc, name=provider)
                    note(providers.IGNORED_STREAM)
                    return reply
                return providers.stream_reply(req.chunks(), acc, live and live.flush, name=provider)
            except ProviderError as e:  # an error event may quote the key back
                if providers.context_full_words(str(e)):
                    raise ContextFull() from None
                raise ProviderError(secrets.redact(str(e), keys, keylike=True)) from None


def _models(opts):
    """panto-send --models: the ids the server's GET /models lists, one per line."""
    from pantolib import http, providers, secrets
    from pantolib.terminal import visible_line

    provider, options, key_var = providers.configure(opts, None, os.environ)
    _need_key(options, key_var)
    keys = [*secrets.env_keys(os.environ), *secrets.url_keys(options.base_url)]
    url, headers = providers.module(provider).list_models(options)
    ids, after = [], None
    for _ in range(100):  # Anthropic pages its list (has_more, last_id)
        page = http.get_json(url + (f"?after_id={after}" if after else ""), headers,
                             timeout=opts["timeout"], provider=provider, key_var=key_var, secrets=keys)
        data = page.get("data") if isinstance(page, dict) else page
        if not isinstance(data, list):
            raise _error(f"{provider}: the model list of the server has no 'data' array")
        ids += [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
        after = page.get("last_id") if isinstance(page, dict) and page.get("has_more") is True else None
        if not isinstance(after, str) or not after:
            break
    out = cli.stdout()
    out.write("".join(visible_line(i) + "\n" for i in ids).encode("utf-8", "replace"))
    return cli.OK


def _check(args):
    """Option values, checked before any input is read (bad ones are usage errors)."""
    from pantolib.errors import UsageError

    if args["--models"] and (args["PROMPT"] is not None or args["--file"] is not None):
        raise UsageError("--models lists the server's models: it takes no PROMPT or -f FILE")
    if args["PROMPT"] is not None and args["--file"] is not None:
        raise UsageError("give either PROMPT or -f FILE, not both")
    if args["PROMPT"] == "":
        raise UsageError("the prompt is empty")
    try:
        timeout = float(args["--timeout"])
        if not 0 < timeout < 1e6:
            raise ValueError
    except ValueError:
        raise UsageError(f"--timeout must be a positive number of seconds, not '{args['--timeout']}'") from None
    try:
        retries = int(args["--retries"])
        if not 0 <= retries <= 10:
            raise ValueError
    except ValueError:
        raise UsageError(f"--retries must be a whole number from 0 to 10, not '{args['--retries']}'") from None
    max_tokens = None
    if args["--max-tokens"] is not None:
        from pantolib.providers import positive_int

        max_tokens = positive_int(args["--max-tokens"], "--max-tokens")
    from pantolib.providers import NAMES

    if args["--provider"] is not None and args["--provider"] not in NAMES:
        raise UsageError(f"unknown provider '{args['--provider']}' (use openai or anthropic)")
    return {"api": args["--api"], "provider": args["--provider"], "model": args["--model"] or None,
            "base_url": args["--base-url"] or None, "reasoning": args["--reasoning"],
            "cache": args["--cache"],
            "max_tokens": max_tokens, "timeout": timeout, "retries": retries}


def _read_input(system_text, context_files=False):
    """The input stream as a Session, its lines to pass on (completed bare
    entries; a header and a system entry first when the session is new), the
    ids taken, and the completed user entries that still need a stamp."""
    from pantolib import entries, stream
    from pantolib.conversation import Session

    session, out_lines, taken, unstamped = Session(), [], set(), []

    def add(obj, kind=stream.ENTRY):
        line = stream.Line(stream.dumps(obj), obj, kind)
        session.add(line)
        out_lines.append(line.raw)

    def add_system(first_bare):
        msg = first_bare.get("message") if first_bare else None
        if isinstance(msg, dict) and msg.get("role") == "system":
            return  # the input brings its own
        cwd = (session.header or {}).get("cwd") or os.getcwd()
        text = system_text if system_text is not None else DEFAULT_SYSTEM.format(cwd=cwd)
        if context_files:   # the project's instructions, as sent (instructions.py)
            from pantolib import instructions

            found = instructions.find(cwd)
            for note in found.notes:
                cli.warn(NAME, note)
            text = instructions.system_prompt(text, found)
        add(entries.make_message("system", [entries.text(text)], session.leaf, taken))

    for line in stream.read(cli.stdin(), "<stdin>"):
        if not session.lines and line.kind != stream.HEADER:
            add(entries.make_header(), stream.HEADER)
        if line.kind == stream.BARE:
            if line.obj.get("type") == "message" and session.leaf is None:
                add_system(line.obj)
            completed = entries.complete(line.obj, session.leaf, taken)
            line = stream.Line(stream.dumps(completed), completed, stream.ENTRY, line.lineno)
            msg = completed.get("message")
            if (completed["type"] == "message" and msg["role"] == "user"
                    and not (completed.get("provider") and completed.get("model"))):
                unstamped.append((len(out_lines), completed))
        elif line.kind == stream.ENTRY:
            taken.add(line.obj["id"])
        else:   # the header: a partial stream's left-out ids are taken too
            taken.update(stream.omitted_ids(line.obj))
        session.add(line)
        out_lines.append(line.raw)
    if not session.lines:
        add(entries.make_header(), stream.HEADER)
    if session.leaf is None:
        add_system(None)
    return session, out_lines, taken, unstamped


def _error(message):
    from pantolib.errors import ProviderError

    return ProviderError(message)
