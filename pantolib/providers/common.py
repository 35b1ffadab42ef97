"""What the wire modules share: the conversation made sendable (tool uses
each with a result, thinking only to its own model, images placed), the
forms of images, the reading of refusals, and one line of a server's words.
Kept apart from the package's front (pantolib.providers), which loads the
wire modules: they import from here, never from it."""


THINKING = ("thinking", "redactedThinking")
NOT_RUN = "tool call not run: the conversation went on without its result"

# --reasoning LEVEL (SPEC 5.1); Anthropic also takes a number of thinking tokens
LEVELS = ("off", "none", "minimal", "low", "medium", "high", "xhigh", "max")
MIN_BUDGET = 1024           # the smallest thinking budget Anthropic takes


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


def placed_images(blocks):
    """A user message's blocks and where its images go (SPEC 12): an image
    block right after a toolResult block (or after another image that is)
    is part of that tool's result; any other is the person's. Returns (the
    blocks without the results' images, {id(result block): [its image
    blocks]}). Blocks are not changed."""
    out, attached, owner = [], {}, None
    for b in blocks:
        t = b.get("type")
        if t == "image" and owner is not None:
            attached.setdefault(id(owner), []).append(b)
            continue
        owner = b if t == "toolResult" else None
        out.append(b)
    return out, attached


# The image types every wire API panto speaks takes inline (Anthropic's
# base64 source lists exactly these; OpenAI's vision guide the same four).
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


def sendable_image(block):
    """(media type, base64 data) of an image block the APIs take, or (None,
    the reason for a note) for one they do not."""
    from pantolib.entries import image_of

    got = image_of(block)
    if got is None:
        return None, "the block holds no image"
    if got[0] not in IMAGE_TYPES:
        return None, "the APIs take JPEG, PNG, GIF and WebP images"
    return got


def data_url(media, data):
    """An image as OpenAI's APIs take it inline."""
    return f"data:{media};base64,{data}"


def image_note(block, why):
    """The text sent for an image an API cannot take there, so the model knows it was there."""
    from pantolib.entries import image_text

    return f"{image_text(block)[:-1]}; not sent: {why}]"


def not_run(tool_uses):
    """One error result per tool use, saying it was not run."""
    return [{"type": "toolResult", "toolUseId": b["id"], "content": NOT_RUN, "isError": True}
            for b in tool_uses]


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


# Where a refusal goes on to list what the server would take ("unknown field `x`,
# expected one of `model`, `messages`, `stream_options` ..."): those names are not refused.
_ACCEPTED_LIST = r"[,;]?\s*\bexpected (?:one of|any of|fields?)\b.*?(?=$|\n|[.;](?:\s|$))"


def refused_fields(err, names):
    """The optional fields a 400/422 refusal names: {field: the name it used},
    for `names` = {field: (the names servers and proxies use for it, ...)}.
    A name counts as a whole word ("reasoning" in "reasoning.effort", not in
    "reasoning_effort"); a list of what the server would accept, after
    "expected" (serde's "unknown field `x`, expected one of ..."), is not read.
    Empty for any other error."""
    import re

    if getattr(err, "status", None) not in (400, 422):
        return {}
    detail = re.sub(_ACCEPTED_LIST, " ", getattr(err, "detail", "") or "", flags=re.IGNORECASE | re.DOTALL)
    found = {}
    for field, aliases in names.items():
        for name in aliases:
            if re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", detail):
                found[field] = name
                break
    return found


def refusal_note(parts):
    """The one note of one retry: what each refused field became."""
    return "the server refused " + "; ".join(parts) if parts else None


MAX_DETAIL = 300            # characters of a server's message shown


def one_line(text, limit=MAX_DETAIL):
    """A server's words on one line (SPEC 5.1): whitespace runs, newlines
    included, collapsed to one space, cut at `limit` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def valid_arguments(text):
    """Tool-call arguments as they may be sent back: the text itself when it
    is a JSON object, else "{}" (a malformed one is kept in the session but
    never sent: every later request would be refused, SPEC 5.3)."""
    import orjson

    if not text:
        return "{}"
    try:
        v = orjson.loads(text)
    except orjson.JSONDecodeError:
        return "{}"
    return text if isinstance(v, dict) else "{}"


def event_object(data, name):
    """The JSON object of one SSE event's data; ProviderError when it is not one."""
    import orjson

    from pantolib.errors import ProviderError

    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise ProviderError(f"{name}: malformed stream: an event is not JSON "
                            f"({data[:60].decode('utf-8', 'replace')!r})") from None
    if type(obj) is not dict:
        raise ProviderError(f"{name}: malformed stream: an event is not a JSON object")
    return obj
