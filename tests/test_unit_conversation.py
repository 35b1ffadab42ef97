"""pantolib.conversation on its own, on session files under tmp_path: the
path through the tree (SPEC §4.1), the messages on it, compaction honoured
(SPEC §3: the last compaction on the path, from its firstKeptId on), the
active model, partial streams, and what each wire API is then sent."""
import orjson
import pytest

from builders import header
from pantolib import conversation, stream
from pantolib.errors import PantoError, SessionError
from pantolib.providers import anthropic_messages, openai_chat, openai_responses

SUMMARY = "The conversation so far, summarized:\n\n"      # SPEC §3


def text(s):
    return {"type": "text", "text": s}


def entry(eid, parent, role, *blocks, stamp=("openai", "gpt-4o"), api=None):
    e = {"type": "message", "id": eid, "parentId": parent, "timestamp": "2026-04-25T17:40:16.000Z"}
    if role == "user" and stamp:
        e["provider"], e["model"] = stamp
        if api:
            e["api"] = api
    e["message"] = {"role": role, "content": [text(b) if isinstance(b, str) else b for b in blocks]}
    if role == "assistant":
        e["message"].update(provider=stamp[0] if stamp else "openai", model=stamp[1] if stamp else "gpt-4o",
                            stopReason="stop")
    return e


def compaction(eid, parent, summary, kept):
    return {"type": "compaction", "id": eid, "parentId": parent, "timestamp": "2026-04-25T17:40:17.000Z",
            "summary": summary, "firstKeptId": kept, "provider": "openai", "model": "gpt-4o"}


def other(eid, parent, t="sessionInfo"):
    return {"type": t, "id": eid, "parentId": parent, "timestamp": "2026-04-25T17:40:17.000Z", "name": "n"}


def session_of(tmp_path, *entries, head=None):
    """Write the session to a file, read it back as conversation.Session."""
    p = tmp_path / "s.jsonl"
    p.write_bytes((head or header(tmp_path)) + b"".join(orjson.dumps(e) + b"\n" for e in entries))
    with open(p, "rb") as f:
        return conversation.Session.read(f, str(p))


def said(s):
    """The conversation as (role, texts) pairs."""
    return [(m["role"], [b.get("text", b.get("type")) for b in m["content"]]) for m in s.messages()]


SYS = entry("00000000", None, "system", "be brief")
U1 = entry("0000aaa1", "00000000", "user", "one")
A1 = entry("0000bbb1", "0000aaa1", "assistant", "ans one")
U2 = entry("0000aaa2", "0000bbb1", "user", "two")
A2 = entry("0000bbb2", "0000aaa2", "assistant", "ans two")
U3 = entry("0000aaa3", "0000bbb2", "user", "three")
A3 = entry("0000bbb3", "0000aaa3", "assistant", "ans three")
LINEAR = [SYS, U1, A1, U2, A2, U3, A3]


# -- the path and its messages ------------------------------------------------------------------

def test_the_messages_of_a_linear_session_in_the_wire_shape(tmp_path):
    s = session_of(tmp_path, *LINEAR)
    assert s.header == orjson.loads(header(tmp_path)) and s.leaf == "0000bbb3"
    assert [e["id"] for e in s.path()] == [e["id"] for e in LINEAR]
    msgs = s.messages()
    assert msgs[0] == {"role": "system", "content": [text("be brief")]}
    assert msgs[1] == {"role": "user", "content": [text("one")]}          # no stamp, no id
    assert msgs[2] == {"role": "assistant", "content": [text("ans one")], "provider": "openai", "model": "gpt-4o"}
    assert [m["role"] for m in msgs] == ["system", "user", "assistant"] * 1 + ["user", "assistant"] * 2
    assert s.leaf_message() == A3 and s.unanswered_tool_uses() == []


def test_entries_that_are_not_messages_chain_into_the_tree_but_are_not_said(tmp_path):
    s = session_of(tmp_path, U1, other("0000ccc1", "0000aaa1"), dict(A1, parentId="0000ccc1"),
                   other("0000ccc2", "0000bbb1", "custom"))
    assert [e["id"] for e in s.path()] == ["0000aaa1", "0000ccc1", "0000bbb1", "0000ccc2"]
    assert said(s) == [("user", ["one"]), ("assistant", ["ans one"])]
    assert [e["id"] for e in s.message_entries()] == ["0000aaa1", "0000bbb1"]
    assert s.leaf == "0000ccc2" and s.leaf_message()["id"] == "0000bbb1"


