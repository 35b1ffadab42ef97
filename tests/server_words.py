"""What the servers panto is tried against send, event for event and word for
word, taken from their source code (each builder names the file it follows),
for the scripted server of sse_server.py. The real servers stay out of the
tests: these are what they were seen to send.

    import server_words as W
    srv.push(W.vllm_tool_use("chatcmpl-tool-1", "bash", '{"command": "ls"}'))
"""
import time

from sse_server import anthropic_stream, reply, sse

# --- vLLM ------------------------------------------------------------------------------------
# vllm/entrypoints/anthropic/serving.py (AnthropicServingMessages.message_stream_converter):
# /v1/messages is served by turning the chat completion chunks of the same request into
# Anthropic events. message_start carries usage {input_tokens: prompt tokens, output_tokens:
# 0}; a tool call the tool parser finds in the model's text starts a `tool_use` block with
# `input: {}` and the chat chunk's id (chatcmpl-tool-...), its arguments come as
# input_json_delta, the block is stopped when the usage chunk comes, then message_delta
# {stop_reason: "tool_use"} with usage {input_tokens, output_tokens}, then message_stop.
# It does this whether or not the request offered tools (the parser reads the text).


def vllm_tool_use(call_id, name, args, text=None, prompt=31, completion=24, model="tiny", **kw):
    events = [("message_start", {"type": "message_start", "message": {
        "id": "chatcmpl-8f2e", "type": "message", "role": "assistant", "content": [], "model": model,
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": prompt, "output_tokens": 0}}})]
    i = 0
    if text:
        events += [("content_block_start", {"type": "content_block_start", "index": 0,
                                            "content_block": {"type": "text", "text": ""}}),
                   ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                            "delta": {"type": "text_delta", "text": text}}),
                   ("content_block_stop", {"type": "content_block_stop", "index": 0})]
        i = 1
    events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
        "type": "tool_use", "id": call_id, "name": name, "input": {}}}))
    events += [("content_block_delta", {"type": "content_block_delta", "index": i,
                                        "delta": {"type": "input_json_delta", "partial_json": args[j:j + 6]}})
               for j in range(0, len(args), 6)]
    events += [("content_block_stop", {"type": "content_block_stop", "index": i}),
               ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                                  "usage": {"input_tokens": prompt, "output_tokens": completion}}),
               ("message_stop", {"type": "message_stop"})]
    return anthropic_stream(events, **kw)


# vLLM 0.32 refuses a prompt that fills --max-model-len exactly (no token left for the
# reply) in words of its own, as seen from a real server (HTTP 400 each):
#   /v1/chat/completions  {"error":{"message":"max_tokens must be at least 1, got 0. (parameter=max_tokens,
#                          value=0)","type":"BadRequestError","param":"max_tokens","code":400}}
#   /v1/responses         {"error":{"message":"The engine prompt length 8192 exceeds the max_model_len 8192.
#                          Please reduce prompt.","type":"invalid_request_error","param":"input","code":400}}
#   /v1/messages          {"type":"error","error":{"type":"BadRequestError","message":"max_tokens must be at
#                          least 1, got 0. (parameter=max_tokens, value=0)"}}
VLLM_WINDOW_FILLED = {
    "openai_chat": {"error": {"message": "max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)",
                              "type": "BadRequestError", "param": "max_tokens", "code": 400}},
    "openai_responses": {"error": {"message": "The engine prompt length 8192 exceeds the max_model_len 8192. "
                                              "Please reduce prompt.",
                                   "type": "invalid_request_error", "param": "input", "code": 400}},
    "anthropic_messages": {"type": "error", "error": {
        "type": "BadRequestError", "message": "max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)"}},
}


def vllm_window_filled(api):
    return {"status": 400, "body": VLLM_WINDOW_FILLED[api], "headers": {}}


# --- llama.cpp -------------------------------------------------------------------------------
# tools/server/server-task.cpp (server_task_result_cmpl_partial::to_json_oaicompat_resp and
# server_task_result_cmpl_final::to_json_oaicompat_resp_stream): llama-server's Responses
# stream names each event (`event:` line and `type`) but carries no `output_index` and no
# `sequence_number`: items are known by id only. Text: response.output_item.added (a message
# item with an id), response.content_part.added, then response.output_text.delta events with
# `item_id` and `delta`; at the end response.output_text.done, response.content_part.done,
# response.output_item.done for each item (tool calls: id "fc_"+id, call_id "call_"+id), then
# response.completed with the output and usage (input_tokens_details.cached_tokens).


