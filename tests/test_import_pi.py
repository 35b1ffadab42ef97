"""pi's session files as panto entries (pantolib.agents.pi): every header
version, the mapping of each record kind, usage as written, and reading on
from where a run stopped giving what one run gives."""
import os
import re

import orjson
import pytest

from builders import jsonl
from pantolib.agents import pi
from pantolib import stream
from pantolib.errors import SessionError

SID = "0b5b1c2e-1111-4222-8333-444455556666"
PARENT = "7d1e0c9a-aaaa-4bbb-8ccc-dddddddddddd"
T0 = 1767348000000      # 2026-01-02T10:00:00.000Z


def ts(s):
    return f"2026-01-02T10:00:{s:02d}.000Z"


def usage(i, o, cr=0, cw=0, **extra):
    return {"input": i, "output": o, "cacheRead": cr, "cacheWrite": cw, "totalTokens": i + o + cr + cw,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0.001}, **extra}


def rec(kind, eid, parent, s, **fields):
    return {"type": kind, "id": eid, "parentId": parent, "timestamp": ts(s), **fields}


def msg(eid, parent, s, **message):
    return rec("message", eid, parent, s, message={**message, "timestamp": T0 + s * 1000})


def assistant(eid, parent, s, content, u, stop="stop", model="claude-sonnet-4-5", provider="anthropic",
              api="anthropic-messages"):
    return msg(eid, parent, s, role="assistant", content=content, api=api, provider=provider, model=model,
               usage=u, stopReason=stop)


PNG = "iVBORw0KGgo="

# A version 3 session with every kind of record pi writes.
V3 = [
    {"type": "session", "version": 3, "id": SID, "timestamp": ts(0), "cwd": "/proj"},
    rec("model_change", "a0000001", None, 0, provider="anthropic", modelId="claude-sonnet-4-5"),
    rec("thinking_level_change", "a0000002", "a0000001", 0, thinkingLevel="high"),
    msg("a0000003", "a0000002", 1, role="user", content="list the files"),
    assistant("a0000004", "a0000003", 2,
              [{"type": "thinking", "thinking": "let me look", "thinkingSignature": "c2ln"},
               {"type": "text", "text": "Looking."},
               {"type": "toolCall", "id": "toolu_1", "name": "bash", "arguments": {"command": "ls"}}],
              usage(10, 5, 100, 20), stop="toolUse"),
    msg("a0000005", "a0000004", 3, role="toolResult", toolCallId="toolu_1", toolName="bash",
        content=[{"type": "text", "text": "a.txt"}, {"type": "text", "text": "b.png"},
                 {"type": "image", "data": PNG, "mimeType": "image/png"}], isError=False),
    assistant("a0000006", "a0000005", 4, [{"type": "text", "text": "Two files."}], usage(3, 4, 130)),
    rec("label", "a0000007", "a0000006", 5, targetId="a0000003", label="start"),
    rec("custom", "a0000008", "a0000007", 5, customType="ext", data={"n": 1}),
    msg("a0000009", "a0000008", 6, role="bashExecution", command="pwd", output="/proj", exitCode=0,
        cancelled=False, truncated=False),
    msg("a000000a", "a0000009", 6, role="bashExecution", command="secret", output="x", exitCode=0,
        cancelled=False, truncated=False, excludeFromContext=True),
    rec("custom_message", "a000000b", "a000000a", 7, customType="ext", content="injected", display=True),
    rec("compaction", "a000000c", "a000000b", 8, summary="We listed files.", firstKeptEntryId="a0000006",
        tokensBefore=50000),
    msg("a000000d", "a000000c", 9, role="user", content=[{"type": "text", "text": "and now?"},
                                                          {"type": "image", "data": PNG, "mimeType": "image/png"}]),
    rec("model_change", "a000000e", "a000000d", 9, provider="openai", modelId="gpt-5"),
    assistant("a000000f", "a000000e", 10,
              [{"type": "thinking", "thinking": "ok", "thinkingSignature": orjson.dumps(
                  {"type": "reasoning", "id": "rs_1", "encrypted_content": "ENC", "summary": []}).decode()},
               {"type": "text", "text": "Done."}],
              usage(50, 30, 0, 0, reasoning=20), provider="openai", model="gpt-5", api="openai-responses"),
    # a branch from the first answer, with its summary of the branch left
    rec("branch_summary", "a0000010", "a0000004", 11, fromId="a000000f", summary="Tried more.",
        usage=usage(7, 8)),
    rec("session_info", "a0000011", "a0000010", 12, name="Listing files"),
    assistant("a0000012", "a0000011", 13, [], usage(1, 0), stop="aborted"),
]

