"""The wire APIs panto speaks, one module each, with the same small interface:

    NAME                        provider name stamped on entries ("openai", "anthropic")
    API                         the wire API's name ("openai_chat", "openai_responses", ...)
    build_request(messages, options) -> (url, headers, body)
    negotiate(error, options) -> note or None
                                a 400/422 (http.StatusError) naming a field this module
                                sent for an optional feature: change `options` so the
                                next request goes in the older form or without it, and
                                return the note for stderr; None when it is not that
    Accumulator(on_text=None, on_thinking=None)
        .feed(event)            one sse.Event; ProviderError on an error event or bad data
        .done                   True once the stream's end marker has arrived
        .ended()                whether what arrived can finish the turn without it
        .result()               -> (content blocks, stopReason, usage dict or None)

`messages` are in the disk format ({"role", "content"} with panto's blocks,
as `conversation.Session.messages()` returns them); so are the blocks the
accumulator returns. The callbacks get live text and thinking deltas (str).
Assistant messages also carry the "provider" and "model" that wrote them, so
that a module sends thinking back only to its own model (`own_thinking`).
"""
import importlib

# wire API (--api, PANTO_API_STYLE) -> provider name stamped on entries
APIS = {"openai_chat": "openai", "openai_responses": "openai", "anthropic_messages": "anthropic"}
STYLES = APIS
_MODULES = {"openai": "openai_chat", "anthropic": "anthropic_messages"}  # provider -> its default API
NAMES = tuple(_MODULES)
THINKING = ("thinking", "redactedThinking")

NOT_RUN = "tool call not run: the conversation went on without its result"


class Options:
    """What a request needs besides the conversation.

    reasoning: None (send no reasoning field), "none", "minimal", "low",
    "medium", "high", "xhigh", "max", or an int (a thinking budget in tokens).
    cache: "5m", "1h" or "off". session_id: the session's id (OpenAI's
    prompt_cache_key). dropped: names of optional fields a server refused
    (negotiate() adds them; build_request leaves them out).
    """

    def __init__(self, model, base_url, api_key=None, max_tokens=None, reasoning=None,
                 tools=None, api_version=None, include_usage=True, cache="5m", session_id=None,
                 api=None):
        self.model, self.base_url, self.api_key = model, base_url.rstrip("/"), api_key
        self.max_tokens, self.reasoning, self.tools = max_tokens, reasoning, tools
        self.api_version, self.include_usage = api_version, include_usage
        self.cache, self.session_id, self.api = cache, session_id, api
        self.dropped = set()


def module(provider):
    """The module of a provider name ('openai' or 'anthropic'): its default wire API."""
    return importlib.import_module(f"pantolib.providers.{_MODULES[provider]}")


def api_module(api):
    """The module of a wire API name ('openai_chat', 'openai_responses', 'anthropic_messages')."""
    if api not in APIS:
        raise KeyError(api)
    return importlib.import_module(f"pantolib.providers.{api}")


def own_thinking(messages, provider, model):
    """The conversation with every thinking block left out of assistant
    messages that another provider or model wrote (SPEC 3: thinking goes back
    only to the model that produced it). Messages are not changed in place."""
    out = []
    for m in messages:
        if m["role"] == "assistant" and (m.get("provider"), m.get("model")) != (provider, model) \
                and any(b.get("type") in THINKING for b in m["content"]):
            m = dict(m, content=[b for b in m["content"] if b.get("type") not in THINKING])
        out.append(m)
    return out


def not_run(tool_uses):
    """One error result per tool use, saying it was not run."""
    return [{"type": "toolResult", "toolUseId": b["id"], "content": NOT_RUN, "isError": True}
            for b in tool_uses]


def text_of(blocks):
    return "".join(b["text"] for b in blocks if b.get("type") == "text")


def normalize(messages):
    """The conversation as both APIs accept it, without changing the session:
    every tool use gets a result in the user messages that follow it ("not
    run" when the session has none), results with no matching tool use are
    dropped, and messages left empty are skipped. Inputs are not touched."""
    out = []
    pending = {}  # tool use id -> block, of the last assistant message
    i, n = 0, len(messages)
    while i < n:
        if messages[i]["role"] != "user":
            m = messages[i]
            if pending:
                out.append({"role": "user", "content": not_run(pending.values())})
            pending = {b["id"]: b for b in m["content"] if b.get("type") == "toolUse"} \
                if m["role"] == "assistant" else {}
            if m["content"]:
                out.append(dict(m))
            i += 1
            continue
        j = i
        while j < n and messages[j]["role"] == "user":
            j += 1
        have = {b.get("toolUseId") for m in messages[i:j] for b in m["content"] if b.get("type") == "toolResult"}
        missing = not_run([b for k, b in pending.items() if k not in have])
        for k in range(i, j):
            content = [b for b in messages[k]["content"]
                       if b.get("type") != "toolResult" or b.get("toolUseId") in pending]
            if k == i:
                content = missing + content
            if content:
                out.append({"role": "user", "content": content})
        pending = {}
        i = j
    return out