def test_the_active_path_is_the_one_to_the_last_entry_in_file_order(tmp_path):
    b3 = entry("0000aaa9", "0000bbb1", "user", "branch")       # a second child of A1
    b4 = entry("0000bbb9", "0000aaa9", "assistant", "on the branch")
    s = session_of(tmp_path, *LINEAR, b3, b4)
    assert said(s) == [("system", ["be brief"]), ("user", ["one"]), ("assistant", ["ans one"]),
                       ("user", ["branch"]), ("assistant", ["on the branch"])]
    assert [e["id"] for e in s.path_to("0000bbb3")] == [e["id"] for e in LINEAR]   # the old branch is kept
    # appended to again, the old branch is the active one
    s = session_of(tmp_path, *LINEAR, b3, b4, entry("0000aaa4", "0000bbb3", "user", "back"))
    assert said(s)[-2:] == [("assistant", ["ans three"]), ("user", ["back"])]


def test_chain_and_walk_on_a_tree():
    parent_of = {"r": None, "a": "r", "b": "a", "c": "a", "d": "c", "e": "r", "lost": "gone", "x": "y", "y": "x"}
    assert conversation.chain(parent_of, "d") == ["r", "a", "c", "d"]
    assert conversation.chain(parent_of, "lost") == ["lost"]            # a missing parent ends the chain
    assert conversation.chain(parent_of, "x") == ["y", "x"]             # so does a loop
    assert conversation.chain(parent_of, "nope") == []
    # depth counts forks: a first child stays at its parent's depth
    assert list(conversation.walk(parent_of)) == [("r", 0), ("a", 0), ("b", 0), ("c", 1), ("d", 1), ("e", 1),
                                                  ("lost", 0), ("x", 0), ("y", 0)]


def test_find_entry_by_id_or_unique_prefix():
    ids = ["0000aaa1", "0000aaa2", "0000bbb1", "0000"]
    assert conversation.find_entry(ids, "0000") == "0000"               # an exact id wins
    assert conversation.find_entry(ids, "0000b") == "0000bbb1"
    with pytest.raises(PantoError, match="entry id '0000a' is ambiguous in S: 0000aaa1, 0000aaa2"):
        conversation.find_entry(ids, "0000a", "S")
    with pytest.raises(PantoError, match="no entry 'ffff' in S"):
        conversation.find_entry(ids, "ffff", "S")
    with pytest.raises(PantoError, match="no entry '' in"):
        conversation.find_entry(ids, "")
    many = [f"ab{i:06x}" for i in range(12)]
    with pytest.raises(PantoError, match="and 2 more"):
        conversation.find_entry(many, "ab")


def test_a_bare_entry_in_the_stream_is_refused_or_left_out(tmp_path):
    data = header(tmp_path) + orjson.dumps(U1) + b"\n" + b'{"type":"message","message":{"role":"user","content":[]}}\n'
    (tmp_path / "b.jsonl").write_bytes(data)
    with open(tmp_path / "b.jsonl", "rb") as f:
        with pytest.raises(SessionError) as e:
            conversation.Session.read(f, "B")
    assert (e.value.file, e.value.line) == ("B", 3)
    with open(tmp_path / "b.jsonl", "rb") as f:
        s = conversation.Session.read(f, "B", skip_bare=True)
    assert said(s) == [("user", ["one"])]


# -- compaction -----------------------------------------------------------------------------------

def test_a_compaction_stands_in_for_the_path_before_its_first_kept_entry(tmp_path):
    c = compaction("0000ccc1", "0000bbb2", "what was said", "0000aaa2")
    s = session_of(tmp_path, *LINEAR[:5], c, dict(U3, parentId="0000ccc1"), A3)
    assert said(s) == [("system", ["be brief"]), ("user", [SUMMARY + "what was said"]),
                       ("user", ["two"]), ("assistant", ["ans two"]), ("user", ["three"]), ("assistant", ["ans three"])]
    systems, summary, kept = s.context()
    assert [e["id"] for e in systems] == ["00000000"] and summary == c
    assert [e["id"] for e in kept] == ["0000aaa2", "0000bbb2", "0000aaa3", "0000bbb3"]
    assert s.messages()[1] == {"role": "user", "content": [text(SUMMARY + "what was said")]}


