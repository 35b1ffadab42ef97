"""OpenAI's Responses API (`POST {base}/responses`): request and stream.

Request: the system text as `instructions`, the conversation as `input`
items, each naming its `type` (servers such as llama.cpp refuse an item
without one, a message too: "Cannot determine type of 'item'"): messages,
`function_call`, `function_call_output`, and `reasoning`
items sent back with their `encrypted_content`, to the model that wrote them
only), `store: false` (the session file is the state: OpenAI keeps none),
`include: ["reasoning.encrypted_content"]` so that reasoning can go back,
function tools with `strict: false`, `max_output_tokens`,
`reasoning: {effort, summary: "auto"}` and `prompt_cache_key`.

Stream: typed events (`sequence_number` on each). Output items are kept by
`output_index` (or, for servers that send none, llama.cpp's, by item id, in
the order they come) between `response.output_item.added` and `.done` (the item
in `.done` is the complete one: a reasoning item's `encrypted_content` is
taken from there); text, refusal, reasoning summary and function call
argument deltas are added to their item; `response.completed` and
`response.incomplete` end the reply and carry the usage;
`response.failed` and `error` fail the turn; other events are ignored.
"""
import re

from pantolib.entries import usage_dict
from pantolib.errors import ProviderError, UsageError
from pantolib.providers.common import (LEVELS, data_url, event_object, image_note, normalize, one_line, own_thinking,
                                       placed_images, refusal_note, refused_fields, sendable_image, valid_arguments)
from pantolib.providers.openai_chat import DEFAULT_BASE_URL, DEFAULT_MODEL, KEY_VAR  # noqa: F401
from pantolib.providers.openai_chat import stream_headers

NAME = "openai"
API = "openai_responses"
CONTEXT_FULL = "context_length_exceeded"  # the error code of a failed response whose prompt did not fit
INCOMPLETE = {"max_output_tokens": "length", "content_filter": "error", CONTEXT_FULL: "contextFull"}
SUMMARY_JOIN = "\n\n"  # between the summary parts of one reasoning item, in its thinking block

# Optional fields a server may refuse (400/422 naming them), in the order they are
# looked for in its message. Encrypted content (include's value, or what a model
# without reasoning says it cannot give) is asked for by `include`.
_NAMES = {"include": ("include",), "prompt_cache_key": ("prompt_cache_key",),
          # LiteLLM's Responses route to a model that takes no reasoning names it by the
          # chat field it maps to: "does not support parameters: ['reasoning_effort']"
          "reasoning": ("reasoning.effort", "reasoning.summary", "reasoning_effort", "reasoning")}
_FIELDS = tuple(_NAMES)
_ENCRYPTED = re.compile(r"encrypted[ ._]content", re.IGNORECASE)


def _assistant_items(blocks):
    items = []
    for b in blocks:
        t = b.get("type")
        if t == "text" and b["text"]:
            items.append({"type": "message", "role": "assistant", "content": b["text"]})
        elif t == "thinking" and b.get("itemId") and b.get("signature"):
            summary = [{"type": "summary_text", "text": b["thinking"]}] if b.get("thinking") else []
            items.append({"type": "reasoning", "id": b["itemId"], "encrypted_content": b["signature"],
                          "summary": summary})
        elif t == "toolUse":
            items.append({"type": "function_call", "call_id": b["id"], "name": b["name"],
                          "arguments": valid_arguments(b["input"])})
    while items and items[-1].get("type") == "reasoning":
        items.pop()  # nothing followed it (a reply cut short): the API refuses it alone
    return items


def _image(b):
    """An image block as an input_image part (or a text note for one the API cannot take)."""
    media, data = sendable_image(b)
    if media is None:
        return {"type": "input_text", "text": image_note(b, data)}
    return {"type": "input_image", "image_url": data_url(media, data), "detail": "auto"}