H = {"type": "session", "version": 1, "id": SID, "timestamp": ts(0), "cwd": "/proj"}


def stamped(provider, model, api=None):
    return {"provider": provider, "model": model, **({"api": api} if api else {})}


def expected_v3(path):
    """V3 in panto's words, ids named E1, E2... in the order they appear."""
    sonnet = stamped("anthropic", "claude-sonnet-4-5", "anthropic_messages")
    return [
        {**H, "source": {"agent": "pi", "path": str(path), "id": SID}},
        {"type": "message", "id": "E1", "parentId": None, "timestamp": ts(1),
         "provider": "anthropic", "model": "claude-sonnet-4-5",
         "message": {"role": "user", "content": [{"type": "text", "text": "list the files"}]}},
        {"type": "message", "id": "E2", "parentId": "E1", "timestamp": ts(2),
         "message": {"role": "assistant", "content": [
             {"type": "thinking", "thinking": "let me look", "signature": "c2ln"},
             {"type": "text", "text": "Looking."},
             {"type": "toolUse", "id": "toolu_1", "name": "bash", "input": '{"command":"ls"}'}],
             "provider": "anthropic", "model": "claude-sonnet-4-5", "api": "anthropic_messages",
             "stopReason": "toolUse", "usage": {"input": 10, "output": 5, "cacheRead": 100, "cacheWrite": 20}},
         "_billing": ["pi", T0 + 2000, "anthropic", "claude-sonnet-4-5", 10, 5, 100, 20]},
        {"type": "message", "id": "E3", "parentId": "E2", "timestamp": ts(3), **sonnet,
         "message": {"role": "user", "content": [
             {"type": "toolResult", "toolUseId": "toolu_1", "content": "a.txt\nb.png"},
             {"type": "image", "mediaType": "image/png", "data": PNG}]}},
        {"type": "message", "id": "E4", "parentId": "E3", "timestamp": ts(4),
         "message": {"role": "assistant", "content": [{"type": "text", "text": "Two files."}],
                     "provider": "anthropic", "model": "claude-sonnet-4-5", "api": "anthropic_messages",
                     "stopReason": "stop", "usage": {"input": 3, "output": 4, "cacheRead": 130}},
         "_billing": ["pi", T0 + 4000, "anthropic", "claude-sonnet-4-5", 3, 4, 130, 0]},
        {"type": "message", "id": "E5", "parentId": "E4", "timestamp": ts(6), **sonnet,
         "message": {"role": "user", "content": [{"type": "text", "text": "Ran `pwd`\n```\n/proj\n```"}]}},
        {"type": "message", "id": "E6", "parentId": "E5", "timestamp": ts(7), **sonnet,
         "message": {"role": "user", "content": [{"type": "text", "text": "injected"}]}},
        {"type": "compaction", "id": "E7", "parentId": "E6", "timestamp": ts(8), "summary": "We listed files.",
         "firstKeptId": "E4", "provider": "anthropic", "model": "claude-sonnet-4-5", "usageNotRecorded": True},
        {"type": "message", "id": "E8", "parentId": "E7", "timestamp": ts(9), **sonnet,
         "message": {"role": "user", "content": [{"type": "text", "text": "and now?"},
                                                 {"type": "image", "mediaType": "image/png", "data": PNG}]}},
        {"type": "message", "id": "E9", "parentId": "E8", "timestamp": ts(10),
         "message": {"role": "assistant", "content": [
             {"type": "thinking", "thinking": "ok", "signature": "ENC", "itemId": "rs_1"},
             {"type": "text", "text": "Done."}],
             "provider": "openai", "model": "gpt-5", "api": "openai_responses", "stopReason": "stop",
             "usage": {"input": 50, "output": 30, "reasoning": 20}},
         "_billing": ["pi", T0 + 10000, "openai", "gpt-5", 50, 30, 0, 0]},
        {"type": "branchSummary", "id": "E10", "parentId": "E2", "timestamp": ts(11), "summary": "Tried more.",
         "fromId": "E9", "provider": "openai", "model": "gpt-5", "usage": {"input": 7, "output": 8},
         "_billing": ["pi", "branch_summary", ts(11), "Tried more."]},
        {"type": "sessionInfo", "id": "E11", "parentId": "E10", "timestamp": ts(12), "name": "Listing files"},
        {"type": "message", "id": "E12", "parentId": "E11", "timestamp": ts(13),
         "message": {"role": "assistant", "content": [], "provider": "anthropic", "model": "claude-sonnet-4-5",
                     "api": "anthropic_messages", "stopReason": "aborted", "usage": {"input": 1, "output": 0}},
         "_billing": ["pi", T0 + 13000, "anthropic", "claude-sonnet-4-5", 1, 0, 0, 0]},
    ]


