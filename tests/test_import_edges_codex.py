"""panto-log import of Codex rollouts at their edges (SPEC §12): record
variants, malformed lines and values, forks whose parent lies elsewhere."""
import os

import pytest
from builders import lines
from conftest import log
from fixtures.records import CX_SID, cx, cx_context, cx_item, cx_meta, cx_msg, cx_path, cx_session, cx_tokens, write

from pantolib.agents import codex

T = "2025-09-01T10:00:0"
PNG = "iVBORw0KGgo="
PARENT = "0199aaaa-bbbb-7ccc-8ddd-000000000001"


def imported(path, *extra):
    p = log("import", *extra, str(path))
    assert p.returncode == 0, p.stderr
    assert b"Traceback" not in p.stderr
    return lines(p.stdout), p.stderr.decode()


@pytest.fixture
def codex_home(isolated, monkeypatch):
    home = os.environ["HOME"]
    monkeypatch.setenv("CODEX_HOME", os.path.join(home, "codex"))
    return home


def test_codex_record_variants_one_rollout(tmp_path):
    """Items before session_meta, a blank line, a line that is not JSON, a
    payload that is not an object, a second session_meta, a record of an
    unknown type, a developer message whose content is a string, images by URL
    and by data, a message of another role, an item of an unknown kind, a
    local shell call, tool outputs given as an object and as a list that come
    while the turn is open, an empty thread name, and a token_count with only
    the last usage."""
    f = write(tmp_path / "rollout.jsonl", [
        cx_msg(T + "0.000Z", "user", "from before"),
        cx_meta(),
        b"\n",
        b"{torn json\n",
        cx(T + "0.200Z", "event_msg", "not an object"),
        cx_meta(ts=T + "0.300Z"),
        cx(T + "0.400Z", "future_kind", {"x": 1}),
        cx_item(T + "0.500Z", type="message", role="developer", content="be careful"),
        cx_item(T + "1.000Z", type="message", role="user",
                content=["loose", {"type": "input_text", "text": "look"},
                         {"type": "input_image", "image_url": "https://example.com/a.png"},
                         {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"}]),
        cx_item(T + "1.100Z", type="message", role="tool", content=[{"type": "output_text", "text": "?"}]),
        cx_item(T + "1.200Z", type="web_search_call", status="completed", action={"type": "search"}),
        cx_context(T + "1.300Z"),
        cx_item(T + "2.000Z", type="local_shell_call", call_id="ls1", status="completed",
                action={"type": "exec", "command": ["ls"]}),
        cx_item(T + "2.100Z", type="function_call_output", call_id="ls1",
                output={"output": "a.txt", "metadata": {"exit_code": 0}}),
        cx_item(T + "2.200Z", type="custom_tool_call_output", call_id="ls2",
                output=[{"type": "input_text", "text": "part one"}, "part two"]),
        cx(T + "2.300Z", "event_msg", {"type": "thread_name_updated", "thread_name": "  "}),
        cx(T + "2.400Z", "event_msg", {"type": "token_count", "info": {"last_token_usage": {
            "input_tokens": 100, "cached_input_tokens": 40, "output_tokens": 7, "reasoning_output_tokens": 0}}}),
    ])
    out, err = imported(f)
    assert out[0]["id"] == CX_SID and out[0]["timestamp"] == "2025-09-01T10:00:00.000Z"
    dev, prompt, reply, r1, r2 = out[1:]
    assert dev["message"] == {"role": "system", "content": [{"type": "text", "text": "be careful"}]}
    assert prompt["message"]["content"] == [{"type": "text", "text": "look"},
                                            {"type": "text", "text": "[image: https://example.com/a.png]"},
                                            {"type": "image", "mediaType": "image/png", "data": PNG}]
    assert reply["message"]["content"] == [{"type": "toolUse", "id": "ls1", "name": "local_shell",
                                            "input": '{"type":"exec","command":["ls"]}'}]
    assert reply["message"]["usage"] == {"input": 60, "output": 7, "cacheRead": 40}
    assert reply["message"]["stopReason"] == "toolUse" and reply["message"]["model"] == "gpt-5-codex"
    assert r1["message"]["content"] == [{"type": "toolResult", "toolUseId": "ls1", "content": "a.txt"}]
    assert r2["message"]["content"] == [{"type": "toolResult", "toolUseId": "ls2", "content": "part one\npart two"}]
    assert [e["parentId"] for e in out[2:]] == [e["id"] for e in out[1:-1]]
    assert err == f"panto-log: {f}: 1 malformed line skipped (-v names them)\n"
    _, err = imported(f, "-v")
    assert err.startswith(f"panto-log: {f}:4: not valid JSON") and err.endswith("; skipped\n")


def test_codex_skipped_kinds_counted_in_the_summary(codex_home):
    recs = cx_session(n=1)
    recs[2:2] = [cx_meta(ts=T + "0.300Z"), cx(T + "0.400Z", "future_kind", {}),
                 cx_item(T + "0.500Z", type="message", role="tool", content=[]),
                 cx_item(T + "0.600Z", type="web_search_call"),
                 cx(T + "0.700Z", "event_msg", {"type": "thread_name_updated", "thread_name": ""}),
                 b"not json\n"]
    write(cx_path(codex_home), [cx_msg(T + "0.000Z", "user", "early")] + recs)
    p = log("import", "--all")
    assert p.returncode == 0, p.stderr
    src = cx_path(codex_home)
    assert p.stderr.decode().splitlines() == [
        f"panto-log: {src}: 1 malformed line skipped (-v names them)",
        "panto-log: 1 session (1 new, 0 grown, 0 unchanged), added 2 entries; skipped: future_kind 1, "
        "item web_search_call 1, message tool 1, response_item before session_meta 1, session_meta 1, title 1, "
        "turn_context 1; 1 malformed line"]


def _parent_and_child(home):
    """A parent rollout of one turn in one day's folder; its fork, replaying it,
    in the next day's, then a turn of its own."""
    parent = cx_session(PARENT, n=1)
    write(cx_path(home, PARENT, day="2025/09/01"), parent)
    child = [cx_meta(CX_SID, ts="2025-09-02T09:00:00.000Z", forked_from_id=PARENT)] + parent[1:]
    child += [cx_msg("2025-09-02T09:00:01.000Z", "user", "my own question"),
              cx_msg("2025-09-02T09:00:02.000Z", "assistant", "my own answer"),
              cx_tokens("2025-09-02T09:00:03.000Z", (2005, 800, 61, 20), (1005, 400, 31, 10))]
    return write(cx_path(home, CX_SID, day="2025/09/02"), child)


def test_codex_a_fork_whose_parent_is_in_another_days_folder(codex_home):
    child = _parent_and_child(codex_home)
    out, _ = imported(child)
    assert out[0]["parentSession"] == PARENT and out[0]["relation"] == "fork"
    assert [e["message"]["content"][0]["text"] for e in out[1:]] == ["my own question", "my own answer"]
    assert out[2]["message"]["usage"] == {"input": 605, "output": 31, "cacheRead": 400, "reasoning": 10}


def test_codex_a_fork_whose_parent_cannot_be_read_leaves_its_replay_out(codex_home):
    parent = cx_session(PARENT, n=1)
    for r in parent:
        r["timestamp"] = "2025-09-01T08:00:00.000Z"
    os.makedirs(cx_path(codex_home, PARENT, day="2025/09/02"))       # named like it, but no file to read
    child = [cx_meta(CX_SID, ts="2025-09-02T09:00:00.000Z", forked_from_id=PARENT)] + parent[1:]
    child += [cx_msg("2025-09-02T09:00:01.000Z", "user", "my own question"),
              cx_msg("2025-09-02T09:00:02.000Z", "assistant", "my own answer"),
              cx_tokens("2025-09-02T09:00:03.000Z", (2005, 800, 61, 20), (1005, 400, 31, 10))]
    out, _ = imported(write(cx_path(codex_home, CX_SID, day="2025/09/02"), child))
    assert [e["message"]["content"][0]["text"] for e in out[1:]] == ["my own question", "my own answer"]


def test_codex_sources_are_what_import_all_finds(codex_home):
    a = write(cx_path(codex_home), cx_session(n=1))
    env = dict(os.environ)
    assert codex.sources(env) == codex.find(env) == [a]