def test_the_last_compaction_on_the_path_counts(tmp_path):
    c1 = compaction("0000ccc1", "0000bbb2", "first summary", "0000aaa1")
    c2 = compaction("0000ccc2", "0000bbb3", "second summary", "0000aaa3")
    s = session_of(tmp_path, *LINEAR[:5], c1, dict(U3, parentId="0000ccc1"), A3, c2,
                   entry("0000aaa4", "0000ccc2", "user", "four"))
    assert said(s) == [("system", ["be brief"]), ("user", [SUMMARY + "second summary"]),
                       ("user", ["three"]), ("assistant", ["ans three"]), ("user", ["four"])]
    assert s.context()[1]["id"] == "0000ccc2"


@pytest.mark.parametrize("kept", [None, "ffffffff", "0000aaa4"],
                         ids=["null", "not in the session", "after the compaction"])
def test_a_first_kept_id_not_on_the_path_before_it_is_taken_as_null(tmp_path, kept):
    c = compaction("0000ccc1", "0000bbb3", "all of it", kept)
    s = session_of(tmp_path, *LINEAR, c, entry("0000aaa4", "0000ccc1", "user", "four"))
    assert said(s) == [("system", ["be brief"]), ("user", [SUMMARY + "all of it"]), ("user", ["four"])]


def test_a_first_kept_id_on_another_branch_is_taken_as_null(tmp_path):
    side = entry("0000aaa9", "0000bbb1", "user", "side")
    c = compaction("0000ccc1", "0000bbb3", "s", "0000aaa9")
    s = session_of(tmp_path, *LINEAR, side, c)
    assert said(s) == [("system", ["be brief"]), ("user", [SUMMARY + "s"])]


@pytest.mark.parametrize("broken", [{"summary": 5}, {"summary": None}, {"firstKeptId": 7}, {"firstKeptId": ["x"]}])
def test_a_compaction_that_cannot_be_honoured_is_skipped_like_an_unknown_type(tmp_path, broken):
    c = dict(compaction("0000ccc1", "0000bbb2", "s", "0000aaa2"), **broken)
    s = session_of(tmp_path, *LINEAR[:5], c, dict(U3, parentId="0000ccc1"))
    assert said(s) == [("system", ["be brief"]), ("user", ["one"]), ("assistant", ["ans one"]), ("user", ["two"]),
                       ("assistant", ["ans two"]), ("user", ["three"])]
    assert s.context()[1] is None


def test_a_branch_from_before_a_compaction_does_not_have_it(tmp_path):
    c = compaction("0000ccc1", "0000bbb3", "s", "0000aaa3")
    back = entry("0000aaa9", "0000bbb1", "user", "from before")
    s = session_of(tmp_path, *LINEAR, c, back)
    assert said(s) == [("system", ["be brief"]), ("user", ["one"]), ("assistant", ["ans one"]),
                       ("user", ["from before"])]


def test_system_messages_are_kept_first_after_a_compaction(tmp_path):
    late = entry("0000eeee", "0000bbb1", "system", "later rule")
    c = compaction("0000ccc1", "0000bbb2", "s", "0000aaa2")
    s = session_of(tmp_path, *LINEAR[:3], late, dict(U2, parentId="0000eeee"), A2, c)
    assert said(s) == [("system", ["be brief"]), ("system", ["later rule"]), ("user", [SUMMARY + "s"]),
                       ("user", ["two"]), ("assistant", ["ans two"])]


# -- the active model ------------------------------------------------------------------------------

def test_the_active_model_is_the_stamp_of_the_last_user_entry(tmp_path):
    u1 = entry("0000aaa1", None, "user", "one", stamp=("anthropic", "claude"), api="anthropic_messages")
    a1 = entry("0000bbb1", "0000aaa1", "assistant", "x", stamp=("anthropic", "claude"))
    u2 = entry("0000aaa2", "0000bbb1", "user", "two", stamp=("openai", "gpt-4o"), api="openai_responses")
    result = entry("0000aaa3", "0000aaa2", "user", {"type": "toolResult", "toolUseId": "c", "content": "ok"})
    assert session_of(tmp_path, u1, a1).active_model() == ("anthropic", "claude", "anthropic_messages")
    # a stamp without api: that of the latest entry of the same provider and model
    assert session_of(tmp_path, u1, a1, u2, result).active_model() == ("openai", "gpt-4o", "openai_responses")
    assert session_of(tmp_path, dict(u1, api=None)).active_model() == ("anthropic", "claude", None)
    unstamped = entry("0000aaa1", None, "user", "one", stamp=None)
    assert session_of(tmp_path, unstamped).active_model() is None
    assert session_of(tmp_path, u1, a1, dict(u2, parentId="0000bbb1", provider="")).active_model()[0] == "anthropic"