def named(out):
    """Entry ids (and the ids entries name) replaced by E1, E2... in order of appearance."""
    names = {}
    for e in out[1:]:
        names[e["id"]] = f"E{len(names) + 1}"
    result = []
    for e in out:
        e = dict(e)
        for key in ("id", "parentId", "firstKeptId", "fromId"):
            if e.get(key) is not None and e["type"] != "session":
                e[key] = names[e[key]]
        result.append(e)
    return result


def write(path, records, tail=b""):
    path.write_bytes(jsonl(*records) + tail)
    return path


def read_all(path, start=0, state=None):
    """A run of the Reader; every line it gives is a valid panto line (stream.py's rule)."""
    r = pi.Reader(str(path), start, state)
    out = list(r)
    for e in out:
        stream.parse_line(orjson.dumps({k: v for k, v in e.items() if k != "_billing"}) + b"\n")
    return out, r


def test_version_3_every_record_kind(tmp_path):
    path = write(tmp_path / "2026-01-02T10-00-00-000Z_s.jsonl", V3)
    out, r = read_all(path)
    assert named(out) == expected_v3(path)
    assert all(re.fullmatch(r"[0-9a-f]{8}", e["id"]) for e in out[1:])
    assert len({e["id"] for e in out[1:]}) == len(out) - 1
    assert r.skipped == {"model_change": 2, "thinking_level_change": 1, "label": 1, "custom": 1,
                         "message:bashExecution": 1}
    assert r.bad == []
    assert r.end == path.stat().st_size


def test_same_ids_every_run_and_state_is_json(tmp_path):
    path = write(tmp_path / "s.jsonl", V3)
    first, r1 = read_all(path)
    second, r2 = read_all(path)
    assert orjson.dumps(first) == orjson.dumps(second)
    assert orjson.loads(orjson.dumps(r1.state)) == r2.state


