"""One turn of panto-send (SPEC 5.1): the input read and completed, the
provider configured, the request sent with its negotiation and retries, and
the reply written, or the part of it that arrived before a Ctrl-C.

cmd/send.py parses the command line and calls these; compaction.py sends
its summary request through the same parts, so it is configured exactly
like a turn. The prompt being too long for the model raises ContextFull.
"""
import os
import sys

from pantolib import cli

NAME = "panto-send"   # the name on the notes and errors of a turn
DEFAULT_SYSTEM = (
    "You are panto, a coding agent in the user's terminal. You work in the directory {cwd}. "
    "Answer briefly and precisely. When tools are offered, use them to look before you act: "
    "read files before editing them, run commands to check your work, and make small, "
    "verifiable changes. Say what you changed and what is left to do."
)


class ContextFull(Exception):
    """The server refused the request because the prompt is too long for the model."""


def check(args):
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


def read_input(system_text, context_files=False, known=False):
    """The input stream as a Session, its lines to pass on (completed bare
    entries; a header and a system entry first when the session is new), the
    ids taken, and the completed user entries that still need a stamp.

    known: the part of the stream that is the session file's own valid
    lines (prefix.send_known) is passed on as it came, unparsed; only the
    lines of it the request needs are taken in (index.context: the system
    entries, the last compaction and the path from its first kept entry).
    When that could change the request (an entry after it continues a path
    through lines left out, or the active model's entry names no API), the
    whole stream is read line by line."""
    from pantolib import entries, stream
    from pantolib.conversation import Session

    session, out_lines, taken, unstamped = Session(), [], set(), []
    data, lines = b"", None
    if known:
        from pantolib import prefix

        data, k = prefix.send_known(cli.stdin(), os.environ)
        if k is not None:
            lines = _known_session(k, session, out_lines, taken)
            if lines is None:      # read it all line by line after all
                data = k.whole()
                session, out_lines, taken = Session(), [], set()
    if lines is None:
        lines = (line for batch in stream.read_batches(cli.stdin(), "<stdin>", first=data) for line in batch)

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

    for line in lines:
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


def _known_session(k, session, out_lines, taken):
    """Take a prefix.Known into an empty session: the header, the entries of
    the known part that the request needs (its other ids are taken and
    bridged, as for a partial stream), its bytes as the first line to pass
    on. Returns the Lines after it, or None when the request could differ
    from the one of the whole stream read line by line."""
    import io

    from pantolib import index, prefix, stream

    nodes = k.nodes
    _, keep = index.context(nodes, k.leaf) if k.leaf is not None else ([], [])
    kept = [stream.parse_line(os.pread(k.fd, nodes[i][index.END] - nodes[i][index.START], nodes[i][index.START]),
                              "<stdin>") for i in keep]
    rest = [line for batch in stream.read_batches(io.BytesIO(k.rest), "<stdin>", lineno=k.lines, started=True)
            for line in batch]
    omitted = nodes.keys() - set(keep)
    for line in rest:
        if line.kind == stream.ENTRY and (line.obj["id"] in omitted or line.obj.get("parentId") in omitted):
            return None
        if line.kind == stream.ENTRY and not _names_api(line.obj):
            return None
    session.add(k.header)
    session.omitted = omitted
    for line in kept:
        session.add(line)
    for e in reversed(session.message_entries()):
        if not _names_api(e):
            return None     # the active model's API would be looked for on the whole path
        if e["message"]["role"] == "user" and e.get("provider") and e.get("model"):
            break
    taken.update(nodes)
    session.unread = prefix.FileBytes(k.fd, 0, k.at)
    out_lines.append(session.unread)
    return rest


def _names_api(e):
    """False for a stamped user message entry that names no wire API."""
    m = e.get("message")
    if e.get("type") != "message" or type(m) is not dict or m.get("role") != "user":
        return True
    if not (e.get("provider") and e.get("model")):
        return True
    return isinstance(e.get("api"), str) and bool(e["api"])


def configure(opts, session, out, out_lines, unstamped):
    """Provider, Options, key variable and the secrets to hide, for a stream
    read by read_input; user entries written by hand get this model's stamp.
    When the configuration is wrong the input still goes downstream first."""
    from pantolib import entries, prefix, providers, secrets, stream

    try:
        provider, options, key_var = providers.configure(opts, session.active_model(), os.environ)
    except Exception:
        prefix.write_lines(out, out_lines)
        raise
    options.session_id = (session.header or {}).get("id")
    for i, entry in unstamped:
        out_lines[i] = stream.dumps(entries.stamp(entry, provider, options.model, options.api))
    keys = secrets.ordered([*secrets.env_keys(os.environ), *secrets.url_keys(options.base_url)])
    return provider, options, key_var, keys


