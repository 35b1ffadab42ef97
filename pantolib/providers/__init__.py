"""The wire APIs panto speaks, one module each, with the same small interface:

    NAME                        provider name stamped on entries ("openai", "anthropic")
    API                         the wire API's name ("openai_chat", "openai_responses", ...)
    build_request(messages, options) -> (url, headers, body)
    negotiate(error, options) -> note or None
                                a 400/422 (http.StatusError) naming fields this module
                                sent for optional features: change `options` so the
                                next request goes in the older form or without every
                                one of them, and return one note for stderr; None
                                when it is not that
    whole_events(obj) -> [sse.Event] or None
                                the events of a complete, non-streamed reply of this
                                API (a server that ignored stream: true); None when
                                obj is not one
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

What the wire modules share lives in pantolib.providers.common: they import
from there, never from here (this front loads them).
"""
from pantolib.providers.common import LEVELS, MIN_BUDGET, one_line
from pantolib.providers.common import MAX_DETAIL, normalize, not_run  # noqa: F401  (callers take them from here)

# wire API (--api, PANTO_API_STYLE) -> provider name stamped on entries
APIS = {"openai_chat": "openai", "openai_responses": "openai", "anthropic_messages": "anthropic"}
STYLES = APIS
_MODULES = {"openai": "openai_chat", "anthropic": "anthropic_messages"}  # provider -> its default API
NAMES = tuple(_MODULES)


CACHE_MODES = ("5m", "1h", "off")


class Options:
    """What a request needs besides the conversation.

    reasoning: None (send no reasoning field), "none", "minimal", "low",
    "medium", "high", "xhigh", "max", or an int (a thinking budget in tokens).
    cache: "5m", "1h" or "off". session_id: the session's id (OpenAI's
    prompt_cache_key). dropped: names of optional fields a server refused
    (negotiate() adds them; build_request leaves them out). notes: lines for
    stderr that build_request leaves (e.g. thinking left out of one request).
    """

    def __init__(self, model, base_url, api_key=None, max_tokens=None, reasoning=None,
                 tools=None, api_version=None, include_usage=True, cache="5m", session_id=None,
                 api=None):
        self.model, self.base_url, self.api_key = model, base_url.rstrip("/"), api_key
        self.max_tokens, self.reasoning, self.tools = max_tokens, reasoning, tools
        self.api_version, self.include_usage = api_version, include_usage
        self.cache, self.session_id, self.api = cache, session_id, api
        self.dropped = set()
        self.notes = []


def module(provider):
    """The module of a provider name ('openai' or 'anthropic'): its default wire API."""
    return api_module(_MODULES[provider])


def api_module(api):
    """The module of a wire API name ('openai_chat', 'openai_responses', 'anthropic_messages')."""
    if api == "openai_chat":
        from pantolib.providers import openai_chat as wire
    elif api == "openai_responses":
        from pantolib.providers import openai_responses as wire
    elif api == "anthropic_messages":
        from pantolib.providers import anthropic_messages as wire
    else:
        raise KeyError(api)
    return wire


UNOFFERED = "the reply holds {n} although no tools were offered: kept as text, not run"


def calls_as_text(content, stop):
    """A reply to a request that offered no tools (SPEC 5.1: some servers invent
    tool calls then, vLLM's /v1/messages among them): (content, stopReason,
    number of calls) with each tool use turned into the text it was, a text
    block `{"name":NAME,"arguments":ARGUMENTS}` (the arguments as they came,
    a JSON string when they are not JSON), and "toolUse" into "stop", so that
    nothing runs, asks or answers it. Other blocks are kept as they are."""
    import orjson

    out, n = [], 0
    for b in content:
        if b.get("type") != "toolUse":
            out.append(b)
            continue
        n += 1
        args = b.get("input") or "{}"
        try:
            orjson.loads(args)
        except orjson.JSONDecodeError:
            args = orjson.dumps(args).decode()
        out.append({"type": "text", "text": '{"name":' + orjson.dumps(b.get("name") or "").decode()
                    + ',"arguments":' + args + "}"})
    return out, ("stop" if n and stop == "toolUse" else stop), n


def text_of(blocks):
    return "".join(b["text"] for b in blocks if b.get("type") == "text")


