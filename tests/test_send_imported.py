"""Continuing a session imported from another agent (SPEC 12, "Continuing"):
`panto-log replay ID | panto-send` on each wire API and `panto --resume ID`
send its history in that API's own form — images as the API takes them
(inside a tool's result where the API allows, else a note), the other
agent's tool calls and results with their names and ids, thinking only to
the model that wrote it, a branch summary never. The real console scripts
against the scripted servers on 127.0.0.1."""
import base64
import os

import orjson

import responses_server as R
import sse_server as S
from builders import jsonl, lines, session_file
from conftest import run, send
from repl_term import KEY, Term, read_entries

SID = "5f1c0d2e-9a8b-4c7d-8e6f-0a1b2c3d4e5f"      # the id Claude Code showed: a UUID, kept
OPUS = ("anthropic", "claude-opus-4-5")
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4).decode()
SHOT = base64.b64encode(b"\xff\xd8\xff\xe0" + b"\1" * 300).decode()
SUMMARY = "Tried the other branch: the cache key was wrong."


def imported(cwd):
    """A Claude Code session as panto-log import writes it."""
    def entry(eid, parent, message, **top):
        return {"type": "message", "id": eid, "parentId": parent, "timestamp": f"2026-04-25T14:00:0{eid[-1]}.000Z",
                **top, "message": message}

    stamp = {"provider": OPUS[0], "model": OPUS[1], "api": "anthropic_messages"}
    return jsonl(
        {"type": "session", "version": 1, "id": SID, "timestamp": "2026-04-25T14:00:00.000Z", "cwd": str(cwd),
         "source": {"agent": "claude-code", "path": f"/home/me/.claude/projects/-w/{SID}.jsonl", "id": SID}},
        entry("c0000001", None, {"role": "user", "content": [
            {"type": "text", "text": "why does this screen look broken?"},
            {"type": "image", "mediaType": "image/png", "data": PNG}]}, **stamp),
        entry("c0000002", "c0000001", {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Look at the file.", "signature": "EqQBCkYIBRgCKkD"},
            {"type": "text", "text": "Let me take a screenshot."},
            {"type": "toolUse", "id": "toolu_01XyZ", "name": "Screenshot", "input": '{"window":"main"}'}],
            "provider": OPUS[0], "model": OPUS[1], "stopReason": "toolUse", "usage": {"input": 900, "output": 40}}),
        entry("c0000003", "c0000002", {"role": "user", "content": [
            {"type": "toolResult", "toolUseId": "toolu_01XyZ", "content": "captured main"},
            {"type": "image", "mediaType": "image/jpeg", "data": SHOT}]}, **stamp),
        {"type": "branchSummary", "id": "c0000004", "parentId": "c0000003", "timestamp": "2026-04-25T14:00:04.000Z",
         "summary": SUMMARY, "fromId": "c0000002"},
        entry("c0000005", "c0000004", {"role": "assistant", "content": [{"type": "text", "text": "The header overlaps."}],
                                       "provider": OPUS[0], "model": OPUS[1], "stopReason": "stop"},
              billedIn="0199aaaa-0000-7000-8000-0000000000aa"),
    )


