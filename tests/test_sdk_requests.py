"""Every request body panto builds validates, strictly (unknown keys
rejected), against the official SDKs' request types: anthropic 2.14's
MessageCreateParamsStreaming and openai 3.57's chat
CompletionCreateParamsStreaming (SPEC 11, "Today's APIs")."""
import itertools

import orjson
import pytest

from typed_check import check

anthropic_params = pytest.importorskip("anthropic.types.message_create_params")
openai_params = pytest.importorskip("openai.types.chat.completion_create_params")

from pantolib import providers, tools  # noqa: E402
from pantolib.providers import anthropic_messages as an  # noqa: E402
from pantolib.providers import openai_chat as oa  # noqa: E402

AN_TYPE = anthropic_params.MessageCreateParamsStreaming
OA_TYPE = openai_params.CompletionCreateParamsStreaming
AN_MODEL, OA_MODEL = an.DEFAULT_MODEL, oa.DEFAULT_MODEL

SYSTEM = {"role": "system", "content": [{"type": "text", "text": "be brief"}]}


def user(*blocks):
    return {"role": "user", "content": list(blocks)}


def text(s):
    return {"type": "text", "text": s}


def said(provider, model, *blocks):
    return {"role": "assistant", "content": list(blocks), "provider": provider, "model": model}


USE = {"type": "toolUse", "id": "call_1", "name": "bash", "input": '{"command":"ls"}'}
USE2 = {"type": "toolUse", "id": "call.2", "name": "read", "input": '{"path": "a'}  # malformed arguments
RESULTS = user({"type": "toolResult", "toolUseId": "call_1", "content": "a\nb"},
               {"type": "toolResult", "toolUseId": "call.2", "content": "not valid JSON", "isError": True})
AN_THINK = {"type": "thinking", "thinking": "hmm", "signature": "SIG"}
AN_REDACTED = {"type": "redactedThinking", "data": "RED"}
OA_THINK = {"type": "thinking", "thinking": "local reasoning"}

CONVERSATIONS = {
    "plain": [SYSTEM, user(text("hi"))],
    "no system": [user(text("hi"))],
    "multi-text": [SYSTEM, user(text("a"), text("b"))],
    "tool results": [SYSTEM, user(text("list")), said("anthropic", AN_MODEL, AN_THINK, AN_REDACTED, text("Running."),
                                                       USE, USE2), RESULTS],
    "tool loop of openai": [SYSTEM, user(text("list")), said("openai", OA_MODEL, OA_THINK, USE, USE2), RESULTS],
    "unanswered use": [user(text("list")), said("openai", OA_MODEL, USE), user(text("go on"))],
    "provider switch": [SYSTEM, user(text("a")), said("openai", OA_MODEL, OA_THINK, text("one")),
                        user(text("b")), said("anthropic", AN_MODEL, AN_THINK, AN_REDACTED, text("two")),
                        user(text("c")), said("anthropic", "claude-opus-5-5", AN_THINK, text("three")),
                        user(text("d"))],
}
# as the session file has them since the api stamp (SPEC 3): the field stays out of every request
CONVERSATIONS["api stamps across three APIs"] = [
    SYSTEM, user(text("a")),
    dict(said("openai", OA_MODEL, text("one"), USE), api="openai_responses"),
    user({"type": "toolResult", "toolUseId": "call_1", "content": "ok"}, text("b")),
    dict(said("openai", OA_MODEL, OA_THINK, text("two")), api="openai_chat"), user(text("c")),
    dict(said("anthropic", AN_MODEL, AN_THINK, text("three")), api="anthropic_messages"), user(text("d"))]
# an imported session (SPEC 12): images of the person's and of a tool's, and one of a kind
# Anthropic does not take (sent as a note); another agent's tool names and ids
PNG = {"type": "image", "mediaType": "image/png", "data": "iVBORw0KGgo="}
BMP = {"type": "image", "mediaType": "image/bmp", "data": "Qk0="}
SHOT = {"type": "toolUse", "id": "toolu_01Shot", "name": "Screenshot", "input": "{}"}
CONVERSATIONS["images"] = [
    SYSTEM, user(text("what is this?"), PNG), said("anthropic", "claude-opus-4-5", AN_THINK, text("Let me look."), SHOT),
    user({"type": "toolResult", "toolUseId": "toolu_01Shot", "content": "the screen"}, PNG, BMP, text("and?")),
    said("anthropic", "claude-opus-4-5", text("a cat")), user(PNG),
    said("anthropic", "claude-opus-4-5", SHOT), user({"type": "toolResult", "toolUseId": "toolu_01Shot", "content": ""},
                                                     PNG, {"type": "image", "data": 5})]
