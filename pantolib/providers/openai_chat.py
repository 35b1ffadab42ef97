"""OpenAI chat completions (and every server that speaks it): request and stream.

Request: `stream: true` with `stream_options.include_usage`, system text as
a `system` message, tool uses as `tool_calls` (arguments that are not a JSON
object go as `{}`), tool results as `role: tool` messages; thinking is not
sent (the API has no field for it). `reasoning_effort` for --reasoning,
`prompt_cache_key` = the session id unless caching is off. negotiate()
drops what a server refuses.

Stream: chunks are read up to `data: [DONE]`; the usage chunk comes after
the one with `finish_reason`, and a stream that ends before any
`finish_reason` was cut off. Tool calls arrive in fragments keyed by
`index`; `reasoning_content` / `reasoning` deltas (llama.cpp, vLLM,
DeepSeek) become a thinking block; an `error` object fails the turn.
"""
import os

import orjson

from pantolib.entries import usage_dict
from pantolib.errors import ProviderError
from pantolib.providers.common import (data_url, event_object, image_note, normalize, one_line, own_thinking,
                                       placed_images, refusal_note, refused_fields, sendable_image, valid_arguments)

NAME = "openai"
API = "openai_chat"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-6.2-sol"
KEY_VAR = "OPENAI_API_KEY"
# Optional request fields negotiate() can do without (max_completion_tokens: as max_tokens),
# each with the names servers and proxies use for it in a refusal
_NAMES = {"stream_options": ("stream_options", "include_usage"),
          "max_completion_tokens": ("max_completion_tokens",),
          "reasoning_effort": ("reasoning_effort", "reasoning.effort"),
          "prompt_cache_key": ("prompt_cache_key",)}
_FIELDS = tuple(_NAMES)

STOP_REASONS = {"stop": "stop", "length": "length", "tool_calls": "toolUse",
                "function_call": "toolUse", "content_filter": "error", "error": "error"}


def _content(blocks):
    texts = [b["text"] for b in blocks if b.get("type") == "text" and b["text"]]
    if len(texts) <= 1:
        return texts[0] if texts else ""
    return [{"type": "text", "text": t} for t in texts]


def _user_content(blocks):
    """A user message's text and images as this API takes them: one string for
    a single text, else a list of text and image_url parts."""
    parts = []
    for b in blocks:
        t = b.get("type")
        if t == "text" and b["text"]:
            parts.append({"type": "text", "text": b["text"]})
        elif t == "image":
            media, data = sendable_image(b)
            parts.append({"type": "image_url", "image_url": {"url": data_url(media, data)}} if media is not None
                         else {"type": "text", "text": image_note(b, data)})
    if len(parts) == 1 and parts[0]["type"] == "text":
        return parts[0]["text"]
    return parts


def _result_text(b, images):
    """A tool result's content; images it returned, which a tool message cannot
    carry in this API, as a note each."""
    notes = [image_note(i, "this API takes no images in tool results") for i in images]
    return "\n".join(([b["content"]] if b["content"] else []) + notes)


def wire_messages(messages, model=None):
    """Disk-format messages -> the `messages` array of a chat completions request."""
    out = []
    if model is not None:
        messages = own_thinking(messages, NAME, model)
    for m in normalize(messages):
        role, blocks = m["role"], m["content"]
        if role == "system":
            out.append({"role": "system", "content": "\n\n".join(
                b["text"] for b in blocks if b.get("type") == "text")})
        elif role == "assistant":
            msg = {"role": "assistant", "content": _content(blocks) or None}
            calls = [{"id": b["id"], "type": "function",
                      "function": {"name": b["name"], "arguments": valid_arguments(b["input"])}}
                     for b in blocks if b.get("type") == "toolUse"]
            if calls:
                msg["tool_calls"] = calls
            elif msg["content"] is None:
                msg["content"] = ""
            out.append(msg)
        else:
            blocks, attached = placed_images(blocks)
            for b in blocks:
                if b.get("type") == "toolResult":
                    content = _result_text(b, attached[id(b)]) if id(b) in attached else b["content"]
                    out.append({"role": "tool", "tool_call_id": b["toolUseId"], "content": content})
            content = _user_content(blocks)
            if content:
                out.append({"role": "user", "content": content})
    return out