def _user_items(blocks):
    blocks, attached = placed_images(blocks)
    results = []
    for b in blocks:
        if b.get("type") == "toolResult":
            output = b["content"]
            if id(b) in attached:   # the images a tool returned go in its output
                output = ([{"type": "input_text", "text": output}] if output else []) + [
                    _image(i) for i in attached[id(b)]]
            results.append({"type": "function_call_output", "call_id": b["toolUseId"], "output": output})
    parts = [{"type": "input_text", "text": b["text"]} if b.get("type") == "text" else _image(b)
             for b in blocks if (b.get("type") == "text" and b["text"]) or b.get("type") == "image"]
    return results + ([{"type": "message", "role": "user", "content": parts}] if parts else [])


def wire_input(messages, model):
    """Disk-format messages -> (instructions or None, the `input` items). Thinking
    goes back only to the model that wrote it, and only when it has both the
    reasoning item's id and its encrypted content."""
    system, items = [], []
    for m in normalize(own_thinking(messages, NAME, model)):
        if m["role"] == "system":
            system += [b["text"] for b in m["content"] if b.get("type") == "text"]
        elif m["role"] == "assistant":
            items += _assistant_items(m["content"])
        else:
            items += _user_items(m["content"])
    return ("\n\n".join(system) if system else None), items


def reasoning_field(level):
    """--reasoning LEVEL -> the `reasoning` object, or None for no field."""
    if level is None or level == "off":
        return None
    if level not in LEVELS:  # configure() has checked the user's value: this is a caller's slip
        raise UsageError(f"--reasoning '{level}' is not one of {', '.join(LEVELS)} "
                         "(a number of tokens is for Anthropic only)")
    if level == "none":
        return {"effort": "none"}
    return {"effort": level, "summary": "auto"}


def build_request(messages, opts):
    instructions, items = wire_input(messages, opts.model)
    body = {"model": opts.model}
    if instructions:
        body["instructions"] = instructions
    body["input"] = items
    body["stream"] = True
    body["store"] = False
    sent = _sent(opts)
    if "include" in sent:
        body["include"] = ["reasoning.encrypted_content"]
    if opts.tools:
        body["tools"] = [{"type": "function", "name": t["name"], "description": t.get("description", ""),
                          "parameters": t["parameters"], "strict": False} for t in opts.tools]
    if opts.max_tokens:
        body["max_output_tokens"] = opts.max_tokens
    if "reasoning" in sent:
        body["reasoning"] = reasoning_field(opts.reasoning)
    if "prompt_cache_key" in sent:
        body["prompt_cache_key"] = opts.session_id
    return opts.base_url + "/responses", stream_headers(opts), body


def _sent(opts):
    """The optional fields a request with these options carries."""
    sent = set()
    if "include" not in opts.dropped:
        sent.add("include")
    if opts.session_id and opts.cache != "off" and "prompt_cache_key" not in opts.dropped:
        sent.add("prompt_cache_key")
    if reasoning_field(opts.reasoning) is not None and "reasoning" not in opts.dropped:
        sent.add("reasoning")
    return sent


def negotiate(err, opts):
    """A 400/422 naming `include`, `prompt_cache_key` or `reasoning`, fields
    sent for optional features: leave every one it names out of the retry
    (once each). Encrypted content is what `include` asks for, whatever
    else the refusal says of reasoning."""
    named = refused_fields(err, _NAMES)
    if named.get("reasoning") is not None or not named:
        if getattr(err, "status", None) in (400, 422) and _ENCRYPTED.search(getattr(err, "detail", "") or ""):
            named.pop("reasoning", None)
            named.setdefault("include", "include")
    sent, parts = _sent(opts), []
    for field, name in named.items():
        if field in sent:
            opts.dropped.add(field)
            parts.append(f"'{name}': sent without it")
    return refusal_note(parts)


def whole_events(obj):
    """The stream of a complete response object (a server that ignored stream:
    true): its ending event, which carries every output item; None for
    anything else."""
    import orjson

    from pantolib.providers.sse import Event

    if obj.get("object") != "response" or not isinstance(obj.get("output"), list):
        return None
    kind = {"incomplete": "response.incomplete", "failed": "response.failed"}.get(obj.get("status"),
                                                                                  "response.completed")
    return [Event(kind, orjson.dumps({"type": kind, "response": obj}))]


