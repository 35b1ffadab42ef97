"""Scripted streams of OpenAI's Responses API (`POST /v1/responses`), for the
scripted server of sse_server.py.

Written from OpenAI's streaming event reference: every event is framed as
`event: TYPE` + `data: JSON`, carries a `sequence_number` that counts up from
0, and its `type`; a reply opens with `response.created` and
`response.in_progress` and ends with `response.completed`,
`response.incomplete` or `response.failed` (or an `error` event). Output
items are announced by `response.output_item.added` (at their
`output_index`) and finished by `response.output_item.done` carrying the
whole item; message text arrives between `response.content_part.added` and
`.done` as `response.output_text.delta` events, reasoning summaries as
`response.reasoning_summary_text.delta` between summary part events, and
function call arguments as `response.function_call_arguments.delta`.

    from responses_server import Stream
    s = Stream()
    s.reasoning(["Looking at it."], "gAAAAB...")
    s.function_call("call_1", "bash", '{"command": "ls"}')
    srv.push(s.completed(usage=usage(100, 20, cached=64, reasoning=12)))
"""
import copy

from sse_server import reply, sse


def usage(input, output, cached=0, cache_write=None, reasoning=0):
    """A `usage` object as the Responses API reports it."""
    details = {"cached_tokens": cached}
    if cache_write is not None:
        details["cache_write_tokens"] = cache_write
    return {"input_tokens": input, "input_tokens_details": details, "output_tokens": output,
            "output_tokens_details": {"reasoning_tokens": reasoning}, "total_tokens": input + output}


def pieces(text, n):
    """Text cut every n characters (mid-word, mid-token: the way deltas come)."""
    return [text[i:i + n] for i in range(0, len(text), n)] or [""]


class Stream:
    """One reply being scripted: call the item methods in output order (or
    `interleave` several), then one of completed/incomplete/failed/error."""

    def __init__(self, model="gpt-test", rid="resp_0a1b2c3d", start=True):
        self.model, self.rid = model, rid
        self.seq = 0
        self.chunks = []
        self.output = []   # the complete items, for the final response
        if start:
            self.emit("response.created", response=self.response("in_progress", final=False))
            self.emit("response.in_progress", response=self.response("in_progress", final=False))

    # --- framing --------------------------------------------------------------

    def emit(self, type_, **fields):
        obj = {"type": type_, "sequence_number": self.seq, **fields}
        self.seq += 1
        self.chunks.append(sse(obj, type_))
        return obj

    def response(self, status, usage=None, error=None, incomplete=None, final=True):
        return {"id": self.rid, "object": "response", "created_at": 1764547200, "status": status,
                "background": False, "error": error,
                "incomplete_details": {"reason": incomplete} if incomplete else None,
                "instructions": None, "max_output_tokens": None, "model": self.model,
                "output": copy.deepcopy([x for x in self.output if x is not None]) if final else [], "parallel_tool_calls": True,
                "previous_response_id": None, "reasoning": {"effort": "medium", "summary": "auto"},
                "store": False, "temperature": 1.0, "text": {"format": {"type": "text"}},
                "tool_choice": "auto", "tools": [], "top_p": 1.0, "truncation": "disabled",
                "usage": usage, "metadata": {}}

    # --- items ------------------------------------------------------------------

    def message(self, *parts, n=4, mid="msg_68af01"):
        """An assistant message; each part is text, or ("refusal", text)."""
        for _ in self.message_steps(*parts, n=n, mid=mid):
            pass

    def message_steps(self, *parts, n=4, mid="msg_68af01"):
        i = len(self.output)
        self.output.append(None)
        item = {"id": mid, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}
        self.emit("response.output_item.added", output_index=i, item=item)
        yield
        done = []
        for k, part in enumerate(parts):
            kind, text = part if isinstance(part, tuple) else ("output_text", part)
            empty = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""} \
                if kind == "output_text" else {"type": "refusal", "refusal": ""}
            self.emit("response.content_part.added", item_id=mid, output_index=i, content_index=k, part=empty)
            for p in pieces(text, n):
                if kind == "output_text":
                    self.emit("response.output_text.delta", item_id=mid, output_index=i, content_index=k,
                              delta=p, logprobs=[])
                else:
                    self.emit("response.refusal.delta", item_id=mid, output_index=i, content_index=k, delta=p)
                yield
            full = dict(empty, **({"text": text} if kind == "output_text" else {"refusal": text}))
            if kind == "output_text":
                self.emit("response.output_text.done", item_id=mid, output_index=i, content_index=k,
                          text=text, logprobs=[])
            else:
                self.emit("response.refusal.done", item_id=mid, output_index=i, content_index=k, refusal=text)
            self.emit("response.content_part.done", item_id=mid, output_index=i, content_index=k, part=full)
            done.append(full)
        item = dict(item, status="completed", content=done)
        self.output[i] = item
        self.emit("response.output_item.done", output_index=i, item=copy.deepcopy(item))

    def reasoning(self, summary, encrypted, rid="rs_68af00", n=5):
        for _ in self.reasoning_steps(summary, encrypted, rid=rid, n=n):
            pass

    def reasoning_steps(self, summary, encrypted, rid="rs_68af00", n=5):
        """A reasoning item with these summary texts; `encrypted_content` is cut
        short in `.added` (the documented case) and whole in `.done`."""
        i = len(self.output)
        self.output.append(None)
        self.emit("response.output_item.added", output_index=i,
                  item={"id": rid, "type": "reasoning", "summary": [], "encrypted_content": encrypted[:8]})
        yield
        parts = []
        for k, text in enumerate(summary):
            self.emit("response.reasoning_summary_part.added", item_id=rid, output_index=i, summary_index=k,
                      part={"type": "summary_text", "text": ""})
            for p in pieces(text, n):
                self.emit("response.reasoning_summary_text.delta", item_id=rid, output_index=i,
                          summary_index=k, delta=p)
                yield
            self.emit("response.reasoning_summary_text.done", item_id=rid, output_index=i, summary_index=k,
                      text=text)
            self.emit("response.reasoning_summary_part.done", item_id=rid, output_index=i, summary_index=k,
                      part={"type": "summary_text", "text": text})
            parts.append({"type": "summary_text", "text": text})
        item = {"id": rid, "type": "reasoning", "summary": parts, "encrypted_content": encrypted}
        self.output[i] = item
        self.emit("response.output_item.done", output_index=i, item=copy.deepcopy(item))

    def function_call(self, call_id, name, arguments, fid=None, n=3):
        for _ in self.function_call_steps(call_id, name, arguments, fid=fid, n=n):
            pass

    def function_call_steps(self, call_id, name, arguments, fid=None, n=3):
        """A function call whose arguments come in n-character fragments."""
        i = len(self.output)
        self.output.append(None)
        fid = fid or "fc_" + call_id[-6:]
        item = {"id": fid, "type": "function_call", "status": "in_progress", "arguments": "",
                "call_id": call_id, "name": name}
        self.emit("response.output_item.added", output_index=i, item=item)
        yield
        for p in pieces(arguments, n):
            self.emit("response.function_call_arguments.delta", item_id=fid, output_index=i, delta=p)
            yield
        self.emit("response.function_call_arguments.done", item_id=fid, output_index=i, arguments=arguments)
        item = dict(item, status="completed", arguments=arguments)
        self.output[i] = item
        self.emit("response.output_item.done", output_index=i, item=copy.deepcopy(item))

    def interleave(self, *steps):
        """Run several *_steps generators in turns (items streaming in parallel)."""
        live = list(steps)
        while live:
            for g in list(live):
                try:
                    next(g)
                except StopIteration:
                    live.remove(g)

    # --- endings ------------------------------------------------------------------

    def completed(self, usage=None, **kw):
        self.emit("response.completed", response=self.response("completed", usage=usage))
        return self.reply(**kw)

    def incomplete(self, reason, usage=None, **kw):
        self.emit("response.incomplete", response=self.response("incomplete", usage=usage, incomplete=reason))
        return self.reply(**kw)

    def failed(self, message, code="server_error", **kw):
        self.emit("response.failed", response=self.response(
            "failed", error={"code": code, "message": message}))
        return self.reply(**kw)

    def error(self, message, code="server_error", param=None, **kw):
        self.emit("error", code=code, message=message, param=param)
        return self.reply(**kw)

    def cut(self, **kw):
        """The stream so far, closed before any ending event."""
        return self.reply(**kw)

    def reply(self, **kw):
        return reply(list(self.chunks), **kw)