def replayed(isolated):
    session_file(isolated, SID, data=imported(isolated))
    p = run(["panto-log", "replay", SID[:4]])
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_on_anthropic_images_go_in_its_own_form_and_the_same_model_gets_its_thinking(isolated, srv):
    stream = replayed(isolated)
    srv.push(S.anthropic_text("fixed"))
    p = send(srv, "-p", "anthropic", "-m", OPUS[1], "and now?", input=stream)
    assert p.returncode == 0, p.stderr
    msgs = srv.requests[-1].body["messages"]
    assert msgs[0]["content"] == [{"type": "text", "text": "why does this screen look broken?"},
                                  {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                               "data": PNG}}]
    assert msgs[1]["content"] == [{"type": "thinking", "thinking": "Look at the file.", "signature": "EqQBCkYIBRgCKkD"},
                                  {"type": "text", "text": "Let me take a screenshot."},
                                  {"type": "tool_use", "id": "toolu_01XyZ", "name": "Screenshot",
                                   "input": {"window": "main"}}]
    assert msgs[2]["content"] == [{"type": "tool_result", "tool_use_id": "toolu_01XyZ", "content": [
        {"type": "text", "text": "captured main"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": SHOT}}]}]
    assert msgs[3]["content"] == [{"type": "text", "text": "The header overlaps."}]
    assert msgs[4]["content"] == [{"type": "text", "text": "and now?"}]
    assert SUMMARY.encode() not in srv.requests[-1].raw
    assert lines(p.stdout)[-1]["message"]["content"] == [{"type": "text", "text": "fixed"}]


def test_on_another_anthropic_model_its_thinking_is_left_out(isolated, srv):
    srv.push(S.anthropic_text("fixed"))
    p = send(srv, "-p", "anthropic", "-m", "claude-sonnet-5-5", "and now?", input=replayed(isolated))
    assert p.returncode == 0, p.stderr
    msgs = srv.requests[-1].body["messages"]
    assert [b["type"] for b in msgs[1]["content"]] == ["text", "tool_use"]


def test_on_openai_chat_images_are_data_urls_and_a_tools_image_a_note(isolated, srv):
    srv.push(S.openai_text("fixed"))
    p = send(srv, "-p", "openai", "-m", "gpt-4o", "and now?", input=replayed(isolated))
    assert p.returncode == 0, p.stderr
    msgs = srv.requests[-1].body["messages"]
    assert msgs[0] == {"role": "user", "content": [
        {"type": "text", "text": "why does this screen look broken?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]}
    assert msgs[1]["tool_calls"] == [{"id": "toolu_01XyZ", "type": "function",
                                      "function": {"name": "Screenshot", "arguments": '{"window":"main"}'}}]
    assert "thinking" not in orjson.dumps(msgs[1]).decode() and "Look at the file" not in str(msgs)
    assert msgs[2] == {"role": "tool", "tool_call_id": "toolu_01XyZ", "content":
                       "captured main\n[image: image/jpeg, 304 bytes; not sent: this API takes no images in "
                       "tool results]"}
    assert msgs[3] == {"role": "assistant", "content": "The header overlaps."}
    assert SHOT not in srv.requests[-1].raw.decode() and SUMMARY not in srv.requests[-1].raw.decode()


def test_on_openai_responses_images_are_input_images_in_messages_and_tool_outputs(isolated, srv):
    srv.push(R.text("fixed"))
    p = send(srv, "--api", "openai_responses", "-m", "gpt-test", "and now?", input=replayed(isolated))
    assert p.returncode == 0, p.stderr
    items = srv.requests[-1].body["input"]
    assert items[0] == {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "why does this screen look broken?"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"}]}
    calls = [i for i in items if i["type"] in ("function_call", "function_call_output")]
    assert calls == [{"type": "function_call", "call_id": "toolu_01XyZ", "name": "Screenshot",
                      "arguments": '{"window":"main"}'},
                     {"type": "function_call_output", "call_id": "toolu_01XyZ", "output": [
                         {"type": "input_text", "text": "captured main"},
                         {"type": "input_image", "image_url": f"data:image/jpeg;base64,{SHOT}", "detail": "auto"}]}]
    assert not any(i["type"] == "reasoning" for i in items)
    assert SUMMARY.encode() not in srv.requests[-1].raw


def test_resume_by_the_other_agents_id_goes_on_with_the_images(isolated, srv, tmp_path):
    path = session_file(isolated, SID, data=imported(isolated))
    env = dict(os.environ, ANTHROPIC_BASE_URL=srv.url, ANTHROPIC_API_KEY=KEY, OPENAI_API_KEY=KEY,
               OPENAI_BASE_URL=srv.url + "/v1", TERM="dumb")
    srv.push(S.anthropic_text("it is fixed now"))
    t = Term(["--resume", SID[:4], "--no-tools"], env)
    t.expect(f"resumed session {SID}")
    t.expect("[image: image/png, 1 KB]")           # the prompt's image, shown by type and size
    t.expect("captured main")
    t.expect("[image: image/jpeg, 304 bytes]")     # the one the tool returned
    t.expect("The header overlaps.")
    t.expect("> ")
    t.turn("is it fixed?", "it is fixed now")
    assert t.quit() == 0
    body = srv.requests[-1].body
    assert body["model"] == OPUS[1]
    assert body["messages"][0]["content"][1]["source"]["data"] == PNG
    assert body["messages"][2]["content"][0]["content"][1]["source"]["media_type"] == "image/jpeg"
    entries = read_entries(path)
    assert [e["id"] for e in entries[:5]] == ["c0000001", "c0000002", "c0000003", "c0000004", "c0000005"]
    new = entries[5:]
    assert new[0]["parentId"] == "c0000005" and new[0]["message"]["content"] == [
        {"type": "text", "text": "is it fixed?"}]
    assert new[1]["message"]["content"] == [{"type": "text", "text": "it is fixed now"}]
