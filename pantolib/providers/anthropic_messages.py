"""Anthropic messages: request and stream.

Request: `stream: true`, the system text as top-level `system`, blocks
mapped one to one (tool inputs as JSON objects, thinking sent back with its
signature, redacted thinking as it came; thinking without a signature, e.g.
from an OpenAI turn, is left out). Consecutive messages of one role are
merged, tool results first, because the API wants roles to alternate.

Reasoning (SPEC 5.1): a level -> adaptive thinking shown summarized plus
`output_config.effort`; a number -> manual thinking with that budget;
`none` -> thinking disabled. Caching: the top-level automatic
`cache_control`, and with "1h" also 1-hour breakpoints on the last tool and
the last system block. negotiate() steps back to the older forms.

Stream: `message_start` and `message_delta` usage are merged field by field
(later counts are totals, not increments); `ping` and unknown events are
ignored; `event: error` fails the turn.
"""
import re

import orjson

from pantolib.entries import usage_dict
from pantolib.errors import ProviderError
from pantolib.providers.common import (MIN_BUDGET, event_object, image_note, normalize, one_line, own_thinking,
                                       placed_images, refusal_note, refused_fields, sendable_image)

NAME = "anthropic"
API = "anthropic_messages"
DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_MODEL = "claude-sonnet-5-5"
DEFAULT_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192
KEY_VAR = "ANTHROPIC_API_KEY"
# --reasoning LEVEL -> the budget of manual thinking, the older form negotiate() falls back to
BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576, "xhigh": 24576, "max": 24576}
EFFORTS = {"minimal": "low"}   # output_config.effort takes low, medium, high, xhigh, max

STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop",
                "max_tokens": "length", "model_context_window_exceeded": "contextFull",
                "tool_use": "toolUse", "refusal": "error"}
# Optional request fields, each with the names a server's or a proxy's refusal uses for it.
# "reasoning": a proxy in front of a model that takes no reasoning in any form (LiteLLM:
# "UnsupportedParamsError: tiny doesn't support `reasoning.effort`"): thinking goes at once.
_NAMES = {"output_config": ("output_config",), "display": ("display",), "ttl": ("ttl",),
          "thinking": ("thinking",), "cache_control": ("cache_control",),
          "reasoning": ("reasoning.effort", "reasoning_effort", "reasoning")}
_FIELDS = tuple(_NAMES)

_BAD_ID = re.compile(r"[^A-Za-z0-9_-]")


def _tool_id(i):
    """Tool ids from other servers may hold characters this API refuses."""
    return _BAD_ID.sub("_", i) or "toolu_none"


def _input(text):
    """The raw JSON text of tool arguments as the object this API wants (an
    object panto cannot write inside the request body is sent as {}, like
    arguments that are not valid JSON)."""
    from pantolib import stream

    try:
        v = orjson.loads(text) if text else {}
    except orjson.JSONDecodeError:
        return {}
    return v if isinstance(v, dict) and stream.writable(v, inside=8) else {}


def _image(b):
    """An image block as this API takes it, or a text note for one it cannot take."""
    media, data = sendable_image(b)
    if media is None:
        return {"type": "text", "text": image_note(b, data)}
    return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}


def _block(b):
    t = b.get("type")
    if t == "image":
        return _image(b)
    if t == "text":
        return {"type": "text", "text": b["text"]} if b["text"] else None
    if t == "thinking":
        if not b.get("signature"):
            return None
        return {"type": "thinking", "thinking": b["thinking"], "signature": b["signature"]}
    if t == "redactedThinking":
        return {"type": "redacted_thinking", "data": b["data"]}
    if t == "toolUse":
        return {"type": "tool_use", "id": _tool_id(b["id"]), "name": b["name"], "input": _input(b["input"])}
    if t == "toolResult":
        r = {"type": "tool_result", "tool_use_id": _tool_id(b["toolUseId"]), "content": b["content"]}
        if b.get("isError"):
            r["is_error"] = True
        return r
    return None  # a block type this API has no use for