def configure(flags, active, env):
    """Provider, wire API, model and connection settings: command-line flags
    first, then the stream's active model (provider, model) or None, then the
    environment.

    `flags` holds api, provider, model, base_url, reasoning, max_tokens (None
    when not given). Returns (provider name, Options, name of the key
    variable); `Options.api` is the wire API chosen. Raises UsageError for a
    value no provider knows.
    """
    from pantolib.errors import UsageError

    api = flags.get("api")
    if api is not None and api not in APIS:
        raise UsageError(f"unknown API '{api}' (use {', '.join(APIS)})")
    provider = flags.get("provider")
    if api is not None:
        if provider is not None and provider != APIS[api]:
            raise UsageError(f"--api {api} is for provider {APIS[api]}, not {provider}")
        provider = APIS[api]
    if provider is None and active:
        provider = active[0] if active[0] in _MODULES else None
    style = env.get("PANTO_API_STYLE") or None
    if style is not None and style not in APIS:
        raise UsageError(f"PANTO_API_STYLE '{style}' is not one of {', '.join(APIS)}")
    if provider is None:
        provider = APIS[style] if style else "openai"
    if provider not in _MODULES:
        raise UsageError(f"unknown provider '{provider}' (use {' or '.join(NAMES)})")
    prefix = provider.upper() + "_"
    base_mod = module(provider)
    base = flags.get("base_url") or env.get(prefix + "BASE_URL") or base_mod.DEFAULT_BASE_URL
    if api is None:
        api = style if style and APIS[style] == provider else default_api(provider, base)
    mod = api_module(api)
    model = flags.get("model")
    if model is None and active and active[0] == provider:
        model = active[1]
    model = model or env.get(prefix + "MODEL") or mod.DEFAULT_MODEL
    reasoning = flags.get("reasoning")
    max_tokens = flags.get("max_tokens")
    if provider == "openai":
        reasoning = reasoning or env.get("OPENAI_REASONING") or None
        version = None
    else:
        version = env.get("ANTHROPIC_API_VERSION") or None
        if max_tokens is None and env.get("ANTHROPIC_MAX_TOKENS"):
            max_tokens = positive_int(env["ANTHROPIC_MAX_TOKENS"], "ANTHROPIC_MAX_TOKENS")
        if reasoning and reasoning not in ("off", *mod.BUDGETS) and not reasoning.isdigit():
            raise UsageError(f"--reasoning '{reasoning}' is not off, {', '.join(mod.BUDGETS)} "
                             "or a number of tokens")
    opts = Options(model, base, api_key=env.get(mod.KEY_VAR) or None, max_tokens=max_tokens,
                   reasoning=reasoning, api_version=version, api=api)
    return provider, opts, mod.KEY_VAR


def default_api(provider, base_url):
    """The wire API of a provider when none is chosen: OpenAI's own servers get
    the Responses API, every other OpenAI-compatible server chat completions."""
    if provider == "anthropic":
        return "anthropic_messages"
    from urllib.parse import urlsplit

    try:
        host = (urlsplit(base_url).hostname or "").lower()
    except ValueError:
        host = ""
    if host == "api.openai.com" and "openai_responses" in _available():
        return "openai_responses"
    return "openai_chat"


def _available():
    """The wire API modules present in this install."""
    import importlib.util

    return [a for a in APIS if importlib.util.find_spec(f"pantolib.providers.{a}") is not None]


def positive_int(text, what):
    from pantolib.errors import UsageError

    try:
        n = int(text)
    except (TypeError, ValueError):
        n = 0
    if n <= 0:
        raise UsageError(f"{what} must be a positive whole number, not '{text}'")
    return n


def stream_reply(chunks, acc, after_chunk=None, name="provider"):
    """Feed the SSE events of byte chunks to an accumulator until its end
    marker; returns acc.result(). `after_chunk` runs after each network read
    (the live display flushes there)."""
    from pantolib.errors import ProviderError
    from pantolib.providers.sse import Parser

    parser = Parser()
    for chunk in chunks:
        for ev in parser.feed(chunk):
            acc.feed(ev)
            if acc.done:
                break
        if after_chunk is not None:
            after_chunk()
        if acc.done:
            break
    if not acc.done and not acc.ended():
        what = "any event" if not acc.events else "the end of the reply"
        raise ProviderError(f"{name}: the stream ended before {what} (the server closed the connection)")
    return acc.result()