def _count(obj, key):
    v = obj.get(key) if isinstance(obj, dict) else None
    return v if type(v) is int and v > 0 else 0


def map_usage(u):
    """Responses usage -> panto usage: input tokens split into fresh input,
    cache reads and cache writes; output includes reasoning."""
    details = u.get("input_tokens_details")
    cached, written = _count(details, "cached_tokens"), _count(details, "cache_write_tokens")
    return usage_dict(input=max(0, _count(u, "input_tokens") - cached - written),
                      output=_count(u, "output_tokens"), cache_read=cached, cache_write=written,
                      reasoning=_count(u.get("output_tokens_details"), "reasoning_tokens"))


def _nil(*_):
    pass


def _str(v):
    """A string field of the wire, or "" for anything else (hostile input stays harmless)."""
    return v if isinstance(v, str) else ""


def _reasoning_texts(content):
    """The raw reasoning of a done item's `content` (llama.cpp puts its thinking there,
    as `reasoning_text` parts, with an empty summary)."""
    for p in content if isinstance(content, list) else ():
        if isinstance(p, dict) and p.get("type") == "reasoning_text" and isinstance(p.get("text"), str):
            yield p["text"]


class _Item:
    """One output item while it streams: its parts as they arrive, and the
    complete item once `response.output_item.done` brings it."""
    __slots__ = ("type", "id", "parts", "summary", "reasoning", "args", "call_id", "name", "done")

    def __init__(self, item):
        self.type, self.id = _str(item.get("type")), _str(item.get("id"))
        self.parts = {}       # content index -> [kind ("output_text"|"refusal"), [pieces]]
        self.summary = {}     # summary index -> [pieces]
        self.reasoning = []   # raw reasoning text pieces (servers that stream it)
        self.args = []
        self.call_id, self.name = _str(item.get("call_id")), _str(item.get("name"))
        if isinstance(item.get("arguments"), str):
            self.args.append(item["arguments"])
        self.done = None

    def blocks(self):
        """The panto blocks of this item (none for item types panto has no use for)."""
        done = self.done or {}
        if self.type == "message":
            text = "".join(self._texts(done.get("content")))  # the parts of one message are one text
            return [{"type": "text", "text": text}] if text else []
        if self.type == "reasoning":
            summary = done.get("summary")
            if isinstance(summary, list) and summary:
                texts = [p.get("text") for p in summary if isinstance(p, dict)]
                thinking = SUMMARY_JOIN.join(t for t in texts if isinstance(t, str))
            else:
                thinking = SUMMARY_JOIN.join("".join(self.summary[i]) for i in sorted(self.summary)) \
                    or "".join(self.reasoning) or "".join(_reasoning_texts(done.get("content")))
            blk = {"type": "thinking", "thinking": thinking}
            sig = done.get("encrypted_content")
            if isinstance(sig, str) and sig:
                blk["signature"] = sig
            item_id = _str(done.get("id")) or self.id
            if item_id:
                blk["itemId"] = item_id
            return [blk] if thinking or "signature" in blk else []
        if self.type == "function_call":
            args = done.get("arguments")
            if not isinstance(args, str):
                args = "".join(self.args)
            return [{"type": "toolUse", "id": _str(done.get("call_id")) or self.call_id,
                     "name": _str(done.get("name")) or self.name, "input": args or "{}"}]
        return []

    def _texts(self, content):
        if isinstance(content, list) and content:
            out = []
            for p in content:
                if isinstance(p, dict):
                    s = p.get("text") if p.get("type") == "output_text" else p.get("refusal")
                    out.append(s if isinstance(s, str) else "")
            return out
        return ["".join(self.parts[i][1]) for i in sorted(self.parts)]