def add_prompt(session, out_lines, prompt, taken, provider, options, keys):
    """The user entry of `prompt` (after a "not run" result for each tool use
    left unanswered), added to the session and to the lines to pass on."""
    from pantolib import entries, providers, secrets, stream

    content = providers.not_run(session.unanswered_tool_uses()) + [entries.text(prompt)]
    user = entries.make_message("user", content, session.leaf, taken, provider=provider,
                                model=options.model, api=options.api)
    raw = secrets.redact_bytes(stream.dumps(user), keys)
    session.add(stream.Line(raw, user, stream.ENTRY))
    out_lines.append(raw)
    return user


def write_input(out, lines):
    """Write and flush the input and the prompt whole (a signal meanwhile is
    held until the last byte is out, then raised). False when nothing reads
    them (a closed pipe: the appender is gone): then no request may be sent,
    as nothing would keep its reply."""
    from pantolib import prefix, signals

    with signals.held():
        try:
            prefix.write_lines(out, lines)
            out.flush()
        except BrokenPipeError:
            cli.silence_stdout()
            return False
    return not cli.stdout_gone()


def while_kept(chunks, every=0.25):
    """The reply's chunks while something downstream can keep it: once the
    pipe's reader is gone (checked every `every` seconds), the request is cut
    short, so the rest of a reply nobody keeps is not paid for."""
    import time

    due = 0.0
    for chunk in chunks:
        now = time.monotonic()
        if now >= due:
            if cli.stdout_gone():
                raise error("standard output is closed: nothing downstream keeps the reply "
                            "(the request is cut short)")
            due = now + every
        yield chunk


def not_kept():
    """The error of a request that nothing downstream would keep."""
    return error("standard output is closed: nothing downstream keeps the reply (the request is not sent)")


def need_key(options, key_var):
    from pantolib import providers

    if not options.api_key and options.base_url == providers.api_module(options.api).DEFAULT_BASE_URL:
        raise error(f"{key_var} is not set (export it, or set a base URL for a server without keys)")


def live_display(args, keys):
    """The reply shown as it streams on stderr (render.Live), or None: with
    --quiet, or when stderr is not a terminal and --live is not given."""
    if args["--quiet"] or not (args["--live"] or sys.stderr.isatty()):
        return None
    from pantolib.render import Live

    return Live(sys.stderr, keys, dim=sys.stderr.isatty() and not os.environ.get("NO_COLOR"))


def unoffered_calls(options, content, stop, live=None):
    """(content, stopReason) of a reply, with the tool calls of a request that
    offered none kept as text (providers.calls_as_text), and one note saying so."""
    if options.tools:
        return content, stop
    from pantolib import providers

    content, stop, n = providers.calls_as_text(content, stop)
    if n:
        message = providers.UNOFFERED.format(n=f"{n} tool call" + ("s" if n > 1 else ""))
        if live is not None:
            live.note(f"{NAME}: {message}")
        else:
            cli.warn(NAME, message)
    return content, stop


