"""Send the conversation on stdin to a model and add its reply to the stream.

Usage:
  panto-send [options] [PROMPT]
  panto-send -h | --help
  panto-send --version

Writes the input stream, then the new user entry (PROMPT, or the text of
FILE; none when the stream already ends with a user entry), then the
assistant's reply. An empty or headerless input starts a new session.

Options:
  -p, --provider NAME   openai or anthropic (default: the session's, else PANTO_API_STYLE).
  -m, --model MODEL     Model id (default: the session's, else OPENAI_MODEL or ANTHROPIC_MODEL).
  --base-url URL        API base URL (default: OPENAI_BASE_URL or ANTHROPIC_BASE_URL).
  --system TEXT         System prompt of a new session (default: panto's own).
  -f, --file FILE       Read the prompt from FILE.
  --tools               Offer the built-in tools (bash, read, write, edit).
  --max-tokens N        Most tokens the reply may use.
  --reasoning LEVEL     Reasoning effort: off, low, medium or high (Anthropic: or a token budget).
  --quiet               Do not show the reply on stderr.
  --live                Show the reply on stderr even when it is not a terminal.
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


@cli.command(NAME)
def main(argv=None):
    args = cli.parse(__doc__, argv)
    opts = _check(args)
    from pantolib import entries, providers, stream
    from pantolib.conversation import Session

    prompt = args["PROMPT"]
    if args["--file"] is not None:
        with open(args["--file"], encoding="utf-8") as f:
            prompt = f.read()

    session, out_lines = Session(), []
    taken = set()
    for line in stream.read(cli.stdin(), "<stdin>"):
        if not session.lines and line.kind != stream.HEADER:
            _add(session, out_lines, stream, entries.make_header())
        if line.kind == stream.BARE:
            if line.obj.get("type") == "message" and not _has_entries(session, stream):
                _system(session, out_lines, stream, entries, taken, args, line.obj)
            completed = entries.complete(line.obj, session.leaf, taken)
            line = stream.Line(stream.dumps(completed), completed, stream.ENTRY, line.lineno)
        elif line.kind == stream.ENTRY:
            taken.add(line.obj["id"])
        session.add(line)
        out_lines.append(line.raw)
    if not session.lines:
        _add(session, out_lines, stream, entries.make_header())
    if not _has_entries(session, stream):
        _system(session, out_lines, stream, entries, taken, args, None)

    out = cli.stdout()
    try:
        provider, options, key_var = providers.configure(opts, session.active_model(), os.environ)
    except Exception:
        out.writelines(out_lines)
        raise
    secrets = [options.api_key] if options.api_key else []
    user = None
    if prompt is not None:
        content = providers.not_run(session.unanswered_tool_uses()) + [entries.text(prompt)]
        user = entries.make_message("user", content, session.leaf, taken, provider=provider,
                                    model=options.model)
        raw = _redacted(stream.dumps(user), secrets)
        session.add(stream.Line(raw, user, stream.ENTRY))
        out_lines.append(raw)
    out.writelines(out_lines)
    out.flush()  # the prompt is downstream before anything can go wrong on the network
    del out_lines

    leaf = session.leaf_message()
    if leaf is None or leaf["message"]["role"] != "user":
        raise _error("nothing to send: give a PROMPT or -f FILE")
    if not options.api_key and options.base_url == providers.module(provider).DEFAULT_BASE_URL:
        raise _error(f"{key_var} is not set (export it, or set a base URL for a server without keys)")
    if args["--tools"]:
        from pantolib import tools

        options.tools = tools.schemas()

    live = None
    if not args["--quiet"] and (args["--live"] or sys.stderr.isatty()):
        live = Live(sys.stderr, secrets, dim=sys.stderr.isatty() and not os.environ.get("NO_COLOR"))
    try:
        content, stop, usage = _exchange(provider, options, session.messages(), opts, live, secrets, key_var)
    finally:
        if live is not None:
            live.end()
    if live is not None:
        live.tool_uses(content)
        live.end()
    reply = entries.make_message("assistant", content, session.leaf, taken)
    msg = reply["message"]
    msg.update(provider=provider, model=options.model, stopReason=stop)
    if usage is not None:
        msg["usage"] = usage
    out.write(_redacted(stream.dumps(reply), secrets))
    return cli.OK


def _exchange(provider, options, messages, opts, live, secrets, key_var):
    """One request, retried without stream_options when a server refuses them."""
    from pantolib import http, providers
    from pantolib.errors import ProviderError

    mod = providers.module(provider)
    note = (lambda m: live.note(f"{NAME}: {m}")) if live is not None else None
    while True:
        url, headers, body = mod.build_request(messages, options)
        req = http.Request(url, headers, body, timeout=opts["timeout"], retries=opts["retries"],
                           provider=provider, key_var=key_var, secrets=secrets, on_retry=note)
        with req:
            try:
                req.open()
            except http.StatusError as e:
                if provider == "openai" and options.include_usage and mod.rejects_stream_options(e):
                    options.include_usage = False
                    continue
                raise
            acc = mod.Accumulator(on_text=live and live.text, on_thinking=live and live.thinking)
            try:
                return providers.stream_reply(req.chunks(), acc, live and live.flush, name=provider)
            except ProviderError as e:  # an error event may quote the key back
                raise ProviderError(http.redact(str(e), secrets)) from None


def _check(args):
    """Option values, checked before any input is read (bad ones are usage errors)."""
    from pantolib.errors import UsageError

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
    if args["--provider"] is not None and args["--provider"] not in ("openai", "anthropic"):
        raise UsageError(f"unknown provider '{args['--provider']}' (use openai or anthropic)")
    return {"provider": args["--provider"], "model": args["--model"] or None,
            "base_url": args["--base-url"] or None, "reasoning": args["--reasoning"] or None,
            "max_tokens": max_tokens, "timeout": timeout, "retries": retries}


def _has_entries(session, stream):
    return any(line.kind == stream.ENTRY for line in session.lines)


def _add(session, out_lines, stream, obj):
    line = stream.Line(stream.dumps(obj), obj, stream.HEADER if obj.get("type") == "session" else stream.ENTRY)
    session.add(line)
    out_lines.append(line.raw)


def _system(session, out_lines, stream, entries, taken, args, first_bare):
    """A new session's system entry, unless the input brings its own."""
    msg = first_bare.get("message") if first_bare else None
    if isinstance(msg, dict) and msg.get("role") == "system":
        return
    cwd = (session.header or {}).get("cwd") or os.getcwd()
    text = args["--system"] if args["--system"] is not None else DEFAULT_SYSTEM.format(cwd=cwd)
    _add(session, out_lines, stream, entries.make_message("system", [entries.text(text)], session.leaf, taken))