class Accumulator:
    def __init__(self, on_text=None, on_thinking=None):
        self.on_text, self.on_thinking = on_text or _nil, on_thinking or _nil
        self.items = {}        # output index -> _Item
        self.by_id = {}        # item id -> output index
        self.response = None   # the final response object (completed or incomplete)
        self.incomplete = None
        self.done = False
        self.events = 0

    def feed(self, ev):
        self.events += 1
        obj = event_object(ev.data, NAME)
        handler = _HANDLERS.get(_str(obj.get("type")) or ev.event)
        if handler is None and "type" not in obj and obj.get("error"):   # data: {"error": ...}
            handler = Accumulator._error
        if handler is not None:
            handler(self, obj)
        # response.created, in_progress, *.done of parts and every event type added later need nothing

    def _index(self, obj, item_id):
        """The output index an event is about: its `output_index`, else the index
        of the item with its id, else the next one (llama.cpp's events carry no
        `output_index`: its items are known by id and come in output order)."""
        i = obj.get("output_index")
        if type(i) is int:
            return i
        if item_id in self.by_id:
            return self.by_id[item_id]
        return max(self.items, default=-1) + 1

    def _item(self, obj):
        """The item an event is about: by output_index, else by item_id, else
        (neither given) the last item of the delta's kind; a delta before its
        item starts one."""
        i = obj.get("output_index")
        item = self.items.get(i) if type(i) is int else None
        item_id = _str(obj.get("item_id"))
        if item is None and item_id in self.by_id:
            item = self.items[self.by_id[item_id]]
        kind = _DELTA_TYPES.get(_str(obj.get("type")))
        if item is None and type(i) is not int and not item_id:
            item = next((self.items[k] for k in sorted(self.items, reverse=True)
                         if self.items[k].type == kind), None)
        if item is None:
            i = self._index(obj, item_id)
            item = self.items[i] = _Item({"type": kind, "id": item_id})
            if item_id:
                self.by_id[item_id] = i
        return item

    def _added(self, obj):
        item = obj.get("item")
        if not isinstance(item, dict):
            return
        i = self._index(obj, _str(item.get("id")))
        self.items[i] = _Item(item)
        if self.items[i].id:
            self.by_id[self.items[i].id] = i

    def _item_done(self, obj):
        item = obj.get("item")
        if not isinstance(item, dict):
            return
        i = self._index(obj, _str(item.get("id")))
        if i not in self.items:
            self._added(dict(obj, output_index=i))
        it = self.items[i]
        it.done = item
        if not it.type:
            it.type = _str(item.get("type"))
        if it.type == "message" and not it.parts:  # nothing of it streamed: show it now
            for s in it._texts(item.get("content")):
                if s:
                    self.on_text(s)

    def _part(self, obj):
        item, part = self._item(obj), obj.get("part")
        k = obj.get("content_index")
        if item is not None and isinstance(part, dict) and type(k) is int and k not in item.parts:
            item.parts[k] = [part.get("type"), []]

    def _text(self, obj, kind):
        item, d = self._item(obj), obj.get("delta")
        if item is None or not isinstance(d, str) or not d:
            return
        k = obj.get("content_index")
        k = k if type(k) is int else 0
        item.parts.setdefault(k, [kind, []])[1].append(d)
        self.on_text(d)

    def _summary(self, obj):
        item, d = self._item(obj), obj.get("delta")
        if item is None or not isinstance(d, str) or not d:
            return
        k = obj.get("summary_index")
        k = k if type(k) is int else 0
        if k not in item.summary:
            if item.summary:
                self.on_thinking(SUMMARY_JOIN)
            item.summary[k] = []
        item.summary[k].append(d)
        self.on_thinking(d)

    def _reasoning_text(self, obj):
        item, d = self._item(obj), obj.get("delta")
        if item is not None and isinstance(d, str) and d and not item.summary:
            item.reasoning.append(d)
            self.on_thinking(d)

    def _args(self, obj):
        item, d = self._item(obj), obj.get("delta")
        if item is not None and isinstance(d, str):
            item.args.append(d)

    def _args_done(self, obj):
        item, a = self._item(obj), obj.get("arguments")
        if item is not None and isinstance(a, str):
            item.args = [a]

    def _finished(self, obj):
        resp = obj.get("response")
        self.response = resp if isinstance(resp, dict) else {}
        if obj.get("type") == "response.incomplete" or self.response.get("status") == "incomplete":
            details = self.response.get("incomplete_details")
            self.incomplete = _str(details.get("reason") if isinstance(details, dict) else None) or "unknown"
        output = self.response.get("output")
        for i, item in enumerate(output if isinstance(output, list) else ()):
            # items a server did not stream (or did not finish) are taken from the final output
            if isinstance(item, dict):
                i = self.by_id.get(_str(item.get("id")), i)   # (the stream's index of that item)
                if i not in self.items or self.items[i].done is None:
                    self._item_done({"output_index": i, "item": item})
        self.done = True

    def _failed(self, obj):
        resp = obj.get("response")
        err = resp.get("error") if isinstance(resp, dict) else None
        msg = err.get("message") if isinstance(err, dict) else None
        code = err.get("code") if isinstance(err, dict) else None
        if code == CONTEXT_FULL:  # the prompt does not fit: a reply the caller can compact after
            self.response, self.incomplete, self.done = resp, CONTEXT_FULL, True
            return
        raise ProviderError(f"{NAME}: the response failed: "
                            + one_line(f"{msg or 'no reason given'}" + (f" ({code})" if code else "")))

    def _error(self, obj):
        err = obj.get("error") if isinstance(obj.get("error"), dict) else obj
        msg, code = err.get("message"), err.get("code")
        if not msg and isinstance(obj.get("error"), str):
            msg = obj["error"]
        if code == CONTEXT_FULL:
            self.incomplete, self.done = CONTEXT_FULL, True
            return
        raise ProviderError(f"{NAME}: error in the stream: "
                            + one_line(f"{msg or code or 'unknown error'}" + (f" ({code})" if msg and code else "")))

    def ended(self):
        """Only response.completed or response.incomplete ends a reply: a stream cut
        before either fails the turn."""
        return self.done

    def partial(self):
        """(content, usage or None) of a reply cut short by the user: what has
        arrived, without function calls whose item is not done."""
        content = []
        for i in sorted(self.items):
            item = self.items[i]
            if item.type != "function_call" or item.done is not None:
                content += item.blocks()
        u = (self.response or {}).get("usage")
        return content, map_usage(u) if isinstance(u, dict) else None

    def result(self):
        content = []
        for i in sorted(self.items):
            content += self.items[i].blocks()
        if self.incomplete is not None:
            stop = INCOMPLETE.get(self.incomplete, "length")
        else:
            stop = "toolUse" if any(b["type"] == "toolUse" for b in content) else "stop"
        u = (self.response or {}).get("usage")
        return content, stop, map_usage(u) if isinstance(u, dict) else None


_DELTA_TYPES = {"response.output_text.delta": "message", "response.refusal.delta": "message",
                "response.reasoning_summary_text.delta": "reasoning",
                "response.reasoning_text.delta": "reasoning",
                "response.function_call_arguments.delta": "function_call"}

_HANDLERS = {
    "response.output_item.added": Accumulator._added,
    "response.output_item.done": Accumulator._item_done,
    "response.content_part.added": Accumulator._part,
    "response.output_text.delta": lambda a, o: a._text(o, "output_text"),
    "response.refusal.delta": lambda a, o: a._text(o, "refusal"),
    "response.reasoning_summary_text.delta": Accumulator._summary,
    "response.reasoning_text.delta": Accumulator._reasoning_text,
    "response.function_call_arguments.delta": Accumulator._args,
    "response.function_call_arguments.done": Accumulator._args_done,
    "response.completed": Accumulator._finished,
    "response.incomplete": Accumulator._finished,
    "response.failed": Accumulator._failed,
    "error": Accumulator._error,
}