class Turn:
    """One request and where its reply goes: the session read from the input
    (and the entry ids it has taken), the output stream, the command's
    checked options (`opts`, check()), and what configure() chose: the
    provider's name, its request Options, the name of its key's variable and
    the secrets to keep out of every output. `state` holds the network
    thread to join before the first request ("network") and, once the reply
    streams, its accumulator ("acc", for aborted())."""

    def __init__(self, session, taken, out, opts, provider, options, key_var, keys):
        self.session, self.taken, self.out, self.opts = session, taken, out, opts
        self.provider, self.options, self.key_var, self.keys = provider, options, key_var, keys
        self.state = {}

    def run(self, args):
        """Send the conversation and write the reply (the prompt is already out)."""
        leaf = self.session.leaf_message()
        if leaf is None or leaf["message"]["role"] != "user":
            raise error("nothing to send: give a PROMPT or -f FILE")
        need_key(self.options, self.key_var)
        from pantolib import signals

        with signals.held():    # imports (see cmd/send.py)
            if args["--tools"]:
                from pantolib import tools

                self.options.tools = tools.schemas()
            live = live_display(args, self.keys)
        try:
            content, stop, usage = exchange(self, self.session.messages(), live)
            content, stop = unoffered_calls(self.options, content, stop, live)
        finally:
            if live is not None:
                live.end()
        signals.finish()  # the reply is complete: nothing may cut its line
        self.write_reply(content, stop, usage)
        return cli.OK

    def write_reply(self, content, stop, usage):
        from pantolib import entries, secrets, stream

        reply = entries.make_message("assistant", content, self.session.leaf, self.taken)
        msg = reply["message"]
        msg.update(provider=self.provider, model=self.options.model, api=self.options.api, stopReason=stop)
        if usage is not None:
            msg["usage"] = usage
        self.out.write(secrets.redact_bytes(stream.dumps(reply), self.keys))

    def aborted(self):
        """Ctrl-C (or SIGTERM, SIGHUP) while the reply streamed: keep what arrived
        as an assistant entry with stopReason "aborted" (tool uses not yet
        complete are dropped; usage as far as reported), then exit 128 + the
        signal's number (signals.status()). A second signal cannot cut it."""
        from pantolib import signals

        signals.finish()
        acc = self.state.get("acc")
        if acc is not None:
            content, usage = acc.partial()
            content, _ = unoffered_calls(self.options, content, "aborted")
            if content or usage is not None:
                self.write_reply(content, "aborted", usage)
                self.out.flush()
                cli.warn(NAME, "interrupted: the reply so far is kept (stopReason aborted)")
                return signals.status()
        from pantolib import stream

        # a new session's file is made with its first reply: only an older one keeps the prompt
        session = self.session
        kept = any(stream.is_assistant(line.obj) for line in session.lines) or (
            session.unread is not None and any(stream.is_assistant(stream.loads(raw))
                                               for raw in session.unread.read().split(b"\n")))
        cli.warn(NAME, "interrupted before the reply began" + (" (the prompt is kept)" if kept else ""))
        return signals.status()


def exchange(t, messages, live):
    """One request of Turn t for `messages`; a 400/422 naming optional fields
    is retried in the older form or without them (the module's negotiate():
    every field it names in one retry). What a server refused is remembered
    for a day (providers.refusals), so later requests leave it out from the
    start. The network thread in t.state is joined first; the reply's
    accumulator is kept there as "acc" once it streams (for Turn.aborted)."""
    from pantolib import signals

    provider, options, opts, keys, key_var, state = t.provider, t.options, t.opts, t.keys, t.key_var, t.state

    with signals.held():    # imports (see cmd/send.py): the network thread's first
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
        if cli.stdout_gone():   # the appender died meanwhile: a reply would be paid for and lost
            raise not_kept()
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
                with signals.held():      # a whole file or none, and no temporary one left
                    refusals.remember(options.api, options.base_url, options.model, options.dropped - known)
                known = set(options.dropped)
            acc = state["acc"] = mod.Accumulator(on_text=live and live.text,
                                                 on_thinking=live and live.thinking)
            try:
                if req.whole is not None:
                    reply = providers.whole_reply(req.whole, mod, acc, name=provider)
                    note(providers.IGNORED_STREAM)
                    return reply
                return providers.stream_reply(while_kept(req.chunks()), acc, live and live.flush, name=provider)
            except ProviderError as e:  # an error event may quote the key back
                if providers.context_full_words(str(e)):
                    raise ContextFull() from None
                raise ProviderError(secrets.redact(str(e), keys, keylike=True)) from None


def model_ids(opts):
    """The ids the server's GET /models lists (Anthropic pages its list)."""
    from pantolib import http, providers, secrets

    provider, options, key_var = providers.configure(opts, None, os.environ)
    need_key(options, key_var)
    keys = [*secrets.env_keys(os.environ), *secrets.url_keys(options.base_url)]
    url, headers = providers.module(provider).list_models(options)
    ids, after = [], None
    for _ in range(100):  # Anthropic pages its list (has_more, last_id)
        page = http.get_json(url + (f"?after_id={after}" if after else ""), headers,
                             timeout=opts["timeout"], provider=provider, key_var=key_var, secrets=keys)
        data = page.get("data") if isinstance(page, dict) else page
        if not isinstance(data, list):
            raise error(f"{provider}: the model list of the server has no 'data' array")
        ids += [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
        after = page.get("last_id") if isinstance(page, dict) and page.get("has_more") is True else None
        if not isinstance(after, str) or not after:
            break
    return ids


def error(message):
    from pantolib.errors import ProviderError

    return ProviderError(message)
