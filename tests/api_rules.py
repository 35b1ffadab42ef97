"""The rules each provider's API enforces on a conversation, checked on the
request bodies the scripted server received."""
import re

import orjson

ID_RE = re.compile(r"^[A-Za-z0-9_-]+$")


def valid_openai(body):
    """The rules chat completions enforces on a conversation."""
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    waiting = set()
    for i, m in enumerate(body["messages"]):
        role = m["role"]
        assert role in ("system", "user", "assistant", "tool"), m
        if waiting:
            assert role == "tool", f"message {i}: results missing for {waiting}"
            assert m["tool_call_id"] in waiting
            waiting.discard(m["tool_call_id"])
            assert isinstance(m["content"], str)
            continue
        assert role != "tool", f"message {i}: a tool message without a preceding tool call"
        if role == "assistant":
            assert "thinking" not in orjson.dumps(m).decode() or m.get("content")
            for c in m.get("tool_calls", []):
                assert c["type"] == "function" and isinstance(c["function"]["arguments"], str)
                orjson.loads(c["function"]["arguments"])
                waiting.add(c["id"])
            assert m.get("tool_calls") or m["content"] is not None
        else:
            assert m["content"], f"message {i}: empty {role} message"
    assert not waiting, f"results missing for {waiting}"
    assert body["messages"][-1]["role"] in ("user", "tool")


def valid_anthropic(body):
    """The rules the messages API enforces on a conversation."""
    assert body["stream"] is True and isinstance(body["max_tokens"], int)
    msgs = body["messages"]
    assert msgs and msgs[0]["role"] == "user" and msgs[-1]["role"] == "user"
    uses = set()
    for i, m in enumerate(msgs):
        assert m["role"] == ("user" if i % 2 == 0 else "assistant"), f"message {i}: roles must alternate"
        assert m["content"], f"message {i}: empty content"
        kinds = [b["type"] for b in m["content"]]
        if m["role"] == "user":
            results = [b for b in m["content"] if b["type"] == "tool_result"]
            assert kinds[:len(results)] == ["tool_result"] * len(results), "tool results must come first"
            assert {b["tool_use_id"] for b in results} == uses, f"message {i}: results do not match the uses"
            uses = set()
        else:
            uses = set()
            for b in m["content"]:
                assert b["type"] in ("text", "thinking", "redacted_thinking", "tool_use"), b
                if b["type"] == "text":
                    assert b["text"]
                if b["type"] == "thinking":
                    assert b["signature"]
                if b["type"] == "tool_use":
                    assert ID_RE.match(b["id"]) and isinstance(b["input"], dict)
                    uses.add(b["id"])
        for b in m["content"]:
            if b["type"] == "tool_result":
                assert ID_RE.match(b["tool_use_id"])

VALID = {"openai": valid_openai, "anthropic": valid_anthropic}