def without_final_output(rep):
    """The reply with `output` left out of its final response event (the SDK then
    builds the output from the items' done events, as a client must)."""
    import json

    rep = dict(rep, chunks=list(rep["chunks"]))
    head, data = rep["chunks"][-1].split("data: ", 1)
    obj = json.loads(data)
    obj["response"].pop("output", None)
    rep["chunks"][-1] = sse(obj, obj["type"])
    return rep


def text(t, usage_=None, **kw):
    s = Stream()
    s.message(t)
    return s.completed(usage=usage_, **kw)


# --- llama.cpp's reading of a Responses request -------------------------------------------
# llama-server turns `input` into chat messages item by item
# (tools/server/server-chat.cpp, server_chat_convert_responses_to_chatcmpl) and refuses,
# with HTTP 400 and these words, an item it cannot place: a user/system/developer message
# needs a content list (a string is taken as one input_text), an assistant message needs
# "type": "message", a function call its arguments, call_id, name and type, and so on.

def llama_error(message):
    """llama-server's error answer (format_error_response, ERROR_TYPE_INVALID_REQUEST)."""
    return {"status": 400, "body": {"error": {"code": 400, "message": message, "type": "invalid_request_error"}}}


def _is(item, key, kind):
    return isinstance(item.get(key), kind)


def llama_cpp_refusal(req):
    """llama-server's refusal of a /responses request it cannot convert, or None."""
    body = req.body if isinstance(req.body, dict) else {}
    if not req.path.endswith("/responses"):
        return None
    items = body.get("input")
    if isinstance(items, str):
        return None
    if not isinstance(items, list):
        return llama_error("'input' must be a string or array of objects")
    for item in items:
        item = dict(item) if isinstance(item, dict) else {}
        if _is(item, "content", str):
            item["content"] = [{"text": item["content"], "type": "input_text"}]
        if _is(item, "content", list) and item.get("role") in ("user", "system", "developer"):
            for part in item["content"]:
                if not isinstance(part, dict) or part.get("type") not in ("input_text", "input_image", "input_file"):
                    return llama_error("'type' must be one of 'input_text', 'input_image', or 'input_file'")
        elif item.get("role") == "assistant" and item.get("type") == "message":
            for part in item.get("content") or []:
                if part.get("type") not in ("output_text", "input_text", "refusal"):
                    return llama_error("'type' must be one of 'output_text' or 'refusal'")
        elif all(_is(item, k, str) for k in ("arguments", "call_id", "name")) and item.get("type") == "function_call":
            pass
        elif _is(item, "call_id", str) and (_is(item, "output", str) or _is(item, "output", list)) \
                and item.get("type") == "function_call_output":
            pass
        elif _is(item, "summary", list) and item.get("type") == "reasoning":
            if not (_is(item, "content", list) and item["content"]):
                return llama_error("item['content'] is not an array")
        else:
            return llama_error("Cannot determine type of 'item'")
    return None
