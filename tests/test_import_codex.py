"""panto-log import of Codex rollouts (SPEC §12): real files, the real console script."""
import uuid

import orjson
from builders import lines
from conftest import log, run
from fixtures.records import (CX_SID, cx, cx_context, cx_item, cx_meta, cx_msg, cx_session, cx_tokens, write)

from pantolib.agents import codex


def stream_of(path, *extra):
    p = log("import", *extra, str(path))
    assert p.returncode == 0, p.stderr
    return lines(p.stdout)


def log_ls(*args):
    p = run(["panto-ls", *args])
    assert p.returncode == 0, p.stderr
    return lines(p.stdout)


def replies(out):
    return [o["message"] for o in out if o["type"] == "message" and o["message"]["role"] == "assistant"]


def test_cumulative_totals_become_per_turn_usage(tmp_path):
    T = "2025-09-01T10:00:0"
    f = write(tmp_path / "r.jsonl", [
        cx_meta(), cx_context(T + "1.000Z"),
        cx_msg(T + "1.100Z", "user", "list files"),
        cx_tokens(T + "1.200Z", None),                                        # info null: nothing
        cx_item(T + "2.000Z", type="reasoning", id="rs_1", summary=[{"type": "summary_text", "text": "hm"}],
                encrypted_content="ENC"),
        cx_item(T + "2.100Z", type="function_call", name="shell", arguments='{"command":["ls"]}', call_id="c1"),
        cx_tokens(T + "2.200Z", (1000, 200, 50, 20), (1000, 200, 50, 20)),     # last_token_usage
        cx_tokens(T + "2.300Z", (1000, 200, 50, 20), (1000, 200, 50, 20)),     # a re-emit: nothing
        cx_item(T + "3.000Z", type="function_call_output", call_id="c1", output="a\nb"),
        cx_msg(T + "4.000Z", "assistant", "Two files."),
        cx_tokens(T + "4.200Z", (2200, 900, 60, 20)),                          # no last: the difference
    ])
    out = stream_of(f)
    assert out[0]["id"] == CX_SID and out[0]["cwd"] == "/home/u/cx"
    assert out[0]["source"]["agent"] == "codex"
    r = replies(out)
    assert [m["usage"] for m in r] == [{"input": 800, "output": 50, "cacheRead": 200, "reasoning": 20},
                                       {"input": 500, "output": 10, "cacheRead": 700}]
    assert r[0]["content"] == [{"type": "thinking", "thinking": "hm", "signature": "ENC", "itemId": "rs_1"},
                               {"type": "toolUse", "id": "c1", "name": "shell", "input": '{"command":["ls"]}'}]
    assert (r[0]["model"], r[0]["provider"], r[0]["api"], r[0]["stopReason"]) == \
        ("gpt-5-codex", "openai", "openai_responses", "toolUse")
    assert r[1]["stopReason"] == "stop"
    kinds = [(o["message"]["role"], o["message"]["content"][0]["type"]) for o in out[1:]]
    assert kinds == [("user", "text"), ("assistant", "thinking"), ("user", "toolResult"), ("assistant", "text")]
    assert out[1]["model"] == "gpt-5-codex"       # prompts stamped with the turn_context's model
    ids = [o["id"] for o in out[1:]]
    assert [o["parentId"] for o in out[1:]] == [None] + ids[:-1]


def test_developer_and_injected_messages_compaction_and_thread_name(tmp_path):
    T = "2025-09-01T10:00:0"
    f = write(tmp_path / "r.jsonl", [
        cx_meta(),
        cx_msg(T + "0.100Z", "developer", "<permissions instructions>"),
        cx_msg(T + "0.200Z", "user", "<environment_context>\n<cwd>/home/u/cx</cwd>\n</environment_context>"),
        cx_context(T + "1.000Z", model="gpt-5"),
        cx_msg(T + "1.100Z", "user", "fix it"),
        cx_msg(T + "1.500Z", "assistant", "done"),
        cx_tokens(T + "1.600Z", (10, 0, 5, 0), (10, 0, 5, 0)),
        cx(T + "2.000Z", "compacted", {"message": "we fixed it", "replacement_history": []}),
        cx(T + "3.000Z", "event_msg", {"type": "thread_name_updated", "thread_id": CX_SID, "thread_name": "Fix"}),
        cx(T + "3.100Z", "event_msg", {"type": "agent_message", "message": "done"}),
    ])
    out = stream_of(f)
    assert [o["message"]["role"] for o in out[1:4]] == ["system", "user", "user"]
    comp = out[5]
    assert comp["type"] == "compaction" and comp["summary"] == "we fixed it" and "usage" not in comp
    assert comp["model"] == "gpt-5"
    assert out[6]["type"] == "sessionInfo" and out[6]["name"] == "Fix"


def test_injected_context_is_never_the_title(tmp_path):
    """Codex's environment and instructions, sent as user messages, are not what
    the person typed: panto-ls titles the session by its first real prompt."""
    T = "2025-09-01T10:00:0"
    f = write(tmp_path / "r.jsonl", [
        cx_meta(),
        cx_msg(T + "0.100Z", "user", "# AGENTS.md instructions for /home/u/cx\n\n<INSTRUCTIONS>be brief</INSTRUCTIONS>"),
        cx_msg(T + "0.200Z", "user", "<environment_context>\n<cwd>/home/u/cx</cwd>\n</environment_context>"),
        cx_context(T + "1.000Z", model="gpt-5"),
        cx_msg(T + "1.100Z", "user", "fix the refresh bug"),
        cx_msg(T + "1.500Z", "assistant", "done"),
        cx_tokens(T + "1.600Z", (10, 0, 5, 0), (10, 0, 5, 0)),
    ])
    p = log("import", str(f))
    assert p.returncode == 0, p.stderr
    assert log("append", input=p.stdout).returncode == 0
    listed = log_ls("--all", "--json")
    assert [(s["agent"], s["firstPrompt"]) for s in listed] == [("codex", "fix the refresh bug")]