AN_REASONING = [None, "none", "minimal", "low", "medium", "high", "xhigh", "max", 1024, 30000]
OA_REASONING = [None, "none", "minimal", "low", "medium", "high", "xhigh", "max"]
CACHES = ["5m", "1h", "off"]


def options(model, base, reasoning, cache, with_tools, max_tokens=None, dropped=()):
    o = providers.Options(model, base, api_key="k" * 20, reasoning=reasoning, cache=cache,
                          session_id="0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee", max_tokens=max_tokens,
                          tools=tools.schemas() if with_tools else None)
    o.dropped.update(dropped)
    return o


def assert_valid(body, tp):
    errors = check(body, tp)
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("name, reasoning, cache, with_tools",
                         [(n, r, c, t) for n, r, c, t in itertools.product(
                             CONVERSATIONS, AN_REASONING, CACHES, (False, True))])
def test_anthropic_requests(name, reasoning, cache, with_tools):
    opts = options(AN_MODEL, an.DEFAULT_BASE_URL, reasoning, cache, with_tools)
    _, _, body = an.build_request(CONVERSATIONS[name], opts)
    assert_valid(body, AN_TYPE)


@pytest.mark.parametrize("name, reasoning, cache, with_tools, max_tokens",
                         [(n, r, c, t, m) for n, r, c, t, m in itertools.product(
                             CONVERSATIONS, OA_REASONING, CACHES, (False, True), (None, 500))])
def test_openai_chat_requests(name, reasoning, cache, with_tools, max_tokens):
    for base in (oa.DEFAULT_BASE_URL, "http://127.0.0.1:8080/v1"):  # max_completion_tokens / max_tokens
        opts = options(OA_MODEL, base, reasoning, cache, with_tools, max_tokens)
        _, _, body = oa.build_request(CONVERSATIONS[name], opts)
        assert_valid(body, OA_TYPE)


@pytest.mark.parametrize("dropped", [{"adaptive"}, {"display"}, {"adaptive", "thinking"}, {"ttl"},
                                     {"cache_control"}, {"adaptive", "ttl", "cache_control"}])
def test_anthropic_requests_after_negotiation(dropped):
    for reasoning in ("minimal", "high", "max"):
        opts = options(AN_MODEL, an.DEFAULT_BASE_URL, reasoning, "1h", True, dropped=dropped)
        _, _, body = an.build_request(CONVERSATIONS["tool results"], opts)
        assert_valid(body, AN_TYPE)


@pytest.mark.parametrize("dropped", [{"stream_options"}, {"reasoning_effort"}, {"prompt_cache_key"},
                                     {"max_completion_tokens"}, set(oa._FIELDS)])
def test_openai_requests_after_negotiation(dropped):
    opts = options(OA_MODEL, oa.DEFAULT_BASE_URL, "high", "5m", True, max_tokens=100, dropped=dropped)
    _, _, body = oa.build_request(CONVERSATIONS["tool results"], opts)
    assert_valid(body, OA_TYPE)
    assert not (dropped - {"max_completion_tokens"}) & body.keys()


def test_the_forms_checked_are_the_ones_sent():
    """The matrix above covers each reasoning and cache form on the wire."""
    seen = set()
    for reasoning, cache in itertools.product(AN_REASONING, CACHES):
        _, _, body = an.build_request(CONVERSATIONS["plain"], options(AN_MODEL, "http://h", reasoning, cache, True))
        seen.add(("thinking", (body.get("thinking") or {}).get("type")))
        seen.add(("effort", (body.get("output_config") or {}).get("effort")))
        seen.add(("system", type(body["system"]).__name__))
        seen.add(("top cache", "cache_control" in body))
    assert {("thinking", t) for t in ("adaptive", "enabled", "disabled", None)} <= seen
    assert {("effort", e) for e in ("low", "medium", "high", "xhigh", "max")} <= seen
    assert {("system", "str"), ("system", "list"), ("top cache", True), ("top cache", False)} <= seen


# --- the checker itself is strict ---------------------------------------------------------