def wire_messages(messages, model=None):
    """Disk-format messages -> (system text or None, the `messages` array).
    Thinking goes back only to the model that wrote it (with `model`)."""
    system, out = [], []
    if model is not None:
        messages = own_thinking(messages, NAME, model)
    for m in normalize(messages):
        if m["role"] == "system":
            system += [b["text"] for b in m["content"] if b.get("type") == "text"]
            continue
        content, attached = placed_images(m["content"]) if m["role"] == "user" else (m["content"], {})
        blocks = []
        for b in content:
            w = _block(b)
            if w is None:
                continue
            if id(b) in attached:   # the images a tool returned go inside its result
                text = [{"type": "text", "text": w["content"]}] if w["content"] else []
                w["content"] = text + [_image(i) for i in attached[id(b)]]
            blocks.append(w)
        if not blocks:
            continue
        if out and out[-1]["role"] == m["role"]:
            blocks = out.pop()["content"] + blocks
        if m["role"] == "user":  # tool results must lead a user message
            blocks.sort(key=lambda w: w["type"] != "tool_result")
        out.append({"role": m["role"], "content": blocks})
    return ("\n\n".join(system) if system else None), out


def _loop_without_thinking(msgs):
    """True when the request continues a tool loop (it ends with results for
    the last assistant message's tool uses) whose assistant message holds no
    thinking: the API refuses thinking there (the loop began without it)."""
    if len(msgs) < 2 or msgs[-1]["role"] != "user" or msgs[-2]["role"] != "assistant":
        return False
    if not any(b["type"] == "tool_result" for b in msgs[-1]["content"]):
        return False
    return not any(b["type"] in ("thinking", "redacted_thinking") for b in msgs[-2]["content"])


def _thinking(level, opts, msgs):
    """The thinking fields for a reasoning setting, as this server takes them."""
    if level is None or "thinking" in opts.dropped:
        return {}
    if level == "none":
        return {"thinking": {"type": "disabled"}}
    if _loop_without_thinking(msgs):
        opts.notes.append("thinking left out of this request: the tool loop it continues "
                          "began without thinking of this model")
        return {}
    if isinstance(level, int) or "adaptive" in opts.dropped:
        budget = level if isinstance(level, int) else BUDGETS[level]
        return {"thinking": {"type": "enabled", "budget_tokens": budget}}
    adaptive = {"type": "adaptive"}
    if "display" not in opts.dropped:
        adaptive["display"] = "summarized"
    return {"thinking": adaptive, "output_config": {"effort": EFFORTS.get(level, level)}}