def test_a_turn_without_its_token_count_waits_and_any_split_gives_one_runs_output(tmp_path):
    f = tmp_path / "r.jsonl"
    recs = cx_session(n=3)
    write(f, recs[:-1])              # the last turn's token_count has not come
    out = stream_of(f)
    assert len(replies(out)) == 2 and out[-1]["message"]["role"] == "user"
    write(f, recs)
    assert len(replies(stream_of(f))) == 3
    data = f.read_bytes()
    one = list(codex.Reader(str(f)))
    for cut in sorted({i + 1 for i, c in enumerate(data) if c == 10} | set(range(0, len(data), 53))):
        f.write_bytes(data[:cut])
        r1 = codex.Reader(str(f))
        got = list(r1)
        f.write_bytes(data)
        r2 = codex.Reader(str(f), r1.end, orjson.loads(orjson.dumps(r1.state)))
        assert got + list(r2) == one, cut


def test_a_fork_does_not_import_its_parents_replay(tmp_path):
    parent = "0199aaaa-bbbb-7ccc-8ddd-000000000001"
    replay = cx_session(n=2)[2:]      # the parent's turns, written before the fork's session_meta time
    f = write(tmp_path / "r.jsonl", [
        cx_meta(ts="2025-09-02T00:00:00.000Z", forked_from_id=parent),
        *replay,
        cx_msg("2025-09-02T00:00:01.000Z", "user", "and now?"),
        cx_msg("2025-09-02T00:00:02.000Z", "assistant", "this"),
        cx_tokens("2025-09-02T00:00:03.000Z", (3000, 800, 100, 20), (900, 0, 7, 0)),
    ])
    out = stream_of(f)
    assert out[0]["relation"] == "fork" and out[0]["parentSession"] == parent
    assert [o["message"]["content"][0]["text"] for o in out[1:]] == ["and now?", "this"]
    assert replies(out)[0]["usage"] == {"input": 900, "output": 7}


def test_a_fork_beside_its_parent_skips_the_prefix_equal_to_the_parents_records(tmp_path):
    parent = cx_session(n=2)
    write(tmp_path / f"rollout-2025-09-01T10-00-00-{CX_SID}.jsonl", parent)
    child_id = "0199aaaa-bbbb-7ccc-8ddd-000000000009"
    own = [cx_msg("2025-09-01T10:05:00.000Z", "user", "fork question"),
           cx_msg("2025-09-01T10:05:01.000Z", "assistant", "fork answer"),
           cx_tokens("2025-09-01T10:05:02.000Z", (2001 + 900, 800, 61 + 7, 20))]   # totals only
    f = write(tmp_path / f"rollout-2025-09-01T10-05-00-{child_id}.jsonl",
              [cx_meta(sid=child_id, ts="2025-09-01T10:05:00.000Z", forked_from_id=CX_SID), *parent[1:], *own])
    out = stream_of(f)
    assert [o["message"]["content"][0]["text"] for o in out[1:]] == ["fork question", "fork answer"]
    # the replayed totals are where the fork's own count starts from
    assert replies(out)[0]["usage"] == {"input": 900, "output": 7}
    one = list(codex.Reader(str(f)))
    data = f.read_bytes()
    for cut in [i + 1 for i, c in enumerate(data) if c == 10]:
        f.write_bytes(data[:cut])
        r1 = codex.Reader(str(f))
        got = list(r1)
        f.write_bytes(data)
        assert got + list(codex.Reader(str(f), r1.end, orjson.loads(orjson.dumps(r1.state)))) == one, cut


def test_a_sub_agent_rollout_names_its_parent(tmp_path):
    f = write(tmp_path / "r.jsonl", [
        cx_meta(sid="child-thread", source={"subagent": {"thread_spawn": {"parent_thread_id": CX_SID,
                                                                          "depth": 1}}}),
        *cx_session(n=1, meta=False)])
    head = stream_of(f)[0]
    assert head["relation"] == "subagent" and head["parentSession"] == CX_SID
    assert head["id"] == str(uuid.uuid5(uuid.NAMESPACE_URL, "codex:child-thread"))


def test_images_and_failed_tool_outputs(tmp_path):
    T = "2025-09-01T10:00:0"
    f = write(tmp_path / "r.jsonl", [
        cx_meta(),
        cx_item(T + "1.000Z", type="message", role="user", content=[
            {"type": "input_text", "text": "see"}, {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]),
        cx_item(T + "1.100Z", type="custom_tool_call", name="apply_patch", input="*** Begin Patch", call_id="p1"),
        cx_tokens(T + "1.200Z", (5, 0, 1, 0), (5, 0, 1, 0)),
        cx_item(T + "1.300Z", type="custom_tool_call_output", call_id="p1",
                output={"content": "patch failed", "success": False}),
    ])
    out = stream_of(f)
    assert out[1]["message"]["content"][1] == {"type": "image", "mediaType": "image/png", "data": "AAAA"}
    assert out[2]["message"]["content"][0]["input"] == "*** Begin Patch"
    assert out[3]["message"]["content"] == [{"type": "toolResult", "toolUseId": "p1", "content": "patch failed",
                                             "isError": True}]