def test_reading_on_from_every_line_gives_one_run(tmp_path):
    """The file grows a line at a time; each run reads on from the last
    run's end and state (through JSON): together they give what one run gives."""
    whole = write(tmp_path / "whole.jsonl", V3)
    once, _ = read_all(whole)
    grown = tmp_path / "grown.jsonl"
    grown.write_bytes(b"")
    out, start, state = [], 0, None
    for line in jsonl(*V3).split(b"\n")[:-1]:
        with open(grown, "ab") as f:
            f.write(line + b"\n")
        part, r = read_all(grown, start, state)
        out += part
        start, state = r.end, orjson.loads(orjson.dumps(r.state))
    assert [{**e, "source": None} if e["type"] == "session" else e for e in out] == \
           [{**e, "source": None} if e["type"] == "session" else e for e in once]


@pytest.mark.parametrize("cut", [1, 17, 40])
def test_a_line_still_being_written_waits(tmp_path, cut):
    last = jsonl(V3[6])
    path = write(tmp_path / "s.jsonl", V3[:6], tail=last[:cut])
    out, r = read_all(path)
    assert [e["timestamp"] for e in out[1:]] == [ts(1), ts(2), ts(3)]
    assert r.end == len(jsonl(*V3[:6])) and r.bad == []
    with open(path, "ab") as f:
        f.write(last[cut:])
    more, r2 = read_all(path, r.end, r.state)
    assert [e["message"]["content"] for e in more] == [[{"type": "text", "text": "Two files."}]]
    assert more[0]["parentId"] == out[-1]["id"]
    assert r2.end == path.stat().st_size


def test_malformed_lines_are_skipped_and_counted(tmp_path):
    path = tmp_path / "s.jsonl"
    body = jsonl(*V3[:4]) + b'{"type":"message", nope\n' + b"[1,2]\n" + jsonl(*V3[4:7])
    path.write_bytes(body)
    out, r = read_all(path)
    assert [n for n, _ in r.bad] == [5, 6]
    assert r.bad[0][1].startswith("not JSON") and r.bad[1][1] == "not a JSON object"
    assert [e["timestamp"] for e in out[1:]] == [ts(1), ts(2), ts(3), ts(4)]
    assert out[2]["parentId"] == out[1]["id"]


def test_version_1_file_order_and_compaction_by_index(tmp_path):
    """Version 1: no entry ids; the header names the model; a compaction
    keeps from the record at firstKeptEntryIndex (the header is index 0)."""
    v1 = [
        {"type": "session", "id": SID, "timestamp": ts(0), "cwd": "/old", "provider": "anthropic",
         "modelId": "claude-sonnet-4-5", "thinkingLevel": "off"},
        {"type": "message", "timestamp": ts(1), "message": {"role": "user", "content": "one", "timestamp": T0}},
        {"type": "message", "timestamp": ts(2), "message": {
            "role": "assistant", "content": [{"type": "text", "text": "two"}], "provider": "anthropic",
            "model": "claude-sonnet-4-5", "usage": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0},
            "stopReason": "stop", "timestamp": T0 + 2000}},
        {"type": "thinking_level_change", "timestamp": ts(3), "thinkingLevel": "high"},
        {"type": "message", "timestamp": ts(4), "message": {"role": "user", "content": "three", "timestamp": T0}},
        {"type": "compaction", "timestamp": ts(5), "summary": "S", "firstKeptEntryIndex": 4, "tokensBefore": 9},
    ]
    path = write(tmp_path / "s.jsonl", v1)
    out, r = read_all(path)
    assert out[0] == {"type": "session", "version": 1, "id": SID, "timestamp": ts(0), "cwd": "/old",
                      "source": {"agent": "pi", "path": str(path), "id": SID}}
    e = named(out)
    assert [(x["type"], x["id"], x["parentId"]) for x in e[1:]] == [
        ("message", "E1", None), ("message", "E2", "E1"), ("message", "E3", "E2"), ("compaction", "E4", "E3")]
    assert e[1]["provider"] == "anthropic" and e[1]["model"] == "claude-sonnet-4-5"
    assert e[4]["firstKeptId"] == "E3" and e[4]["summary"] == "S"
    assert r.skipped == {"thinking_level_change": 1}