def _redacted(raw, secrets):
    for s in secrets:
        if s and len(s) >= 4 and s.encode() in raw:
            raw = raw.replace(s.encode(), b"[redacted]")
    return raw


def _error(message):
    from pantolib.errors import ProviderError

    return ProviderError(message)


class Live:
    """The reply as it streams, on stderr: text as is, thinking dimmed. A tail
    that could be the start of an API key is held back until it cannot be."""

    DIM, RESET = b"\x1b[2m", b"\x1b[0m"

    def __init__(self, err, secrets, dim):
        self.err, self.dim = err, dim
        self.keys = [k.encode() for k in secrets]
        self.buf, self.pending, self.mode, self.last = [], b"", None, b"\n"

    def _put(self, mode, s):
        if mode != self.mode:
            self._release(everything=True)
            if self.mode == "thinking" and self.dim:
                self.buf.append(self.RESET)
            if self.mode is not None and self.last != b"\n":
                self.buf.append(b"\n")
                self.last = b"\n"
            if mode == "thinking" and self.dim:
                self.buf.append(self.DIM)
            self.mode = mode
        b = s.encode("utf-8", "replace")
        if b:
            self.pending += b
            self.last = b[-1:]

    def _release(self, everything=False):
        data = self.pending
        if not data:
            return
        hold = 0
        for k in self.keys:
            data = data.replace(k, b"[redacted]")
        if not everything:
            for k in self.keys:
                for n in range(min(len(k) - 1, len(data)), hold, -1):
                    if data.endswith(k[:n]):
                        hold = n
                        break
        self.buf.append(data[:len(data) - hold])
        self.pending = data[len(data) - hold:]

    def text(self, s):
        self._put("text", s)

    def thinking(self, s):
        self._put("thinking", s)

    def note(self, message):
        self.end()
        self.buf.append(message.encode("utf-8", "replace") + b"\n")
        self.flush()

    def tool_uses(self, content):
        for b in content:
            if b["type"] == "toolUse":
                args = b["input"] if len(b["input"]) <= 200 else b["input"][:200] + "…"
                self._put("tool", f"→ {b['name']} {args}\n")

    def flush(self):
        self._release()
        if self.buf:
            self.err.flush()
            self.err.buffer.write(b"".join(self.buf))
            self.err.buffer.flush()
            self.buf.clear()

    def end(self):
        self._release(everything=True)
        if self.mode == "thinking" and self.dim:
            self.buf.append(self.RESET)
        if self.last != b"\n":
            self.buf.append(b"\n")
            self.last = b"\n"
        self.mode = None
        self.flush()
