"""panto-log import of Claude Code transcripts (SPEC §12): real files, the real console script."""
import os

import orjson
import pytest
from builders import lines
from conftest import assert_clean_error, log, run
from fixtures.records import (CC_SID, cc_assistant, cc_common, cc_session, cc_text, cc_usage, cc_user,
                              write)

from pantolib.agents import claude_code


def imported(path, *extra):
    p = log("import", *extra, str(path))
    assert p.returncode == 0, p.stderr
    return p


def entries(path):
    return [o for o in lines(imported(path).stdout) if o["type"] != "session"]


def test_split_lines_are_one_entry_with_the_largest_usage(tmp_path):
    f = write(tmp_path / "s.jsonl", [
        cc_user("u1", None, "hello"),
        cc_assistant("a1", "u1", "msg_1", [{"type": "thinking", "thinking": "hm", "signature": "SIG"}],
                     cc_usage(10, 1, 5, 100, 40), stop=None),
        cc_assistant("a2", "a1", "msg_1", [cc_text("looking")], cc_usage(10, 3, 5, 100, 40), stop=None),
        cc_assistant("a3", "a2", "msg_1", [{"type": "tool_use", "id": "tu1", "name": "Bash",
                                             "input": {"command": "ls"}}], cc_usage(10, 50, 5, 100, 40),
                     stop="tool_use"),
        cc_user("u2", "a3", [{"type": "tool_result", "tool_use_id": "tu1", "content": [
            {"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "is_error": True}]),
    ])
    out = lines(imported(f).stdout)
    head, user, reply, result = out
    assert head["source"] == {"agent": "claude-code", "path": str(f), "id": CC_SID}
    assert head["cwd"] == "/home/u/proj" and head["timestamp"] == "2025-06-01T10:00:00.000Z"
    m = reply["message"]
    assert [b["type"] for b in m["content"]] == ["thinking", "text", "toolUse"]
    assert m["content"][0]["signature"] == "SIG"
    assert m["content"][2] == {"type": "toolUse", "id": "tu1", "name": "Bash", "input": '{"command":"ls"}'}
    assert m["usage"] == {"input": 10, "output": 50, "cacheRead": 5, "cacheWrite": 100, "cacheWrite1h": 40}
    assert (m["provider"], m["model"], m["api"], m["stopReason"]) == \
        ("anthropic", "claude-sonnet-4-5", "anthropic_messages", "toolUse")
    assert reply["parentId"] == user["id"] and result["parentId"] == reply["id"]
    assert result["message"]["content"] == [{"type": "toolResult", "toolUseId": "tu1", "content": "a\nb",
                                             "isError": True}]
    assert result["model"] == "claude-sonnet-4-5" and result["api"] == "anthropic_messages"
    assert all(len(o["id"]) == 8 and int(o["id"], 16) >= 0 for o in out[1:])


def test_the_same_file_gives_the_same_bytes_and_a_grown_one_the_old_output_as_prefix(tmp_path):
    f = tmp_path / f"{CC_SID}.jsonl"
    write(f, cc_session(n=3))
    first = imported(f).stdout
    assert imported(f).stdout == first
    assert lines(first)[0]["id"] == CC_SID
    write(f, cc_session(n=2, start=3)[:], mode="ab")
    grown = imported(f).stdout
    assert grown.startswith(first) and len(lines(grown)) == len(lines(first)) + 4


def test_import_into_append_creates_the_session_and_again_adds_nothing(tmp_path):
    f = write(tmp_path / f"{CC_SID}.jsonl", cc_session(n=2))
    out = imported(f).stdout
    a = log("append", input=out)
    assert a.returncode == 0, a.stderr
    path = os.path.join(os.environ["PANTO_SESSION_DIR"], "--home-u-proj--", f"{CC_SID}.jsonl")
    with open(path, "rb") as g:
        assert g.read() == out
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    again = log("append", input=imported(f).stdout)
    assert again.returncode == 0
    with open(path, "rb") as g:
        assert g.read() == out


def test_a_reply_still_streaming_waits_for_the_next_run(tmp_path):
    f = tmp_path / "s.jsonl"
    recs = [cc_user("u1", None, "hi"),
            cc_assistant("a1", "u1", "msg_1", [cc_text("part")], stop=None)]
    write(f, recs)
    assert [e["message"]["role"] for e in entries(f)] == ["user"]
    with open(f, "ab") as g:        # the next line, half written
        g.write(orjson.dumps(cc_assistant("a2", "a1", "msg_1", [cc_text("rest")], stop="end_turn"))[:40])
    assert [e["message"]["role"] for e in entries(f)] == ["user"]
    write(f, recs + [cc_assistant("a2", "a1", "msg_1", [cc_text("rest")], stop="end_turn")])
    roles = entries(f)
    assert [e["message"]["role"] for e in roles] == ["user", "assistant"]
    assert [b["text"] for b in roles[1]["message"]["content"]] == ["part", "rest"]
    # a line without stop_reason is complete; so is a reply a later record follows
    g = write(tmp_path / "t.jsonl", [cc_user("u1", None, "hi"),
                                     cc_assistant("a1", "u1", "msg_1", [cc_text("x")], stop=None),
                                     {"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}])
    assert [e["message"]["role"] for e in entries(g)] == ["user", "assistant"]


def test_reading_on_from_any_end_gives_what_one_run_gives(tmp_path):
    """The determinism contract: runs that stop at any `end` and go on with
    the state yield the one-run sequence; a torn tail at every byte too."""
    recs = [{"type": "summary", "summary": "Generated", "leafUuid": "11111111-b1"},
            *cc_session(n=2),
            {**cc_common("c1", None, "2025-06-01T11:00:00.000Z", logicalParentUuid="11111111-b1",
                         subtype="compact_boundary"), "type": "system", "content": "Conversation compacted"},
            cc_user("c2", "c1", "Summary of it all", ts="2025-06-01T11:00:01.000Z", isCompactSummary=True),
            {"type": "custom-title", "customTitle": "Mine", "sessionId": CC_SID},
            *cc_session(n=1, start=5)]
    recs[-3]["parentUuid"] = "c2"
    part = tmp_path / "s.jsonl"
    write(part, recs)
    data = part.read_bytes()
    one = list(claude_code.Reader(str(part)))
    cuts = sorted({i for i in range(0, len(data), 37)} | {i + 1 for i, c in enumerate(data) if c == 10})
    for cut in cuts:
        part.write_bytes(data[:cut])
        r1 = claude_code.Reader(str(part))
        got = list(r1)
        part.write_bytes(data)
        r2 = claude_code.Reader(str(part), r1.end, orjson.loads(orjson.dumps(r1.state)))
        got += list(r2)
        assert got == one, cut
    kinds = [e["type"] for e in one]
    assert kinds.count("compaction") == 1 and kinds.count("sessionInfo") == 2


def test_compaction_links_to_its_logical_parent(tmp_path):
    f = write(tmp_path / "s.jsonl", [
        cc_user("u1", None, "hi"),
        cc_assistant("a1", "u1", "msg_1", [cc_text("yo")]),
        {**cc_common("c1", None, "2025-06-01T11:00:00.000Z", logicalParentUuid="a1", subtype="compact_boundary",
                     compactMetadata={"trigger": "auto", "preTokens": 150000}),
         "type": "system", "content": "Conversation compacted"},
        cc_user("c2", "c1", "This session is being continued. Summary: greetings", isCompactSummary=True),
        cc_user("u3", "c2", "go on"),
        cc_assistant("a3", "u3", "msg_3", [cc_text("ok")], rid="req_3"),
    ])
    e = entries(f)
    comp = e[2]
    assert comp["type"] == "compaction" and comp["parentId"] == e[1]["id"]
    assert comp["summary"].endswith("greetings") and comp["firstKeptId"] is None and "usage" not in comp
    assert e[3]["parentId"] == comp["id"]
    assert [x["type"] for x in e] == ["message", "message", "compaction", "message", "message"]
    # Claude Code records no usage for the summary's request: not a turn (SPEC §12)
    assert comp["usageNotRecorded"] is True
    p = run(["panto-cost", "--json"], input=imported(f).stdout)
    assert p.returncode == 0, p.stderr
    assert sum(m["turns"] for m in orjson.loads(p.stdout)["models"]) == 2


def test_a_sub_agent_names_its_parent_session(tmp_path):
    sub = tmp_path / CC_SID / "subagents" / "agent-a1b2c3.jsonl"
    write(sub, [cc_user("s1", None, "Warmup", isSidechain=True, agentId="a1b2c3"),
                cc_assistant("s2", "s1", "msg_s", [cc_text("ready")], isSidechain=True, agentId="a1b2c3")])
    head = lines(imported(sub).stdout)[0]
    assert head["relation"] == "subagent" and head["parentSession"] == CC_SID
    assert head["source"]["id"] == "a1b2c3"
    import uuid
    assert head["id"] == str(uuid.uuid5(uuid.NAMESPACE_URL, "claude-code:a1b2c3"))


def test_synthetic_replies_cost_nothing_and_repeats_in_one_file_are_billed_once(tmp_path):
    f = write(tmp_path / "s.jsonl", [
        cc_user("u1", None, "hi"),
        cc_assistant("a1", "u1", "msg_syn", [cc_text("No response requested.")], model="<synthetic>"),
        cc_user("u2", "a1", "again"),
        cc_assistant("a2", "u2", "msg_2", [cc_text("x")], cc_usage(7, 8), rid="r2"),
        cc_user("u3", "a2", "more"),
        cc_assistant("a3", "u3", "msg_2", [cc_text("x")], cc_usage(7, 8), rid="r2"),
    ])
    out = lines(imported(f).stdout)
    replies = [o["message"] for o in out[1:] if o["message"]["role"] == "assistant"]
    assert replies[0]["usage"] == {"input": 0, "output": 0} and replies[0]["model"] == "<synthetic>"
    assert replies[1]["usage"] == {"input": 7, "output": 8}
    assert "usage" not in replies[2]
    assert [o.get("billedIn") for o in out[1:] if o["message"]["role"] == "assistant"] == [None, None, out[0]["id"]]


def test_a_persons_title_wins_over_generated_ones_whatever_their_order(tmp_path):
    f = write(tmp_path / "s.jsonl", [
        cc_user("u1", None, "hi"),
        {"type": "custom-title", "customTitle": "My title", "sessionId": CC_SID},
        cc_assistant("a1", "u1", "msg_1", [cc_text("yo")]),
        {"type": "ai-title", "aiTitle": "Greeting exchange", "sessionId": CC_SID},
        {"type": "summary", "summary": "Generated summary", "leafUuid": "a1"},
    ])
    names = [e["name"] for e in entries(f) if e["type"] == "sessionInfo"]
    assert names == ["My title"]
    g = write(tmp_path / "t.jsonl", [
        cc_user("u1", None, "hi"),
        {"type": "ai-title", "aiTitle": "Generated", "sessionId": CC_SID},
        cc_assistant("a1", "u1", "msg_1", [cc_text("yo")]),
        {"type": "custom-title", "customTitle": "Mine", "sessionId": CC_SID},
        {"type": "ai-title", "aiTitle": "Generated again", "sessionId": CC_SID},
    ])
    assert [e["name"] for e in entries(g) if e["type"] == "sessionInfo"][-1] == "Mine"


def test_images_and_the_chain_through_records_left_out(tmp_path):
    img = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
    f = write(tmp_path / "s.jsonl", [
        cc_user("u1", None, [{"type": "text", "text": "what is this"}, {"type": "image", "source": img}]),
        {**cc_common("p1", "u1", "2025-06-01T10:00:00.500Z"), "type": "progress", "data": {"x": 1}},
        cc_assistant("a1", "p1", "msg_1", [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}],
                     stop="tool_use"),
        cc_user("u2", "a1", [{"type": "tool_result", "tool_use_id": "t1",
                              "content": [{"type": "image", "source": img}]}]),
    ])
    e = entries(f)
    assert e[0]["message"]["content"][1] == {"type": "image", "mediaType": "image/png", "data": "iVBORw0KGgo="}
    assert e[1]["parentId"] == e[0]["id"]      # through the progress record
    assert e[2]["message"]["content"] == [{"type": "toolResult", "toolUseId": "t1", "content": ""},
                                          {"type": "image", "mediaType": "image/png", "data": "iVBORw0KGgo="}]


def test_malformed_lines_are_skipped_and_counted(tmp_path):
    f = tmp_path / "s.jsonl"
    write(f, [cc_user("u1", None, "hi"), b"{not json\n", cc_assistant("a1", "u1", "m", [cc_text("x")])])
    p = imported(f)
    assert len(lines(p.stdout)) == 3
    assert b"1 malformed line skipped" in p.stderr
    p = imported(f, "-v")
    assert f"{f}:2: not valid JSON".encode() in p.stderr


@pytest.mark.parametrize("data", [b"hello\nworld\n", b"", b'{"type":"session","version":1}\n'])
def test_a_file_of_no_known_format_is_refused(tmp_path, data):
    f = tmp_path / "x.jsonl"
    f.write_bytes(data)
    p = log("import", str(f))
    assert_clean_error(p, 1, "panto-log")
    assert f"{f}: not a session file of claude-code, codex, pi or opencode".encode() in p.stderr
    assert p.stdout == b""


def test_missing_file_and_bad_usage(tmp_path):
    assert_clean_error(log("import", str(tmp_path / "nope.jsonl")), 1, "panto-log")
    assert log("import", "--from=vim", str(tmp_path)).returncode == 1
    assert log("import", "--all", "--session=x").returncode == 2