def build_request(messages, opts):
    system, msgs = wire_messages(messages, opts.model)
    cache = "off" if "cache_control" in opts.dropped else opts.cache
    long_ttl = cache == "1h" and "ttl" not in opts.dropped
    body = {"model": opts.model, "max_tokens": opts.max_tokens or DEFAULT_MAX_TOKENS}
    if cache != "off":
        body["cache_control"] = {"type": "ephemeral"}
    if system:
        if long_ttl:
            body["system"] = [{"type": "text", "text": system,
                               "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
        else:
            body["system"] = system
    body["messages"] = msgs
    body["stream"] = True
    body.update(_thinking(opts.reasoning, opts, msgs))
    budget = body.get("thinking", {}).get("budget_tokens")
    if budget and body["max_tokens"] <= budget:
        if not opts.max_tokens:         # panto's own default makes room for the budget
            body["max_tokens"] = budget + DEFAULT_MAX_TOKENS
        elif isinstance(opts.reasoning, int):   # configure() has refused a budget that does not fit
            pass
        elif body["max_tokens"] > MIN_BUDGET:   # a limit the user set stays (SPEC 5.1): the budget fits under it
            body["thinking"]["budget_tokens"] = body["max_tokens"] - 1
        else:
            del body["thinking"]
            opts.notes.append(f"thinking left out: a thinking budget of at least {MIN_BUDGET} tokens "
                              f"does not fit under --max-tokens {opts.max_tokens}")
    if opts.tools:
        body["tools"] = [{"name": t["name"], "description": t.get("description", ""),
                          "input_schema": t["parameters"]} for t in opts.tools]
        if long_ttl:
            body["tools"][-1]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    headers = {"content-type": "application/json", "accept": "text/event-stream",
               "anthropic-version": opts.api_version or DEFAULT_VERSION}
    if opts.api_key:
        headers["x-api-key"] = opts.api_key
    return opts.base_url + "/v1/messages", headers, body


def negotiate(err, opts):
    """Step back from every field a 400/422 names, in one retry (SPEC 5.1):
    adaptive thinking -> a thinking budget, then no thinking (at once when a
    proxy says the model takes no reasoning at all: LiteLLM's "doesn't
    support `reasoning.effort`"); the 1-hour TTL -> the 5-minute one, then no
    caching. Each step once; None when the error is not about them."""
    named = refused_fields(err, _NAMES)
    level, parts = opts.reasoning, []
    if level is not None and "thinking" not in opts.dropped:
        adaptive = level != "none" and not isinstance(level, int) and "adaptive" not in opts.dropped
        if "reasoning" in named:
            opts.dropped.add("thinking")
            parts.append(f"'{named['reasoning']}': sent without thinking")
        elif ("output_config" in named or "thinking" in named) and adaptive:
            field = "output_config" if "output_config" in named else "thinking"
            opts.dropped.add("adaptive")
            parts.append(f"adaptive thinking ({field}): sent a thinking budget of {BUDGETS[level]} tokens instead")
        elif "display" in named and adaptive and "display" not in opts.dropped:
            opts.dropped.add("display")
            parts.append("thinking 'display': sent adaptive thinking without it")
        elif "output_config" in named or "thinking" in named or "display" in named:
            field = next(f for f in ("output_config", "thinking", "display") if f in named)
            opts.dropped.add("thinking")
            parts.append(f"'{field}': sent without thinking")
    if opts.cache != "off" and "cache_control" not in opts.dropped:
        if "ttl" in named and opts.cache == "1h" and "ttl" not in opts.dropped:
            opts.dropped.add("ttl")
            parts.append("the 1-hour cache TTL: sent with the 5-minute one")
        elif "cache_control" in named or "ttl" in named:
            opts.dropped.add("cache_control")
            parts.append("'cache_control': sent without prompt caching")
    return refusal_note(parts)


def whole_events(obj):
    """The stream of a complete message (a server that ignored stream: true):
    each content block started whole and stopped, then the stop reason and
    usage; None for anything else."""
    from pantolib.providers.sse import Event

    if obj.get("type") != "message" or not isinstance(obj.get("content"), list):
        return None
    usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else None
    start = {k: v for k, v in obj.items() if k != "content"}
    events = [("message_start", {"type": "message_start", "message": dict(start, content=[])})]
    for i, block in enumerate(obj["content"]):
        events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": block}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    delta = {"type": "message_delta", "delta": {"stop_reason": obj.get("stop_reason")}}
    if usage is not None:
        delta["usage"] = usage
    events += [("message_delta", delta), ("message_stop", {"type": "message_stop"})]
    return [Event(name, orjson.dumps(data)) for name, data in events]


def list_models(opts):
    """(url, headers) of the server's model list (GET /v1/models)."""
    headers = {"accept": "application/json", "anthropic-version": opts.api_version or DEFAULT_VERSION}
    if opts.api_key:
        headers["x-api-key"] = opts.api_key
    return opts.base_url + "/v1/models", headers


def _nil(*_):
    pass


_USAGE_FIELDS = (("input_tokens", "input"), ("output_tokens", "output"),
                 ("cache_read_input_tokens", "cache_read"),
                 ("cache_creation_input_tokens", "cache_write"))


class Accumulator:
    def __init__(self, on_text=None, on_thinking=None):
        self.on_text, self.on_thinking = on_text or _nil, on_thinking or _nil
        self.blocks = {}       # wire index -> block being built
        self.order = []        # wire indexes in the order they started
        self.stopped = set()   # wire indexes whose content_block_stop arrived
        self.usage = None      # merged counts, None until the stream reports some
        self.counted = False   # whether a message_delta has reported the reply's output tokens
        self.stop = None
        self.done = False
        self.events = 0

    def feed(self, ev):
        self.events += 1
        obj = event_object(ev.data, NAME)
        t = obj.get("type") or ev.event
        if t in ("content_block_delta", "content_block_start", "content_block_stop"):
            i = obj.get("index")
            if type(i) is not int:
                raise ProviderError(f"{NAME}: malformed stream: a {t} event's index is "
                                    f"{_kind(i)}, not a number")
            if t == "content_block_stop":
                self.stopped.add(i)
        if t == "content_block_delta":
            self._delta(obj)
        elif t == "content_block_start":
            self._start(obj)
        elif t == "message_start":
            msg = obj.get("message")
            if isinstance(msg, dict):
                self._usage(msg.get("usage"))
        elif t == "message_delta":
            d = obj.get("delta")
            if isinstance(d, dict) and d.get("stop_reason"):
                self.stop = d["stop_reason"]
            self._usage(obj.get("usage"))
            u = obj.get("usage")
            self.counted = self.counted or (isinstance(u, dict) and type(u.get("output_tokens")) is int)
        elif t == "message_stop":
            self.done = True
        elif t == "error" or ev.event == "error" or ("type" not in obj and obj.get("error")):
            err = obj.get("error")
            msg = err.get("message") if isinstance(err, dict) else err if isinstance(err, str) else None
            kind = err.get("type") if isinstance(err, dict) else None
            raise ProviderError(f"{NAME}: error in the stream: {one_line(msg or kind or 'unknown error')}")
        # content_block_stop, ping and event types added later need nothing

    def _usage(self, u):
        """Merge reported counts; a field that is missing or null is unchanged."""
        if not isinstance(u, dict):
            return
        got = {}
        for wire, key in _USAGE_FIELDS:
            v = u.get(wire)
            if type(v) is int and v >= 0:
                got[key] = v
        cc = u.get("cache_creation")
        if isinstance(cc, dict):
            v = cc.get("ephemeral_1h_input_tokens")
            if type(v) is int and v >= 0:
                got["cache_write_1h"] = v
        if got:
            self.usage = {**(self.usage or {}), **got}

    def _start(self, obj):
        i, cb = obj.get("index"), obj.get("content_block")
        if not isinstance(cb, dict) or i in self.blocks:
            return
        t = cb.get("type")
        if t == "text":
            b = {"type": "text", "parts": [cb.get("text") or ""]}
            if cb.get("text"):
                self.on_text(cb["text"])
        elif t == "thinking":
            b = {"type": "thinking", "parts": [cb.get("thinking") or ""], "signature": cb.get("signature") or ""}
        elif t == "redacted_thinking":
            b = {"type": "redactedThinking", "data": cb.get("data") or ""}
        elif t == "tool_use":
            start = cb.get("input")
            b = {"type": "toolUse", "id": cb.get("id") or "", "name": cb.get("name") or "",
                 "parts": [], "start": orjson.dumps(start).decode() if start else ""}
        else:
            return  # server tools and future block types are not kept
        self.blocks[i] = b
        self.order.append(i)

    def _delta(self, obj):
        b, d = self.blocks.get(obj.get("index")), obj.get("delta")
        if b is None or not isinstance(d, dict):
            return
        t = d.get("type")
        if t == "text_delta" and b["type"] == "text":
            s = d.get("text")
            if isinstance(s, str) and s:
                b["parts"].append(s)
                self.on_text(s)
        elif t == "thinking_delta" and b["type"] == "thinking":
            s = d.get("thinking")
            if isinstance(s, str) and s:
                b["parts"].append(s)
                self.on_thinking(s)
        elif t == "signature_delta" and b["type"] == "thinking":
            if isinstance(d.get("signature"), str):
                b["signature"] += d["signature"]
        elif t == "input_json_delta" and b["type"] == "toolUse":
            if isinstance(d.get("partial_json"), str):
                b["parts"].append(d["partial_json"])

    def ended(self):
        """Whether the stream said enough to finish the turn (message_stop or a stop reason)."""
        return self.done or self.stop is not None

    def partial(self):
        """(content, usage or None) of a reply cut short by the user: what has
        arrived, without tool uses whose block is not complete. Usage only once
        a message_delta has counted the reply's output: message_start's
        output_tokens is the count before the reply (LiteLLM and vLLM send 0
        there, with every count 0 on LiteLLM), never the tokens that streamed
        after it, so before any message_delta the usage is unknown (omitted)."""
        return self._content(complete_only=True), self._usage_dict() if self.counted else None

    def _usage_dict(self):
        return usage_dict(**self.usage) if self.usage is not None else None

    def result(self):
        content = self._content()
        stop = STOP_REASONS.get(self.stop) if self.stop else None
        if stop is None:
            stop = "toolUse" if any(b["type"] == "toolUse" for b in content) else "stop"
        return content, stop, self._usage_dict()

    def _content(self, complete_only=False):
        content = []
        for i in self.order:
            b = self.blocks[i]
            t = b["type"]
            if complete_only and t == "toolUse" and i not in self.stopped:
                continue
            if t == "text":
                s = "".join(b["parts"])
                if s:  # an empty text block would be refused when sent back
                    content.append({"type": "text", "text": s})
            elif t == "thinking":
                blk = {"type": "thinking", "thinking": "".join(b["parts"])}
                if b["signature"]:
                    blk["signature"] = b["signature"]
                content.append(blk)
            elif t == "redactedThinking":
                content.append({"type": "redactedThinking", "data": b["data"]})
            else:
                content.append({"type": "toolUse", "id": b["id"], "name": b["name"],
                                "input": "".join(b["parts"]) or b["start"] or "{}"})
        return content


def _kind(v):
    return "missing" if v is None else f"a JSON {type(v).__name__}".replace("dict", "object").replace(
        "list", "array").replace(" str", " string")