def test_version_2_hook_message_is_a_user_message(tmp_path):
    v2 = [{"type": "session", "version": 2, "id": SID, "timestamp": ts(0), "cwd": "/p"},
          msg("b0000001", None, 1, role="hookMessage", customType="h", content="from a hook", display=True)]
    out, _ = read_all(write(tmp_path / "s.jsonl", v2))
    assert out[1]["message"] == {"role": "user", "content": [{"type": "text", "text": "from a hook"}]}
    assert out[1]["parentId"] is None


def test_a_fork_names_its_parent_and_its_copies_are_known_by_their_billing(tmp_path):
    parent_path = write(tmp_path / f"2026-01-02T10-00-00-000Z_{PARENT}.jsonl",
                        [{**V3[0], "id": PARENT}, *V3[1:7]])
    fork = write(tmp_path / f"2026-01-02T11-00-00-000Z_{SID}.jsonl",
                 [{**V3[0], "parentSession": str(parent_path)}, *V3[1:7]])
    mine, _ = read_all(parent_path)
    theirs, _ = read_all(fork)
    assert theirs[0]["parentSession"] == PARENT and theirs[0]["relation"] == "fork"
    assert "parentSession" not in mine[0]
    assert [e.get("_billing") for e in mine[1:]] == [e.get("_billing") for e in theirs[1:]]
    assert sum(1 for e in mine if e.get("_billing")) == 2


def test_a_fork_whose_parent_file_is_named_otherwise(tmp_path):
    other = write(tmp_path / "renamed.jsonl", [{**V3[0], "id": PARENT}])
    fork = write(tmp_path / "f.jsonl", [{**V3[0], "parentSession": str(other)}])
    out, _ = read_all(fork)
    assert out[0]["parentSession"] == PARENT


def test_usage_as_written_with_total_only_and_1h_writes(tmp_path):
    records = [V3[0],
               assistant("c0000001", None, 1, [], {"totalTokens": 333}),
               assistant("c0000002", "c0000001", 2, [], {"input": 5, "output": 6, "cacheWrite": 40,
                                                         "cacheWrite1h": 30, "reasoning": 2}),
               assistant("c0000003", "c0000002", 3, [], None)]
    records[3]["message"].pop("usage")
    out, _ = read_all(write(tmp_path / "s.jsonl", records))
    assert [e["message"].get("usage") for e in out[1:]] == [
        {"input": 0, "output": 333},
        {"input": 5, "output": 6, "cacheWrite": 40, "cacheWrite1h": 30, "reasoning": 2},
        None]
    assert "_billing" not in out[3]


def test_not_a_pi_file(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"type":"session","version":1,"id":"x","timestamp":"t","cwd":"/"}\n')
    with pytest.raises(SessionError, match="not a pi session file"):
        read_all(path)


def test_sniff():
    assert pi.sniff(jsonl(V3[0], V3[1]))
    assert pi.sniff(jsonl({"type": "session", "id": SID, "timestamp": ts(0), "cwd": "/", "provider": "a",
                           "modelId": "m", "thinkingLevel": "off"}))
    assert not pi.sniff(jsonl(H))                                  # panto's own
    assert not pi.sniff(jsonl({**H, "source": {"agent": "pi"}}))   # panto's import of one
    assert not pi.sniff(b'{"type":"session_meta","payload":{}}\n')
    assert not pi.sniff(b'{"type":"user","message":{}}\n')
    assert not pi.sniff(b"\x00\x01garbage")