def test_the_checker_rejects_what_the_api_would():
    good = {"model": AN_MODEL, "max_tokens": 10, "stream": True, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    assert check(good, AN_TYPE) == []
    assert any("unknown key 'temperture'" in e for e in check(dict(good, temperture=1), AN_TYPE))
    assert any("missing required key 'max_tokens'" in e
               for e in check({k: v for k, v in good.items() if k != "max_tokens"}, AN_TYPE))
    assert check(dict(good, max_tokens=True), AN_TYPE)  # a boolean is not an integer
    assert check(dict(good, stream=False), AN_TYPE)     # the streaming type wants true
    assert check(dict(good, thinking={"type": "adaptive", "budget_tokens": 5}), AN_TYPE)
    assert check(dict(good, cache_control={"type": "ephemeral", "ttl": "2h"}), AN_TYPE)
    assert check(dict(good, output_config={"effort": "minimal"}), AN_TYPE)
    bad_block = dict(good, messages=[{"role": "user", "content": [{"type": "tool_result", "id": "x"}]}])
    assert check(bad_block, AN_TYPE)
    oa_good = {"model": OA_MODEL, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    assert check(oa_good, OA_TYPE) == []
    assert check(dict(oa_good, reasoning_effort="extreme"), OA_TYPE)
    assert check(dict(oa_good, stream_options={"include_usage": 1}), OA_TYPE)
    assert check(dict(oa_good, messages=[{"role": "tool", "content": "x"}]), OA_TYPE)  # no tool_call_id


def test_the_defaults_are_listed_and_not_deprecated():
    import typing

    from anthropic._data.deprecated_models import DEPRECATED_MODELS
    from anthropic.types.model_param import ModelParam
    from openai.types.shared import chat_model

    anthropic_ids = typing.get_args(typing.get_args(ModelParam)[0])
    assert AN_MODEL in anthropic_ids and AN_MODEL not in DEPRECATED_MODELS
    assert OA_MODEL in typing.get_args(chat_model.ChatModel)
    deprecated = chat_model.__doc__ or ""
    notes = open(chat_model.__file__, encoding="utf-8").read().split('"""Deprecated values:', 1)
    assert f'"{OA_MODEL}"' not in (notes[1] if len(notes) > 1 else deprecated)


# --- Responses ------------------------------------------------------------------------------

OR_REASONING = [None, "none", "minimal", "low", "high", "xhigh"]


@pytest.mark.parametrize("name, reasoning, cache, with_tools",
                         [(n, r, c, t) for n, r, c, t in itertools.product(
                             CONVERSATIONS, OR_REASONING, CACHES, (False, True))])
def test_openai_responses_requests(name, reasoning, cache, with_tools):
    """Valid against the SDK's type, and every input item names its type (the SDK's
    types leave it optional on messages; llama.cpp refuses an item without it)."""
    from openai.types.responses.response_create_params import ResponseCreateParamsStreaming

    from pantolib.providers import openai_responses as orr

    opts = options(OA_MODEL, oa.DEFAULT_BASE_URL, reasoning, cache, with_tools, max_tokens=300)
    _, _, body = orr.build_request(CONVERSATIONS[name], opts)
    assert_valid(body, ResponseCreateParamsStreaming)
    assert all(isinstance(item.get("type"), str) for item in body["input"]), body["input"]
    assert b'"api"' not in orjson.dumps(body)


@pytest.mark.parametrize("dropped", [{"include"}, {"reasoning"}, {"prompt_cache_key"},
                                     {"include", "reasoning", "prompt_cache_key"}])
def test_openai_responses_requests_after_negotiation(dropped):
    from openai.types.responses.response_create_params import ResponseCreateParamsStreaming

    from pantolib.providers import openai_responses as orr

    opts = options(OA_MODEL, oa.DEFAULT_BASE_URL, "high", "5m", True, dropped=dropped)
    _, _, body = orr.build_request(CONVERSATIONS["tool results"], opts)
    assert_valid(body, ResponseCreateParamsStreaming)
    assert not dropped & body.keys()


def test_the_api_field_never_reaches_the_wire():
    for name in ("api stamps across three APIs",):
        for mod, model in ((an, AN_MODEL), (oa, OA_MODEL)):
            _, _, body = mod.build_request(CONVERSATIONS[name], options(model, "http://h", "high", "1h", True))
            assert b'"api"' not in orjson.dumps(body)
