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
  --retries N           Retries after a 408, 409, 429, 500, 502-504, 520, 522, 524
                        or 529 response, 0 for none [default: 3].
  -h, --help            Show this help.
  --version             Show the version.
"""
from pantolib import cli, turn

NAME = turn.NAME
FINISH_WAIT = 2.0         # seconds an exit waits for the network thread's imports


@cli.command(NAME)
def main(argv=None):
    # SIGINT, SIGTERM and SIGHUP stay blocked (the launcher blocked them
    # first) until the input and the prompt are passed on: one that comes
    # meanwhile waits, and then ends the command without a request (HOLD in
    # pantolib/signals.py).
    from pantolib import signals

    signals.hold()
    args = cli.parse(__doc__, argv)
    if args["--compact"] or args["--models"]:
        signals.release(drop=False)
    if args["--compact"]:
        from pantolib import summarize

        return summarize.run(args)
    opts = turn.check(args)
    if args["--models"]:
        return _models(opts)
    # A signal inside an import can crash the interpreter (`import orjson`) or,
    # while the network thread imports too, leave a module lock taken for good
    # (a hang): every import of this command happens with the signals held.
    with signals.held():
        from pantolib import conversation, entries, providers, secrets, stream  # noqa: F401

        net = None if signals.pending() else _Network()  # the network code loads while the input is read
    prompt = args["PROMPT"]
    if args["--file"] is not None:
        with open(args["--file"], encoding="utf-8") as f:
            prompt = f.read()

    session, out_lines, taken, unstamped = turn.read_input(args["--system"], not args["--no-context-files"], known=True)
    out = cli.stdout()
    with signals.held():    # configure imports the wire module
        provider, options, key_var, keys = turn.configure(opts, session, out, out_lines, unstamped)
    if net is not None:
        net.prepare(options.base_url)
    user = None
    if prompt is not None:
        user = turn.add_prompt(session, out_lines, prompt, taken, provider, options, keys)
    t = turn.Turn(session, taken, out, opts, provider, options, key_var, keys)
    if net is not None:
        t.state["network"] = net
    try:
        if not turn.write_input(out, out_lines):  # downstream before anything can go wrong on the network
            raise turn.not_kept()
        del out_lines
        if signals.release():
            cli.warn(NAME, "interrupted before the request (the input"
                           f"{' and the prompt are' if user is not None else ' is'} passed on)")
            return signals.status()
        return t.run(args)
    except KeyboardInterrupt:
        return t.aborted()
    except turn.ContextFull:
        cli.warn(NAME, f"the prompt is too long for the context window of {options.model} "
                       "(compact the session: panto-send --compact)")
        return cli.CONTEXT_FULL


class _Network:
    """pantolib.http (httpx: ~100 ms) imported in a thread while the main
    thread reads the input, and, once the base URL is known to be https, the
    CA certificates read there too (the GIL is released meanwhile). join()
    before the first request. The thread never takes a signal (the main thread
    does, and handles it as always) and never reports: an import that fails
    there fails again in the main thread, which says so in one line."""

    def __init__(self):
        import threading

        from pantolib import signals

        self._url = None
        self._known = threading.Event()
        self._thread = threading.Thread(target=self._run, name="panto-send network", daemon=True)
        with signals.held():    # the mask is inherited by the thread, for good
            self._thread.start()
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


def _models(opts):
    """panto-send --models: the ids the server's GET /models lists, one per line."""
    from pantolib.terminal import visible_line

    ids = turn.model_ids(opts)
    out = cli.stdout()
    out.write("".join(visible_line(i) + "\n" for i in ids).encode("utf-8", "replace"))
    return cli.OK
