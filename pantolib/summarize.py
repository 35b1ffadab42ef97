"""`panto-send --compact`: the summary request of a compaction, configured and
sent as a turn is (turn.py), with compaction.py's rules for what is cut,
asked and written."""
from pantolib.compaction import DEFAULT_KEEP, keep_count, make_entry, request_messages, too_short


def run(args):
    """`panto-send --compact [--keep N] [INSTRUCTIONS]`: the input stream, then
    a compaction entry, or the input alone with a note when there is nothing
    to compact. The option checks, input reading and request of a turn
    (turn.py) serve here, so the summary request is configured exactly like a
    turn (without tools)."""
    from pantolib import cli, secrets, stream, turn
    from pantolib.errors import UsageError

    keep = DEFAULT_KEEP if args["--keep"] is None else keep_count(args["--keep"])
    instructions = args["INSTRUCTIONS"]
    if instructions is not None and args["--file"] is not None:
        raise UsageError("give either INSTRUCTIONS or -f FILE, not both")
    opts = turn.check(args)
    if args["--file"] is not None:
        with open(args["--file"], encoding="utf-8") as f:
            instructions = f.read()
    instructions = instructions.strip() if instructions else None

    if not cli.stdin().peek(1):   # no session at all: nothing to pass on either
        cli.warn(turn.NAME, "nothing to compact: the input is empty")
        return cli.OK
    session, out_lines, taken, unstamped = turn.read_input(args["--system"])
    out = cli.stdout()
    provider, options, key_var, keys = turn.configure(opts, session, out, out_lines, unstamped)
    try:
        if not turn.write_input(out, out_lines):
            raise turn.not_kept()
        del out_lines
        entry = _summarize(args, turn.Turn(session, taken, out, opts, provider, options, key_var, keys), keep,
                           instructions)
    except KeyboardInterrupt:
        from pantolib import signals

        cli.warn(turn.NAME, "interrupted: no summary written (the stream is passed through)")
        return signals.status()
    except turn.ContextFull:
        from pantolib.errors import ProviderError

        raise ProviderError(f"no summary written: what is to be summarized is too long for the context "
                            f"window of {options.model} (keep more prompts: --keep)") from None
    if entry is not None:
        out.write(secrets.redact_bytes(stream.dumps(entry), keys))
    return cli.OK


def _summarize(args, t, keep, instructions):
    """Ask for the summary of Turn t's session and return the compaction
    entry, or None (with a note) when there is nothing to compact."""
    from pantolib import cli, providers, signals, turn
    from pantolib.errors import ProviderError

    session, options = t.session, t.options

    asked = request_messages(session, keep, instructions)
    if asked is None:
        cli.warn(turn.NAME, f"nothing to compact: {too_short(session, keep)}; "
                            "the stream is passed through unchanged")
        return None
    messages, first_kept = asked
    turn.need_key(options, t.key_var)
    live = turn.live_display(args, t.keys)
    try:
        content, stop, usage = turn.exchange(t, messages, live)
    finally:
        if live is not None:
            live.end()
    signals.finish()  # the summary is complete: nothing may cut its line
    summary = providers.text_of(content).strip()
    if stop in ("error", "contextFull") or not summary:
        why = {"error": "the model refused", "contextFull": "what is to be summarized fills the context "
               f"window of {options.model} (keep more prompts: --keep)"}.get(stop, "the reply held no text")
        raise ProviderError(f"no summary written: {why}")
    if stop == "length":
        cli.warn(turn.NAME, "the summary was cut off at the token limit (raise --max-tokens); "
                            "it is written as it came")
    return make_entry(summary, first_kept, session.leaf, t.taken, t.provider, options.model, usage)