def build_request(messages, opts):
    body = {"model": opts.model, "messages": wire_messages(messages, opts.model), "stream": True}
    sent = _sent(opts)
    if "stream_options" in sent:
        body["stream_options"] = {"include_usage": True}
    if opts.max_tokens:
        # api.openai.com wants the newer name; most compatible servers know only the older one
        body["max_completion_tokens" if "max_completion_tokens" in sent else "max_tokens"] = opts.max_tokens
    if "reasoning_effort" in sent:
        body["reasoning_effort"] = opts.reasoning
    if "prompt_cache_key" in sent:
        body["prompt_cache_key"] = opts.session_id
    if opts.tools:
        body["tools"] = [{"type": "function", "function": {
            "name": t["name"], "description": t.get("description", ""), "parameters": t["parameters"]}}
            for t in opts.tools]
    return opts.base_url + "/chat/completions", stream_headers(opts), body


def stream_headers(opts):
    """The headers of a streamed request to an OpenAI-style server (both its APIs)."""
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    if opts.api_key:
        headers["authorization"] = f"Bearer {opts.api_key}"
    return headers


def _sent(opts):
    """The optional fields a request with these options carries."""
    sent = set()
    if opts.include_usage and "stream_options" not in opts.dropped:
        sent.add("stream_options")
    if opts.max_tokens and "api.openai.com" in opts.base_url and "max_completion_tokens" not in opts.dropped:
        sent.add("max_completion_tokens")
    if opts.reasoning is not None and "reasoning_effort" not in opts.dropped:
        sent.add("reasoning_effort")
    if opts.cache != "off" and opts.session_id and "prompt_cache_key" not in opts.dropped:
        sent.add("prompt_cache_key")
    return sent


def negotiate(err, opts):
    """Leave out (or send in the older form) every sent field a 400/422 names,
    in one retry (SPEC 5.1); None when the error is not about one of them."""
    named, sent, parts = refused_fields(err, _NAMES), _sent(opts), []
    for field, name in named.items():
        if field not in sent:
            continue
        opts.dropped.add(field)
        if field == "stream_options":
            parts.append(f"'{name}': sent without it (usage of this turn unknown)")
        elif field == "max_completion_tokens":
            parts.append(f"'{name}': sent as 'max_tokens'")
        else:
            parts.append(f"'{name}': sent without it")
    return refusal_note(parts)


def whole_events(obj):
    """The stream of a complete chat completion (a server that ignored stream:
    true): its message as one delta, then [DONE]; None for anything else."""
    from pantolib.providers.sse import Event

    choices = obj.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        return None
    chunk = {"choices": [{"index": 0, "delta": choice["message"], "finish_reason": choice.get("finish_reason")}]}
    if isinstance(obj.get("usage"), dict):
        chunk["usage"] = obj["usage"]
    return [Event("message", orjson.dumps(chunk)), Event("message", b"[DONE]")]


def list_models(opts):
    """(url, headers) of the server's model list (GET {base}/models)."""
    headers = {"accept": "application/json"}
    if opts.api_key:
        headers["authorization"] = f"Bearer {opts.api_key}"
    return opts.base_url + "/models", headers


def _int(obj, key):
    v = obj.get(key) if isinstance(obj, dict) else None
    return v if type(v) is int and v > 0 else 0


def map_usage(u):
    """OpenAI usage -> panto usage: prompt tokens split into fresh input, cache
    reads and cache writes (GPT-5.6 and later bill those on their own)."""
    details = u.get("prompt_tokens_details")
    cached = _int(details, "cached_tokens")
    written = _int(details, "cache_write_tokens")
    return usage_dict(input=max(0, _int(u, "prompt_tokens") - cached - written),
                      output=_int(u, "completion_tokens"), cache_read=cached, cache_write=written,
                      reasoning=_int(u.get("completion_tokens_details"), "reasoning_tokens"))


def _nil(*_):
    pass