class LlamaResponses:
    """One llama-server Responses stream being scripted: text(), call(), then completed()."""

    def __init__(self, rid="resp_llama7c", model="tiny"):
        self.rid, self.model = rid, model
        self.chunks, self.final, self.output = [], [], []
        brief = {"id": rid, "object": "response", "status": "in_progress"}
        self.emit("response.created", response=brief)
        self.emit("response.in_progress", response=brief)

    def emit(self, type_, into=None, **fields):
        (self.chunks if into is None else into).append(sse({"type": type_, **fields}, type_))

    def reasoning(self, pieces, rid="rs_llama00"):
        self.emit("response.output_item.added", item={"id": rid, "summary": [], "type": "reasoning", "content": [],
                                                      "encrypted_content": "", "status": "in_progress"})
        for p in pieces:
            self.emit("response.reasoning_text.delta", delta=p, item_id=rid)
        item = {"id": rid, "summary": [], "type": "reasoning",
                "content": [{"text": "".join(pieces), "type": "reasoning_text"}], "encrypted_content": ""}
        self.emit("response.output_item.done", self.final, item=item)
        self.output.append(item)
        return self

    def text(self, pieces, mid="msg_llama01"):
        self.emit("response.output_item.added", item={"content": [], "id": mid, "role": "assistant",
                                                      "status": "in_progress", "type": "message"})
        self.emit("response.content_part.added", item_id=mid, part={"type": "output_text", "text": ""})
        for p in pieces:
            self.emit("response.output_text.delta", item_id=mid, delta=p)
        whole = "".join(pieces)
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": whole}
        item = {"type": "message", "status": "completed", "id": mid, "content": [part], "role": "assistant"}
        self.emit("response.output_text.done", self.final, item_id=mid, text=whole)
        self.emit("response.content_part.done", self.final, item_id=mid, part=part)
        self.emit("response.output_item.done", self.final, item=item)
        self.output.append(item)
        return self

    def call(self, tid, name, args):
        self.emit("response.output_item.added", item={"id": "fc_" + tid, "arguments": "", "call_id": "call_" + tid,
                                                      "name": name, "type": "function_call",
                                                      "status": "in_progress"})
        for j in range(0, len(args), 5):
            self.emit("response.function_call_arguments.delta", delta=args[j:j + 5], item_id="fc_" + tid)
        item = {"id": "fc_" + tid, "type": "function_call", "status": "completed", "arguments": args,
                "call_id": "call_" + tid, "name": name}
        self.emit("response.output_item.done", self.final, item=item)
        self.output.append(item)
        return self

    def completed(self, input=40, output=12, cached=0, **kw):
        usage = {"input_tokens": input, "output_tokens": output, "total_tokens": input + output,
                 "input_tokens_details": {"cached_tokens": cached}}
        self.emit("response.completed", self.final, response={
            "id": self.rid, "object": "response", "created_at": int(time.time()), "status": "completed",
            "model": self.model, "output": self.output, "usage": usage})
        return reply(self.chunks + self.final, **kw)

    def streamed(self, **kw):
        """The deltas only (the reply still being written): for a stall and a Ctrl-C."""
        return reply(list(self.chunks), **kw)


# --- LiteLLM ---------------------------------------------------------------------------------
# litellm/utils.py (get_optional_params, _check_valid_arg): a request whose optional
# parameters the backend does not take fails with UnsupportedParamsError, which is always an
# HTTP 400 (litellm/exceptions.py sets status_code = 400), in the proxy's error body
# (proxy/_types.py ProxyException). On /v1/responses to an Anthropic model LiteLLM turns the
# request into a chat completion, `reasoning` into `reasoning_effort`, and refuses that name.

LITELLM_RESPONSES_REASONING = (
    "litellm.UnsupportedParamsError: anthropic does not support parameters: ['reasoning_effort'], for "
    "model=claude-tiny. To drop these, set `litellm.drop_params=True` or for proxy:\n\n`litellm_settings:\n "
    "drop_params: true`\n. \n If you want to use these params dynamically send "
    "allowed_openai_params=['reasoning_effort'] in your request.")


def litellm_error(message, status=400):
    return {"status": status, "body": {"error": {"message": message, "type": "None", "param": None,
                                                 "code": str(status)}}}


# litellm/llms/anthropic/experimental_pass_through/adapters/streaming_iterator.py
# (AnthropicStreamWrapper): /v1/messages in front of a chat completions backend. message_start
# carries usage with every count 0 (_create_initial_usage_delta: the real counts come in the
# message_delta at the end), then a text block with one text_delta per chunk; the block stops
# and message_delta brings the stop reason and the real usage only when the backend finishes.


def litellm_messages_text(pieces, prompt=52, completion=120, model="claude-tiny", end=True, **kw):
    events = [("message_start", {"type": "message_start", "message": {
        "id": "msg_5d1c", "type": "message", "role": "assistant", "content": [], "model": model,
        "stop_reason": None, "stop_sequence": None, "usage": {
            "input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}})]
    events += [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                        "delta": {"type": "text_delta", "text": p}}) for p in pieces]
    if end:
        events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
                   ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                      "usage": {"input_tokens": prompt, "output_tokens": completion}}),
                   ("message_stop", {"type": "message_stop"})]
    return anthropic_stream(events, **kw)


def without_deltas(rep):
    """A reply with its delta events left out (a server that sends only the done items)."""
    return dict(rep, chunks=[c for c in rep["chunks"] if ".delta" not in c.split("\n", 1)[0]])
