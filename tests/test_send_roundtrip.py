"""Whole turns through the pipelines of SPEC §1: panto-send | panto-tool |
panto-send | panto-log append, then replay into the next request, for both
providers, and a session switched from one provider to the other and back.
Every request the server receives is checked against the API's rules."""
import subprocess

import orjson
import pytest

import sse_server as S
from api_rules import VALID
from conftest import env_for


def tool_turn(provider):
    if provider == "openai":
        return S.openai_tools([("call_rt1", "bash", '{"command": "ls"}')], text="Looking.",
                              usage={"prompt_tokens": 50, "completion_tokens": 10})
    return S.anthropic_tool("toolu_rt1", "bash", '{"command": "ls"}', text="Looking.", thinking="list it",
                            signature="SIGRT", start_usage={"input_tokens": 50}, end_usage={"output_tokens": 10})


def text_turn(provider, text):
    if provider == "openai":
        return S.openai_text(text, usage={"prompt_tokens": 80, "completion_tokens": 5})
    return S.anthropic_text(text, {"input_tokens": 80, "output_tokens": 1}, {"output_tokens": 5})


def sh(srv, cmd, provider):
    style = {"openai": "openai_chat", "anthropic": "anthropic_messages"}[provider]
    p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, timeout=60,
                       env=env_for(srv, PANTO_API_STYLE=style))
    assert p.returncode == 0, (cmd, p.stderr)
    return p


def replay(srv, provider):
    out = sh(srv, "panto-log replay --last", provider).stdout
    return [orjson.loads(x) for x in out.split(b"\n") if x]


@pytest.mark.parametrize("first,other", [("openai", "anthropic"), ("anthropic", "openai")])
def test_tool_turn_round_trip_and_provider_switch(srv, isolated, first, other):
    (isolated / "notes.txt").write_text("hello\n")
    srv.push(tool_turn(first), text_turn(first, "There is notes.txt."))
    sh(srv, 'panto-send --tools "what is here?" </dev/null | panto-tool --yes --quiet '
            '| panto-send --tools | panto-log append >/dev/null', first)
    assert len(srv.requests) == 2
    for r in srv.requests:
        VALID[first](r.body)

    entries = replay(srv, first)
    assert entries[0]["type"] == "session"
    roles = [e["message"]["role"] for e in entries[1:]]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    tool_use = entries[3]["message"]["content"][-1]
    result = entries[4]["message"]["content"][0]
    assert tool_use["type"] == "toolUse" and result["toolUseId"] == tool_use["id"]
    assert "notes.txt" in result["content"]
    assert entries[3]["message"]["stopReason"] == "toolUse" and entries[5]["message"]["stopReason"] == "stop"
    assert all(e["message"].get("usage") for e in entries if e.get("message", {}).get("role") == "assistant"
               and e["message"]["role"] == "assistant")
    assert (entries[4]["provider"], entries[2]["provider"]) == (first, first)

    # replayed, the session makes a valid next request with the tool history in it
    srv.push(text_turn(first, "Yes."))
    sh(srv, 'panto-log replay --last | panto-send --tools "anything else?" | panto-log append >/dev/null', first)
    body = srv.requests[-1].body
    VALID[first](body)
    assert orjson.dumps(body).count(tool_use["id"].encode()) >= 2

    # the same session continued on the other provider, then back again
    srv.push(text_turn(other, "Switched."), text_turn(first, "Back."))
    sh(srv, f'panto-log replay --last | panto-send -p {other} "your turn" | panto-log append >/dev/null', first)
    VALID[other](srv.requests[-1].body)
    sh(srv, f'panto-log replay --last | panto-send -p {first} "and back" | panto-log append >/dev/null', other)
    back = srv.requests[-1].body
    VALID[first](back)
    if first == "anthropic":  # the signed thinking survived the OpenAI detour
        assert {"type": "thinking", "thinking": "list it", "signature": "SIGRT"} in back["messages"][1]["content"]

    entries = replay(srv, first)
    stamps = [(e["provider"], e["model"]) for e in entries if e.get("message", {}).get("role") == "user"]
    assert [s[0] for s in stamps] == [first, first, first, other, first]
    replies = [e["message"] for e in entries if e.get("message", {}).get("role") == "assistant"]
    assert [m["provider"] for m in replies] == [first, first, first, other, first]
    assert len(srv.requests) == 5