def configure(flags, active, env):
    """Provider, wire API, model and connection settings: command-line flags
    first, then the stream's active model (provider, model, api) or None, then
    the environment. The wire API: --api, else PANTO_API_STYLE when it is one
    of the provider's, else the active model's api when it is one of the
    provider's, else the provider's default for the base URL.

    `flags` holds api, provider, model, base_url, reasoning, cache, max_tokens
    (None when not given). Reasoning comes from the flag, then
    OPENAI_REASONING (OpenAI), then PANTO_REASONING; the cache mode from the
    flag, then PANTO_CACHE, else "5m". Returns (provider name, Options, name of the key
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
        # the session keeps its wire API (SPEC 5.1), unless PANTO_API_STYLE names another of this provider
        kept = active[2] if active and len(active) > 2 else None
        if style and APIS[style] == provider:
            api = style
        elif kept in APIS and APIS[kept] == provider:
            api = kept
        else:
            api = default_api(provider, base)
    mod = api_module(api)
    model = flags.get("model")
    if model is None and active and active[0] == provider:
        model = active[1]
    model = model or env.get(prefix + "MODEL") or mod.DEFAULT_MODEL
    max_tokens = flags.get("max_tokens")
    version = None
    if provider == "anthropic":
        version = env.get("ANTHROPIC_API_VERSION") or None
        if max_tokens is None and env.get("ANTHROPIC_MAX_TOKENS"):
            max_tokens = positive_int(env["ANTHROPIC_MAX_TOKENS"], "ANTHROPIC_MAX_TOKENS")
    setting = _setting(flags.get("reasoning"), "--reasoning", env,
                       ("OPENAI_REASONING",) if provider == "openai" else (), "PANTO_REASONING")
    reasoning = reasoning_level(setting[0], provider, setting[1]) if setting is not None else None
    if isinstance(reasoning, int) and max_tokens is not None and reasoning >= max_tokens:
        # the budget is part of the reply's tokens: panto never raises a limit the user set (SPEC 5.1)
        limit = "--max-tokens" if flags.get("max_tokens") is not None else "ANTHROPIC_MAX_TOKENS"
        raise UsageError(f"{setting[1]} {reasoning}: a thinking budget must be below {limit} {max_tokens} "
                         f"(the thinking is part of the reply; raise {limit} or lower the budget)")
    cache = _setting(flags.get("cache"), "--cache", env, (), "PANTO_CACHE")
    if cache is not None and cache[0] not in CACHE_MODES:
        raise UsageError(f"{cache[1]} '{cache[0]}' is not one of {', '.join(CACHE_MODES)}")
    opts = Options(model, base, api_key=env.get(mod.KEY_VAR) or None, max_tokens=max_tokens,
                   reasoning=reasoning, api_version=version, api=api,
                   cache=cache[0] if cache else "5m")
    return provider, opts, mod.KEY_VAR


def _setting(flag, flag_name, env, own_vars, common_var):
    """(value, where it came from) of the first that is set: the flag, the
    provider's own variables, the common one; None when none is."""
    if flag is not None and flag != "":
        return flag, flag_name
    for var in (*own_vars, common_var):
        if env.get(var):
            return env[var], var
    return None


def reasoning_level(text, provider, where="--reasoning"):
    """A --reasoning value as Options takes it: None for off, a level, or an
    int budget (Anthropic only). UsageError for anything else (SPEC 5.1)."""
    from pantolib.errors import UsageError

    value = text.strip().lower()
    if value == "off":
        return None
    if value in LEVELS:
        return value
    if value.isdigit() and value.isascii():
        if provider != "anthropic":
            raise UsageError(f"{where} '{text}': a number of thinking tokens is for Anthropic only "
                             f"(use one of {', '.join(LEVELS)})")
        n = int(value)
        if n < MIN_BUDGET:
            raise UsageError(f"{where} '{text}': a thinking budget is at least {MIN_BUDGET} tokens")
        return n
    extra = " or a number of thinking tokens" if provider == "anthropic" else ""
    raise UsageError(f"{where} '{text}' is not one of {', '.join(LEVELS)}{extra}")


# What servers and proxies say when the prompt does not fit the model's context window
# (Anthropic, OpenAI, llama.cpp, vLLM, LiteLLM, OpenRouter ...), lowercase. vLLM 0.32
# words a prompt that fills the window exactly, leaving no token for the reply, apart:
# "max_tokens must be at least 1, got 0." (chat, messages: the room left, computed by
# the server; panto never sends 0) and "The engine prompt length 8192 exceeds the
# max_model_len 8192." (responses).
_CONTEXT_FULL = ("prompt is too long", "maximum context length", "context length exceeded",
                 "context_length_exceeded", "contextwindowexceedederror", "context window exceeded",
                 "context_window_exceeded", "exceeds the context", "exceed context window",
                 "exceeds the available context", "exceed_context_size", "context window of",
                 "too many tokens in the prompt", "input is too long", "exceeds the max_model_len",
                 "max_tokens must be at least 1, got 0")


def context_full_words(text):
    """True when a server's message says the prompt does not fit the context window."""
    text = (text or "").lower()
    return any(p in text for p in _CONTEXT_FULL)


def context_full(err):
    """True for an HTTP 400/413/422 whose message says the prompt is too long for the context window."""
    if getattr(err, "status", None) not in (400, 413, 422):
        return False
    return context_full_words(getattr(err, "detail", "") or "")


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
    if host == "api.openai.com":
        return "openai_responses"
    return "openai_chat"


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


IGNORED_STREAM = "the server ignored stream: true and sent the whole reply at once: taken as the reply"


def whole_reply(body, mod, acc, name="provider"):
    """(content, stopReason, usage) of a complete reply that a server sent as
    one JSON document to a streaming request (SPEC 5.1): the module's
    whole_events() of it, fed to the accumulator. A body that is an event
    stream after all is read as one; an error object fails the turn with its
    message; any other JSON is named for what it is (ProviderError)."""
    import orjson

    from pantolib.errors import ProviderError

    if body.lstrip()[:5] in (b"data:", b"event", b":"):
        return stream_reply([body, b"\n\n"], acc, name=name)
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        obj = None
    err = obj.get("error") if isinstance(obj, dict) else None
    if err:
        msg = err.get("message") if isinstance(err, dict) else err
        raise ProviderError(f"{name}: the server ignored stream: true and answered with an error: "
                            f"{one_line(msg or err)}")
    events = mod.whole_events(obj) if isinstance(obj, dict) else None
    if not events:
        raise ProviderError(f"{name}: the server ignored stream: true (it answered with plain JSON that is "
                            "not a reply of this API; check the base URL and --api)")
    for ev in events:
        acc.feed(ev)
    return acc.result()