def test_tool_uses_of_the_leaf_that_wait_for_results(tmp_path):
    use = {"type": "toolUse", "id": "c1", "name": "bash", "input": "{}"}
    a = entry("0000bbb1", "0000aaa1", "assistant", "let me look", use)
    assert session_of(tmp_path, U1, a).unanswered_tool_uses() == [use]
    r = entry("0000aaa2", "0000bbb1", "user", {"type": "toolResult", "toolUseId": "c1", "content": "ok"})
    assert session_of(tmp_path, U1, a, r).unanswered_tool_uses() == []


# -- a partial stream --------------------------------------------------------------------------------

def test_a_partial_stream_builds_the_conversation_of_the_whole_session(tmp_path):
    c = compaction("0000ccc1", "0000bbb2", "s", "0000aaa2")
    u3 = entry("0000aaa3", "0000ccc1", "user", "three", stamp=("anthropic", "claude"))
    whole = [*LINEAR[:5], c, u3]
    full = session_of(tmp_path, *whole)
    # what panto-log replay --context prints: system entries, the compaction, and from firstKeptId on
    keep = {"00000000", "0000ccc1", "0000aaa2", "0000bbb2", "0000aaa3"}
    head = stream.partial_header(orjson.loads(header(tmp_path)), [e["id"] for e in whole if e["id"] not in keep])
    part = session_of(tmp_path, SYS, U2, A2, c, u3, head=head)
    assert part.messages() == full.messages()
    assert part.active_model() == full.active_model() == ("anthropic", "claude", None)
    assert set(part.ids) == {e["id"] for e in whole}                  # the omitted ids count as taken
    assert set(full.ids) == {e["id"] for e in whole}


# -- what each wire API is sent ------------------------------------------------------------------------

def test_a_compacted_conversation_in_each_wire_shape(tmp_path):
    """The pairing rules apply to the conversation after a compaction: a kept
    tool result whose call was summarized is not sent; a call with no result
    gets one saying it was not run."""
    use = {"type": "toolUse", "id": "call_1", "name": "bash", "input": '{"cmd":"ls"}'}
    a1 = entry("0000bbb1", "0000aaa1", "assistant", "looking", use)
    r1 = entry("0000aaa2", "0000bbb1", "user", {"type": "toolResult", "toolUseId": "call_1", "content": "a.txt"})
    a2 = entry("0000bbb2", "0000aaa2", "assistant", "done", dict(use, id="call_2"))
    c = compaction("0000ccc1", "0000bbb2", "listed files", "0000aaa2")      # keeps the result, not its call
    u3 = entry("0000aaa3", "0000ccc1", "user", "next")
    s = session_of(tmp_path, SYS, U1, a1, r1, a2, c, u3)
    msgs = s.messages()
    assert [m["role"] for m in msgs] == ["system", "user", "user", "assistant", "user"]

    chat = openai_chat.wire_messages(msgs, "gpt-4o")
    assert chat == [{"role": "system", "content": "be brief"},
                    {"role": "user", "content": SUMMARY + "listed files"},
                    {"role": "assistant", "content": "done", "tool_calls": [
                        {"id": "call_2", "type": "function", "function": {"name": "bash", "arguments": '{"cmd":"ls"}'}}]},
                    {"role": "tool", "tool_call_id": "call_2",
                     "content": "tool call not run: the conversation went on without its result"},
                    {"role": "user", "content": "next"}]

    system, anth = anthropic_messages.wire_messages(msgs, "gpt-4o")
    assert system == "be brief"
    assert [m["role"] for m in anth] == ["user", "assistant", "user"]
    assert anth[0]["content"] == [{"type": "text", "text": SUMMARY + "listed files"}]
    assert [b["type"] for b in anth[1]["content"]] == ["text", "tool_use"]
    assert [b["type"] for b in anth[2]["content"]] == ["tool_result", "text"]
    assert anth[2]["content"][0]["tool_use_id"] == "call_2" and anth[2]["content"][0]["is_error"] is True
    assert "call_1" not in orjson.dumps(anth).decode()

    instructions, items = openai_responses.wire_input(msgs, "gpt-4o")
    assert instructions == "be brief"
    flat = orjson.dumps(items).decode()
    assert "call_1" not in flat and SUMMARY.strip() in flat
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    assert [o["call_id"] for o in outputs] == ["call_2"]