def test_sources(tmp_path):
    env = {"HOME": str(tmp_path / "home"), "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}
    assert pi.sources(env) == []
    a = tmp_path / "agent" / "sessions" / "--a--"
    b = tmp_path / "agent" / "sessions" / "--b--"
    a.mkdir(parents=True)
    b.mkdir()
    for p in (a / "2026-01-03T00-00-00-000Z_x.jsonl", b / "2026-01-01T00-00-00-000Z_y.jsonl",
              a / "2026-01-02T00-00-00-000Z_z.jsonl"):
        p.write_bytes(jsonl(V3[0]))
    (a / "notes.txt").write_text("x")
    flat = tmp_path / "agent" / "sessions" / "2026-01-01T12-00-00-000Z_w.jsonl"
    flat.write_bytes(jsonl(V3[0]))
    assert pi.sources(env) == [str(b / "2026-01-01T00-00-00-000Z_y.jsonl"), str(flat),
                               str(a / "2026-01-02T00-00-00-000Z_z.jsonl"),
                               str(a / "2026-01-03T00-00-00-000Z_x.jsonl")]
    home = {"HOME": str(tmp_path / "h2")}
    (tmp_path / "h2" / ".pi" / "agent" / "sessions" / "--p--").mkdir(parents=True)
    assert pi.sources(home) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads everything")
def test_an_unreadable_sessions_folder_is_named(tmp_path):
    top = tmp_path / "agent" / "sessions"
    top.mkdir(parents=True)
    top.chmod(0)
    try:
        with pytest.raises(OSError, match=re.escape(str(top))):
            pi.sources({"PI_CODING_AGENT_DIR": str(tmp_path / "agent")})
    finally:
        top.chmod(0o700)


def test_a_line_longer_than_a_read(tmp_path):
    big = "A" * (3 * (1 << 20) + 5)
    records = [*V3[:5], msg("a0000005", "a0000004", 3, role="toolResult", toolCallId="toolu_1", toolName="bash",
                            content=[{"type": "image", "data": big, "mimeType": "image/png"}], isError=False)]
    path = write(tmp_path / "s.jsonl", records, tail=jsonl(V3[6])[:-1])
    out, r = read_all(path)
    assert out[-1]["message"]["content"][1] == {"type": "image", "mediaType": "image/png", "data": big}
    assert r.end == len(jsonl(*records))


def test_records_without_ids_or_cwd_and_short_timestamps(tmp_path):
    """Older or embedded writers: a header without cwd, entries without ids, seconds without milliseconds."""
    records = [{"type": "session", "version": 3, "id": "history-1", "timestamp": "2026-08-14T08:00:00Z"},
               {"type": "thinking_level_change", "thinkingLevel": "high"},
               {"type": "message", "timestamp": "2026-08-14T08:01:00Z", "message": {"role": "user", "content": "hi"}},
               {"type": "message", "timestamp": "2026-08-14T10:01:02.5+02:00", "message": {
                   "role": "assistant", "content": [{"type": "text", "text": "yo"}], "model": "m"}}]
    out, r = read_all(write(tmp_path / "s.jsonl", records))
    assert out[0]["cwd"] == "" and out[0]["timestamp"] == "2026-08-14T08:00:00.000Z"
    assert out[0]["source"]["id"] == "history-1"
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", out[0]["id"])
    assert [(e["timestamp"], e["parentId"]) for e in out[1:]] == [
        ("2026-08-14T08:01:00.000Z", None), ("2026-08-14T08:01:02.500Z", out[1]["id"])]
    assert out[2]["message"] == {"role": "assistant", "content": [{"type": "text", "text": "yo"}], "model": "m",
                                 "stopReason": "stop"}
    assert r.skipped == {"thinking_level_change": 1}


def test_responses_alike_but_for_their_place_are_told_apart(tmp_path):
    """Without times, two answers with the same model and counts are still two responses."""
    same = {"type": "message", "message": {"role": "assistant", "content": [], "provider": "p", "model": "m",
                                           "usage": {"input": 1, "output": 1}}}
    out, _ = read_all(write(tmp_path / "s.jsonl", [V3[0], same, same]))
    assert out[1]["_billing"] != out[2]["_billing"]
    assert out[1]["_billing"][1].endswith("s.jsonl:2")