class Accumulator:
    def __init__(self, on_text=None, on_thinking=None):
        self.on_text, self.on_thinking = on_text or _nil, on_thinking or _nil
        self.blocks = []        # [kind, parts] for text/thinking; [kind, call] for tool calls
        self.calls = {}         # wire index -> call dict {id, name, args}
        self.finish = None
        self.usage = None
        self.done = False
        self.events = 0

    def feed(self, ev):
        self.events += 1
        data = ev.data
        if data == b"[DONE]":
            self.done = True
            return
        obj = event_object(data, NAME)
        err = obj.get("error")
        if err:
            msg = err.get("message") if isinstance(err, dict) else str(err)
            raise ProviderError(f"{NAME}: error in the stream: {one_line(msg or err)}")
        u = obj.get("usage")
        choices = obj.get("choices")
        if not choices or type(choices) is not list:
            if isinstance(u, dict):
                self.usage = u
            return
        choice = choices[0]
        if type(choice) is not dict:
            raise ProviderError(f"{NAME}: malformed stream: a choice is not a JSON object")
        if isinstance(choice.get("usage"), dict):
            u = choice["usage"]
        if isinstance(u, dict):
            self.usage = u
        delta = choice.get("delta")
        if isinstance(delta, dict):
            self._delta(delta)
        fr = choice.get("finish_reason")
        if fr:
            self.finish = fr

    def _delta(self, d):
        think = d.get("reasoning_content") or d.get("reasoning")
        if think and isinstance(think, str):
            self._append("thinking", think)
            self.on_thinking(think)
        text = d.get("content")
        if text and isinstance(text, str):
            self._append("text", text)
            self.on_text(text)
        calls = d.get("tool_calls")
        if calls and type(calls) is list:
            for pos, tc in enumerate(calls):
                if isinstance(tc, dict):
                    self._call(pos, tc)

    def _append(self, kind, s):
        last = self.blocks[-1] if self.blocks else None
        if last is not None and last[0] == kind:
            last[1].append(s)
        else:
            self.blocks.append([kind, [s]])

    def _call(self, pos, tc):
        idx = tc.get("index")
        fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
        tid, name, args = tc.get("id"), fn.get("name"), fn.get("arguments")
        if type(idx) is not int:  # servers that leave out index: a new id starts a new call
            known = [i for i, c in self.calls.items() if c["id"] == tid] if tid else []
            idx = known[0] if known else (len(self.calls) if tid or not self.calls else max(self.calls))
        call = self.calls.get(idx)
        if call is None:
            call = self.calls[idx] = {"id": "", "name": "", "args": []}
            self.blocks.append(["toolUse", call])
        # id and name may come in pieces; a server that repeats them whole is not doubled
        if isinstance(tid, str) and tid and tid != call["id"]:
            call["id"] += tid
        if isinstance(name, str) and name and name != call["name"]:
            call["name"] += name
        if isinstance(args, str) and args:
            call["args"].append(args)
        elif isinstance(args, dict):  # a few servers send the arguments as an object
            call["args"] = [orjson.dumps(args).decode()]

    def ended(self):
        """A stream cut short of [DONE] is finished with what arrived once a
        finish_reason came; before any, it was cut off (SPEC 5.3)."""
        return self.done or self.finish is not None

    def partial(self):
        """(content, usage or None) of a reply cut short by the user: text and
        thinking so far; a tool call once it is complete, that is, once
        something came after it (another call, text) or the finish_reason
        closed it. Usage as the server last reported it, else unknown."""
        last = self.blocks[-1][1] if self.blocks and self.finish is None else None
        content = self._content(leave=last)
        return content, (map_usage(self.usage) if self.usage is not None else None)

    def result(self):
        content = self._content()
        has_tools = any(b["type"] == "toolUse" for b in content)
        stop = STOP_REASONS.get(self.finish) if self.finish else None
        if stop is None:
            stop = "toolUse" if has_tools else "stop"
        usage = map_usage(self.usage) if self.usage is not None else None
        return content, stop, usage

    def _content(self, leave=None):
        content = []
        for kind, v in self.blocks:
            if kind == "toolUse" and v is leave:   # a call still streaming
                continue
            if kind == "text":
                content.append({"type": "text", "text": "".join(v)})
            elif kind == "thinking":
                content.append({"type": "thinking", "thinking": "".join(v)})
            else:
                if not v["id"]:
                    v["id"] = "call_" + os.urandom(6).hex()
                content.append({"type": "toolUse", "id": v["id"], "name": v["name"],
                                "input": "".join(v["args"]) or "{}"})
        return content
