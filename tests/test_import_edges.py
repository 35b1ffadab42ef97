"""panto-log import at its edges (SPEC §12): the record variants, malformed
values and odd folders each agent's files hold, the failures the command
reports, and the pure helpers every agent module shares."""
import os
import uuid

import orjson
import pytest
from builders import lines, read
from conftest import assert_clean_error, log
from fixtures.records import (B_SID, CC_SID, OC_SCHEMA, OC_T0, cc_assistant, cc_common, cc_path, cc_session, cc_text,
                              cc_usage, cc_user, oc_add, oc_answer, oc_db, oc_user, write)

from pantolib.agents import common

SES = "ses_4f1a2b3c4d5eAbCdEfGhIjKlMn"
PI_SID = "0b5b1c2e-1111-4222-8333-444455556666"


def session_file(sid, cwd):
    from pantolib import paths
    return os.path.join(paths.session_dir(cwd), f"{sid}.jsonl")


def imported(path, *extra):
    p = log("import", *extra, str(path))
    assert p.returncode == 0, p.stderr
    assert b"Traceback" not in p.stderr
    return lines(p.stdout), p.stderr.decode()


def import_all(*extra, status=0):
    p = log("import", "--all", *extra)
    err = p.stderr.decode()
    assert p.returncode == status, err
    assert "Traceback" not in err
    return err.strip().splitlines()


def messages(out):
    return [e for e in out if e["type"] == "message"]


@pytest.fixture
def claude_home(isolated, monkeypatch):
    home = os.environ["HOME"]
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", os.path.join(home, "claude"))
    return home


# -- the helpers every agent module shares ------------------------------------------------

def test_the_hash_of_ids_and_records_is_hashlibs_blake2b():
    """Entry ids, record names and billing keys hash with BLAKE2b without
    importing hashlib: the very digests hashlib's blake2b gives, so ids made
    by earlier versions stay the same. A key's hash here is pinned too."""
    import hashlib

    for data in (b"", b"k", os.urandom(333), "caf\u00e9 \U0001f600".encode()):
        for size in (8, 16, 64):
            assert common.blake2b(data, size) == hashlib.blake2b(data, digest_size=size).digest()
    assert common.key_hash("k") == int.from_bytes(hashlib.blake2b(b"k", digest_size=8).digest(), "big")
    assert f"{common.key_hash('toolu_01A') >> 32:08x}" == hashlib.blake2b(b"toolu_01A", digest_size=8).hexdigest()[:8]


def test_an_id_taken_by_another_key_in_an_earlier_run_moves_this_key_on():
    h = common.key_hash("k")
    other = ((h >> 32) << 32) | ((h + 1) & 0xffffffff)       # the same 8 hex digits, another key's
    ids = common.Ids(taken=[f"{other:016x}"])
    assert ids.find("k") is None                              # not this key's: looked on, none yet
    got = ids.get("k")
    assert got != f"{h >> 32:08x}" and got == f"{common.key_hash('k', 1) >> 32:08x}"
    assert ids.find("k") == got
    again = common.Ids(ids.taken)                             # the next run, told the list
    assert again.get("k") == got and again.taken == ids.taken


def test_ids_remembered_are_the_answers_asked_afresh(monkeypatch):
    """common.Ids remembers the answers for recent keys (a record names its
    parent, asked about just before): each is the one the hashes give when
    asked again, a key with no id yet included, before and after get gives
    it one, whatever the memo forgot meanwhile."""
    import random

    monkeypatch.setattr(common.Ids, "MEMO", 8)
    rng = random.Random(3)
    keys = [f"uuid-{i}" for i in range(40)]
    h = common.key_hash(keys[0])
    ids = common.Ids(taken=[f"{((h >> 32) << 32) | ((h + 1) & 0xffffffff):016x}"])   # keys[0] moves on
    given = {}
    for step in range(3000):
        k = rng.choice(keys[:6] if step < 1000 else keys)     # few keys (all remembered), then many
        got = ids.get(k) if rng.random() < 0.25 else ids.find(k)
        c, mine = ids._slot(k)
        assert got == (f"{c >> 32:08x}" if mine else None)
        if got is not None:
            assert given.setdefault(k, got) == got          # an id once given stays the key's
    assert len(given) > 30 and given[keys[0]] == f"{common.key_hash(keys[0], 1) >> 32:08x}"


def test_hashes_packed_past_small_are_the_same_set(monkeypatch):
    """common.Hashes: past SMALL the hashes go into one sorted array; what is
    there, its top 32 bits, its length and its 16-hex form are the same."""
    import random

    monkeypatch.setattr(common.Hashes, "SMALL", 8)
    rng = random.Random(7)
    values = [rng.getrandbits(64) for _ in range(300)]
    hashes, ref = common.Hashes(), set()
    for v in values:
        assert (v in hashes) is (v in ref)
        hashes.add(v)
        ref.add(v)
        assert len(hashes) == len(ref) and hashes.has_top(v >> 32)
    assert len(hashes.packed) > 250 and len(hashes.recent) < 8
    assert not any(hashes.has_top(v >> 32 ^ 1) for v in values if v >> 32 ^ 1 not in {w >> 32 for w in ref})
    monkeypatch.setattr(common.Hashes, "PIECE", 64)
    pieces = hashes.hex()
    assert [len(p) for p in pieces] == [1024] * (len(ref) // 64) + [len(ref) % 64 * 16]
    assert "".join(pieces) == "".join(f"{v:016x}" for v in sorted(ref))
    for kept in (pieces, [f"{v:016x}" for v in values]):
        again = common.Hashes(kept)
        assert len(again) == len(ref) and all(v in again for v in values) and again.hex() == pieces
    for garbage in (["0123"], ["zz" * 8], "0" * 16, [16], None):     # not ours: nothing
        assert len(common.Hashes(garbage)) == 0


def test_ids_and_billing_are_the_same_when_packed_and_across_runs(tmp_path, monkeypatch):
    """A transcript read in two runs (the state kept as JSON between them),
    its ids and seen responses packed (Hashes.SMALL small), gives what one
    run with them in sets gives, a response repeated in it billed once."""
    from pantolib.agents import claude_code

    records = cc_session(n=120)
    records[100:102] = [dict(r, uuid=r["uuid"] + "x") for r in records[40:42]]   # a response again
    records[100]["parentUuid"] = records[99]["uuid"]
    records[102]["parentUuid"] = records[101]["uuid"]
    whole = tmp_path / "whole.jsonl"
    write(whole, records)
    want = list(claude_code.Reader(str(whole)))
    monkeypatch.setattr(common.Hashes, "SMALL", 16)
    part = tmp_path / "part.jsonl"
    write(part, records[:150])
    first = claude_code.Reader(str(part))
    got = list(first)
    state = orjson.loads(orjson.dumps(first.state))
    assert len(first.ids.packed) > 16 and isinstance(state["taken"], list)
    with open(part, "ab") as f:
        f.write(b"".join(orjson.dumps(r) + b"\n" for r in records[150:]))
    got += list(claude_code.Reader(str(part), first.end, state))
    assert [(e.get("id"), e.get("parentId"), e.get("billedIn")) for e in got[1:]] == \
        [(e.get("id"), e.get("parentId"), e.get("billedIn")) for e in want[1:]]
    assert sum(1 for e in got if e.get("billedIn")) == 1


@pytest.mark.parametrize("value,expected", [
    (True, None), (False, None),
    (1767348000, "2026-01-02T10:00:00.000Z"),                 # Unix seconds
    (1767348000123, "2026-01-02T10:00:00.123Z"),              # Unix milliseconds
    (1767348000.5, "2026-01-02T10:00:00.500Z"),
    ("2026-01-02T10:00:00Z", "2026-01-02T10:00:00.000Z"),
    ("2026-01-02T12:00:00.250+02:00", "2026-01-02T10:00:00.250Z"),
    ("2026-01-02 10:00:00", "2026-01-02T10:00:00.000Z"),      # no zone: UTC
    ("yesterday", None), ("", None), (None, None), ([1], None),
    (10 ** 22, None),                                         # beyond the platform's time
])
def test_iso_of_each_kind_of_source_time(value, expected):
    assert common.iso(value) == expected


def test_iso_of_a_time_past_year_9999_or_before_1970_is_none():
    assert common.iso(10 ** 18) is None and common.iso(common.LAST_MS) is None and common.iso(-1) is None
    assert common.iso(common.LAST_MS - 1) == "9999-12-31T23:59:59.999Z"
    assert common.iso("9999-12-31T23:59:59.999+00:00") == "9999-12-31T23:59:59.999Z"


@pytest.mark.parametrize("content,expected", [
    (None, ""),
    (["a", {"type": "text", "text": "b"}, {"type": "image", "n": 1}, None], 'a\nb\n{"type":"image","n":1}'),
    ({"exit": 0}, '{"exit":0}'),
    (7, "7"),
])
def test_text_of_parts_and_other_values(content, expected):
    assert common.text_of(content) == expected


# -- Claude Code ---------------------------------------------------------------------------

def test_claude_record_variants_one_file(tmp_path):
    """A transcript that starts with bookkeeping, holds a blank line and a JSON
    line that is not an object, a compaction boundary with no summary before any
    reply, blocks of kinds panto does not keep, a reply whose content is a
    string and that has no usage, and an empty title."""
    T = "2025-06-01T10:00:0"
    boundary = {**cc_common("b1", None, T + "0.500Z"), "type": "system", "subtype": "compact_boundary",
                "content": "Conversation compacted", "logicalParentUuid": None}
    plain = cc_assistant("a1", "u1", "msg_1", "a plain answer", ts=T + "2.000Z")
    del plain["message"]["usage"]
    odd = cc_assistant("a2", "a1", "msg_2", [{"type": "redacted_thinking", "data": "REDACTED"},
                                             {"type": "server_tool_use", "id": "s1", "name": "web_search"}],
                       cc_usage(3, 4), ts=T + "3.000Z")
    f = write(tmp_path / f"{CC_SID}.jsonl", [
        {"type": "file-history-snapshot", "messageId": "m0", "snapshot": {}, "isSnapshotUpdate": False},
        b"\n",
        b"[1, 2]\n",
        boundary,
        cc_user("u1", "b1", [cc_text("look"), {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}},
                             {"type": "document", "source": {"type": "text", "data": "d"}}], ts=T + "1.000Z"),
        plain, odd,
        {"type": "custom-title", "customTitle": "   ", "sessionId": CC_SID},
    ])
    out, err = imported(f)                       # detected from its first line: bookkeeping
    assert out[0]["type"] == "session" and out[0]["id"] == CC_SID and out[0]["timestamp"] == T + "0.500Z"
    comp = out[1]
    assert comp["type"] == "compaction" and comp["summary"] == "" and comp["parentId"] is None
    assert "model" not in comp and comp["usageNotRecorded"] is True
    u, a1, a2 = out[2:]
    assert u["parentId"] == comp["id"] and u["message"]["content"] == [{"type": "text", "text": "look"}]
    assert "model" not in u                      # no reply before it
    assert a1["message"]["content"] == [{"type": "text", "text": "a plain answer"}]
    assert "usage" not in a1["message"] and a1["message"]["stopReason"] == "stop"
    assert a2["message"]["content"] == [{"type": "redactedThinking", "data": "REDACTED"}]
    assert a2["message"]["usage"] == {"input": 3, "output": 4}
    assert len(out) == 5                         # the empty title is left out
    assert err == f"panto-log: {f}: 1 malformed line skipped (-v names them)\n"
    _, err = imported(f, "-v")
    assert err == f"panto-log: {f}:3: not a JSON object; skipped\n"


def test_claude_a_string_reply_and_tool_result_of_none(tmp_path):
    f = write(tmp_path / f"{CC_SID}.jsonl", [
        cc_user("u1", None, "run it"),
        cc_assistant("a1", "u1", "msg_1", [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"c": 1}}],
                     stop="tool_use"),
        cc_user("u2", "a1", [{"type": "tool_result", "tool_use_id": "t1", "content": None, "is_error": True}],
                ts="2025-06-01T10:00:02.000Z"),
        cc_assistant("a2", "u2", "msg_2", "", ts="2025-06-01T10:00:03.000Z"),
    ])
    out, _ = imported(f)
    assert out[3]["message"]["content"] == [{"type": "toolResult", "toolUseId": "t1", "content": "",
                                             "isError": True}]
    assert out[4]["message"]["content"] == []     # an empty string reply: no block


def test_claude_default_folders_and_odd_entries_in_them(isolated):
    """Without CLAUDE_CONFIG_DIR: ~/.claude and ~/.config/claude. A stray file in
    projects/, a session folder without subagents/, a subagents that is a file,
    a dangling agent link, and a transcript whose first line is not JSON."""
    home = os.environ["HOME"]
    one = write(os.path.join(home, ".claude", "projects", "-home-u-proj", f"{CC_SID}.jsonl"), cc_session(n=1))
    two = write(os.path.join(home, ".config", "claude", "projects", "-home-u-proj", f"{B_SID}.jsonl"),
                [b"{not json\n"] + cc_session(B_SID, n=1))
    projects = os.path.join(home, ".claude", "projects")
    with open(os.path.join(projects, "README"), "w") as f:
        f.write("not a project")
    os.makedirs(os.path.join(projects, "-home-u-proj", CC_SID, "tool-results"))
    os.makedirs(os.path.join(projects, "-home-u-proj", "other"))
    with open(os.path.join(projects, "-home-u-proj", "other", "subagents"), "w") as f:
        f.write("a file")
    subs = os.path.join(home, ".config", "claude", "projects", "-home-u-proj", B_SID, "subagents")
    os.makedirs(subs)
    os.symlink(os.path.join(subs, "gone.jsonl"), os.path.join(subs, "agent-gone.jsonl"))
    err = import_all()
    assert err == [f"panto-log: {two}: 1 malformed line skipped (-v names them)",
                   "panto-log: 2 sessions (2 new, 0 grown, 0 unchanged), added 4 entries; skipped: split line 2; "
                   "1 malformed line"]
    assert read(session_file(CC_SID, "/home/u/proj")) == log("import", one).stdout
    assert read(session_file(B_SID, "/home/u/proj")) == log("import", two).stdout
    assert import_all("-v") == ["panto-log: 2 sessions (0 new, 0 grown, 2 unchanged), added 0 entries"]


def test_claude_a_folder_named_like_a_transcript_fails_alone(claude_home):
    a = write(cc_path(claude_home), cc_session(n=1))
    bad = os.path.join(os.path.dirname(a), CC_SID, "subagents", "agent-x.jsonl")
    os.makedirs(bad)
    err = import_all(status=1)
    assert err[0].startswith(f"panto-log: {bad}: ") and "directory" in err[0].lower()
    assert err[1] == ("panto-log: 1 session (1 new, 0 grown, 0 unchanged), added 2 entries; skipped: split line 1; "
                      "1 source failed")
    assert os.path.exists(session_file(CC_SID, "/home/u/proj"))


def test_claude_only_the_most_recent_left_out_records_stand_for_their_parents(tmp_path):
    """A record left out stands for its parent as a parent; only the 2000 most
    recent are remembered: a prompt naming an older one hangs on the last entry."""
    recs = [cc_user("u1", None, "q"), cc_assistant("a1", "u1", "msg_1", [cc_text("a")]),
            {"type": "progress", "uuid": "old", "parentUuid": "u1", "sessionId": CC_SID},
            *[{"type": "progress", "uuid": f"p{i}", "parentUuid": "a1", "sessionId": CC_SID} for i in range(1999)],
            {"type": "progress", "uuid": "new", "parentUuid": "u1", "sessionId": CC_SID}]
    recs += [cc_user("u2", "old", "to the forgotten", ts="2025-06-01T10:00:05.000Z"),
             cc_user("u3", "new", "to the remembered", ts="2025-06-01T10:00:06.000Z")]
    out, _ = imported(write(tmp_path / f"{CC_SID}.jsonl", recs))
    u1, a1, u2, u3 = messages(out)
    assert u3["parentId"] == u1["id"]            # "new" is among the 2000 most recent: it stands for u1
    assert u2["parentId"] == a1["id"]            # "old" was the 2001st: forgotten, the last entry instead


def test_claude_a_session_with_no_reply_yet_is_not_created_then_is(claude_home):
    a = cc_path(claude_home)
    write(a, [cc_user("u1", None, "first question")])
    assert import_all() == ["panto-log: 1 session (0 new, 0 grown, 1 unchanged), added 0 entries"]
    assert not os.path.exists(session_file(CC_SID, "/home/u/proj"))
    write(a, [cc_assistant("a1", "u1", "msg_1", [cc_text("answer")])], mode="ab")
    assert import_all() == ["panto-log: 1 session (1 new, 0 grown, 0 unchanged), added 2 entries"]
    assert read(session_file(CC_SID, "/home/u/proj")) == log("import", a).stdout


def test_claude_a_deleted_panto_file_is_made_again_whole(claude_home):
    a = write(cc_path(claude_home), cc_session(n=1))
    import_all()
    path = session_file(CC_SID, "/home/u/proj")
    os.unlink(path)
    more = cc_session(n=1, start=1)
    more[0]["parentUuid"] = "11111111-b0"
    write(a, more, mode="ab")
    assert import_all()[-1] == ("panto-log: 1 session (1 new, 0 grown, 0 unchanged), added 4 entries; "
                                "skipped: split line 2")
    assert read(path) == log("import", a).stdout


def test_claude_a_source_replaced_by_another_file_is_read_from_the_top(claude_home):
    a = write(cc_path(claude_home), cc_session(n=1))
    import_all()
    before = os.stat(a).st_ino
    new = write(str(a) + ".new", cc_session(n=2))         # made while the old one still exists: another inode
    os.replace(new, a)
    assert os.stat(a).st_ino != before
    assert import_all()[-1] == ("panto-log: 1 session (0 new, 1 grown, 0 unchanged), added 2 entries; "
                                "skipped: split line 2")
    ids = [e["id"] for e in lines(read(session_file(CC_SID, "/home/u/proj")))[1:]]
    assert len(ids) == len(set(ids)) == 4


def test_claude_a_source_cut_shorter_in_place_is_read_from_the_top(claude_home):
    a = write(cc_path(claude_home), cc_session(n=2))
    import_all()
    ino = os.stat(a).st_ino
    write(a, cc_session(n=1))                               # the same file, truncated and rewritten shorter
    assert os.stat(a).st_ino == ino
    assert import_all() == ["panto-log: 1 session (0 new, 0 grown, 1 unchanged), added 0 entries; "
                            "skipped: split line 1"]
    write(a, cc_session(n=3))                               # read on after turn 0; turn 1 is there already
    assert import_all()[-1] == ("panto-log: 1 session (0 new, 1 grown, 0 unchanged), added 2 entries; "
                                "skipped: split line 2")
    assert read(session_file(CC_SID, "/home/u/proj")) == log("import", a).stdout


def test_claude_sources_in_the_order_copies_are_paid_in(claude_home):
    from pantolib.agents import claude_code

    late = write(cc_path(claude_home), cc_session(n=1))
    early = cc_session(B_SID, n=1)
    for r in early:
        r["timestamp"] = "2025-05-01T10:00:00.000Z"
    early = write(cc_path(claude_home, B_SID, "-home-u-other"), [b"[]\n", b"\n"] + early + [b"\n"])
    env = dict(os.environ)
    assert claude_code.sources(env) == [early, late]
    assert sorted(claude_code.find(env)) == sorted([early, late])


def test_claude_a_large_session_printed_in_pieces_is_whole(tmp_path):
    f = write(tmp_path / f"{CC_SID}.jsonl", cc_session(n=300))
    p = log("import", str(f))
    assert p.returncode == 0 and len(p.stdout) > 1 << 17
    out = lines(p.stdout)
    assert len(out) == 601 and [e["message"]["content"][0]["text"] for e in out[-2:]] == ["question 299",
                                                                                          "answer 299"]
    assert [e["parentId"] for e in out[2:]] == [e["id"] for e in out[1:-1]]


def test_claude_a_file_of_more_than_1500_responses_is_paid_once(claude_home):
    """Who paid is written while the file is still being read (memory stays
    bounded): a later copy still finds them all."""
    write(cc_path(claude_home), cc_session(n=1600))
    copy = cc_session(n=1600)[-3:]
    for r in copy:
        r["sessionId"] = B_SID
    copy[0]["parentUuid"] = None
    write(cc_path(claude_home, B_SID), copy)
    assert import_all()[-1].startswith("panto-log: 2 sessions (2 new, 0 grown, 0 unchanged), added 3202 entries")
    first = lines(read(session_file(CC_SID, "/home/u/proj")))
    assert all("usage" in e["message"] for e in first[2::2])
    second = lines(read(session_file(B_SID, "/home/u/proj")))
    assert second[-1]["billedIn"] == CC_SID and "usage" not in second[-1]["message"]


def test_a_damaged_billing_database_is_started_again(claude_home):
    write(cc_path(claude_home), cc_session(n=1))
    state = os.path.join(os.environ["XDG_STATE_HOME"], "panto", "import")
    os.makedirs(state)
    with open(os.path.join(state, "billing.sqlite"), "wb") as f:
        f.write(b"this is not a database, not even its header" * 100)
    assert import_all()[-1].startswith("panto-log: 1 session (1 new")
    import sqlite3
    db = sqlite3.connect(os.path.join(state, "billing.sqlite"))
    assert db.execute("SELECT count(*) FROM paid2").fetchone()[0] == 2
    out = lines(read(session_file(CC_SID, "/home/u/proj")))
    assert out[-1]["message"]["usage"] == {"input": 100, "output": 20, "cacheRead": 7}


def test_a_session_file_that_cannot_be_created_fails_alone(claude_home, tmp_path, monkeypatch):
    write(cc_path(claude_home), cc_session(n=1))
    blocked = tmp_path / "sessions-file"
    blocked.write_text("a file where the sessions folder should be")
    monkeypatch.setenv("PANTO_SESSION_DIR", str(blocked))
    err = import_all(status=1)
    assert len(err) == 2 and err[0].startswith(f"panto-log: {cc_path(claude_home)}: ")
    assert err[1].endswith("; 1 source failed")
    assert blocked.read_text() == "a file where the sessions folder should be"
    monkeypatch.setenv("PANTO_SESSION_DIR", str(tmp_path / "sessions"))     # nothing was remembered
    assert import_all()[-1].startswith("panto-log: 1 session (1 new")


# -- --from -------------------------------------------------------------------------------

def test_import_from_a_named_agent_and_an_unknown_one(tmp_path):
    f = write(tmp_path / f"{CC_SID}.jsonl", cc_session(n=1))
    out, _ = imported(f, "--from=claude-code")
    assert out[0]["source"]["agent"] == "claude-code" and len(out) == 3
    assert_clean_error(log("import", "--from=vim", str(f)), 1, "panto-log")
    p = log("import", "--from=vim", str(f))
    assert p.stderr == b"panto-log: unknown agent 'vim' (one of claude-code, codex, pi, opencode)\n"
    assert p.stdout == b""


# -- pi -----------------------------------------------------------------------------------

def pi_rec(kind, eid, parent, ts, **fields):
    return {"type": kind, "id": eid, "parentId": parent, "timestamp": ts, **fields}


def pi_msg(eid, parent, ts, **message):
    return pi_rec("message", eid, parent, ts, message=message)


def test_pi_record_variants(tmp_path):
    """Times in other ISO forms or none, thinking kept redacted or with a
    signature that looks like JSON but is not, the person's shell commands
    (cancelled, failed, truncated), a tool error, a blank line, a second header
    and a message entry without its message."""
    (tmp_path / "notjson.jsonl").write_bytes(b"not json at all\n")
    usage = {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 3}
    f = write(tmp_path / "s.jsonl", [
        {"type": "session", "version": 3, "id": PI_SID, "timestamp": "2026-01-02T12:00:00+02:00", "cwd": "/proj",
         "parentSession": str(tmp_path / "notjson.jsonl")},
        pi_msg("e1", None, "2026-01-02T10:00:01Z", role="user", content="hi"),
        b"\n",
        pi_msg("e2", "e1", "2026-01-02T10:00:02", role="assistant", provider="openai", model="gpt-5",
               api="openai-responses", stopReason="stop", usage=usage,
               content=[{"type": "thinking", "thinking": "", "thinkingSignature": "SECRET", "redacted": True},
                        {"type": "thinking", "thinking": "hm", "thinkingSignature": "{not json"}]),
        pi_msg("e3", "e2", "yesterday", role="bashExecution", command="sleep 9", output="", exitCode=None,
               cancelled=True),
        pi_msg("e4", "e3", "2026-01-02T10:00:04.000Z", role="bashExecution", command="false", output="x",
               exitCode=2, truncated=True, fullOutputPath="/tmp/out.txt"),
        pi_msg("e5", "e4", "2026-01-02T10:00:05.000Z", role="toolResult", toolCallId="c1",
               content=[{"type": "text", "text": "boom"}], isError=True),
        {"type": "session", "version": 3, "id": PI_SID, "timestamp": "2026-01-02T10:00:06.000Z", "cwd": "/proj"},
        pi_rec("message", "e6", "e5", "2026-01-02T10:00:07.000Z", message="not an object"),
        pi_msg("e7", "e6", "2026-01-02T10:00:08.000Z", role="user", content="after"),
    ])
    out, err = imported(f)
    h = out[0]
    assert h["timestamp"] == "2026-01-02T10:00:00.000Z" and h["relation"] == "fork"
    assert h["parentSession"] == str(uuid.uuid5(uuid.NAMESPACE_URL, "pi:notjson.jsonl"))
    m = messages(out)
    assert [e["timestamp"] for e in m] == ["2026-01-02T10:00:01.000Z", "2026-01-02T10:00:02.000Z",
                                           "1970-01-01T00:00:00.000Z", "2026-01-02T10:00:04.000Z",
                                           "2026-01-02T10:00:05.000Z", "2026-01-02T10:00:08.000Z"]
    assert m[1]["message"]["content"] == [{"type": "redactedThinking", "data": "SECRET"},
                                          {"type": "thinking", "thinking": "hm", "signature": "{not json"}]
    assert m[2]["message"]["content"][0]["text"] == "Ran `sleep 9`\n(no output)\n\n(command cancelled)"
    assert m[3]["message"]["content"][0]["text"] == ("Ran `false`\n```\nx\n```\n\nCommand exited with code 2"
                                                     "\n\n[Output truncated. Full output: /tmp/out.txt]")
    assert m[4]["message"]["content"] == [{"type": "toolResult", "toolUseId": "c1", "content": "boom",
                                           "isError": True}]
    assert m[5]["parentId"] == m[4]["id"]         # the entry without a message stands for its parent
    assert err == f"panto-log: {f}: 2 malformed lines skipped (-v names them)\n"
    _, err = imported(f, "-v")
    assert err == (f"panto-log: {f}:8: a second session header; skipped\n"
                   f"panto-log: {f}:9: a message entry without a message; skipped\n")


def test_pi_a_fork_of_a_file_that_is_gone_or_a_folder(tmp_path):
    (tmp_path / "folder.jsonl").mkdir()
    for parent in ("missing.jsonl", "folder.jsonl"):
        f = write(tmp_path / "s.jsonl", [
            {"type": "session", "version": 3, "id": PI_SID, "timestamp": "2026-01-02T10:00:00.000Z", "cwd": "/p",
             "parentSession": parent}])
        out, _ = imported(f)
        assert out == [{"type": "session", "version": 1, "id": PI_SID, "timestamp": "2026-01-02T10:00:00.000Z",
                        "cwd": "/p", "source": {"agent": "pi", "path": str(f), "id": PI_SID},
                        "parentSession": str(uuid.uuid5(uuid.NAMESPACE_URL, f"pi:{parent}")), "relation": "fork"}]


def test_pi_agent_folder_under_home_by_tilde(isolated, monkeypatch):
    monkeypatch.setenv("PI_CODING_AGENT_DIR", "~/piagent")
    src = write(os.path.join(os.environ["HOME"], "piagent", "sessions", "--proj--", "2026_x.jsonl"), [
        {"type": "session", "version": 3, "id": PI_SID, "timestamp": "2026-01-02T10:00:00.000Z", "cwd": "/proj"},
        pi_msg("e1", None, "2026-01-02T10:00:01.000Z", role="user", content="hi"),
        pi_msg("e2", "e1", "2026-01-02T10:00:02.000Z", role="assistant", provider="anthropic", model="m",
               api="anthropic-messages", stopReason="stop", content=[{"type": "text", "text": "yo"}],
               usage={"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2})])
    assert import_all("--from=pi") == ["panto-log: 1 session (1 new, 0 grown, 0 unchanged), added 2 entries"]
    assert read(session_file(PI_SID, "/proj")) == log("import", src).stdout


def _not_pi(monkeypatch):
    root = os.path.join(os.environ["HOME"], "pi")
    monkeypatch.setenv("PI_CODING_AGENT_DIR", root)
    return write(os.path.join(root, "sessions", "--proj--", "a.jsonl"), [{"type": "note", "text": "hello"}])


def test_pi_a_file_that_is_not_a_pi_session_fails_alone(isolated, monkeypatch):
    bad = _not_pi(monkeypatch)
    err = import_all(status=1)
    assert len(err) == 2 and err[0].startswith(f"panto-log: {bad}: ")
    assert err[0].endswith(": not a pi session file (no session header on line 1)")
    assert err[1] == "panto-log: 0 sessions (0 new, 0 grown, 0 unchanged), added 0 entries; 1 source failed"
    p = log("import", bad)
    assert_clean_error(p, 1, "panto-log")
    assert p.stderr == f"panto-log: {bad}: not a session file of claude-code, codex, pi or opencode\n".encode()
    p = log("import", "--from=pi", bad)
    assert_clean_error(p, 1, "panto-log")
    assert p.stderr == f"panto-log: {bad}: not a pi session file (no session header on line 1)\n".encode()


def test_a_failed_source_is_named_once(isolated, monkeypatch):
    bad = _not_pi(monkeypatch)
    err = import_all(status=1)
    assert err[0] == f"panto-log: {bad}: not a pi session file (no session header on line 1)"


# -- opencode -------------------------------------------------------------------------------

@pytest.fixture
def oc_home(isolated, monkeypatch):
    d = os.path.join(os.environ["HOME"], "opencode")
    os.makedirs(d)
    monkeypatch.setenv("OPENCODE_DATA_DIR", d)
    return d


PNG = "iVBORw0KGgo="


def test_opencode_database_variants_through_import_all(oc_home):
    """An ignored-only prompt, a message of an unknown role, a file that is not
    an image, a tool that returned images, one interrupted while running, an
    answer with nothing in it, a compaction without tokens and a message
    without times; then a message more: read on after the last one."""
    db = oc_db(os.path.join(oc_home, "opencode.db"), SES, [
        oc_user("msg_01", 1, [{"type": "text", "text": "hidden", "ignored": True}]),
        oc_user("msg_02", 2, [{"type": "text", "text": "see"},
                              {"type": "file", "mime": "text/plain", "url": "data:text/plain;base64,eA=="}]),
        ("msg_03", 3, {"role": "system", "time": {"created": OC_T0 + 3000}}, [{"type": "text", "text": "x"}]),
        oc_answer("msg_04", 4, [{"type": "tool", "callID": "c1", "tool": "screenshot",
                                 "state": {"status": "completed", "input": {}, "output": "shot",
                                           "attachments": [{"mime": "image/png", "url": f"data:image/png;base64,{PNG}"},
                                                           "junk"]}},
                                {"type": "tool", "callID": "c2", "tool": "bash",
                                 "state": {"status": "running", "input": {"command": "sleep"}}}],
                  finish="tool-calls"),
        oc_answer("msg_05", 5, [{"type": "step-start"}], tokens={"input": 0, "output": 0, "reasoning": 0,
                                                                 "cache": {"read": 0, "write": 0}}),
        oc_answer("msg_06", 6, [{"type": "text", "text": "the summary"}], tokens=None, summary=True),
        ("msg_07", 7, {"role": "assistant", "sessionID": SES, "tokens": {"input": 1, "output": 2},
                       "finish": "stop", "error": None}, [{"type": "text", "text": "timeless"}]),
        oc_user("msg_08", 8, [{"type": "text", "text": "last"}]),
    ])
    for mid in ("msg_06",):
        data = orjson.loads(db.execute("SELECT data FROM message WHERE id=?", (mid,)).fetchone()[0])
        del data["tokens"]
        db.execute("UPDATE message SET data=? WHERE id=?", (orjson.dumps(data).decode(), mid))
    db.commit()
    err = import_all()
    assert err[-1] == ("panto-log: 1 session (1 new, 0 grown, 0 unchanged), added 7 entries; skipped: "
                       "empty message 2, message:system 1, part:file 1, part:step-start 1, part:text 1")
    sid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"opencode:{SES}"))
    path = session_file(sid, "/proj")
    out = lines(read(path))
    assert out[0]["source"] == {"agent": "opencode", "path": os.path.join(oc_home, "opencode.db"), "id": SES}
    assert out[1] == {"type": "sessionInfo", "id": out[1]["id"], "parentId": None,
                      "timestamp": "2026-01-02T10:00:00.000Z", "name": "A title"}
    see, tools, results, comp, timeless, last = out[2:]
    assert see["message"]["content"] == [{"type": "text", "text": "see"}]
    assert results["message"]["content"] == [
        {"type": "toolResult", "toolUseId": "c1", "content": "shot"},
        {"type": "toolResult", "toolUseId": "c2", "content": "[Tool execution was interrupted]", "isError": True},
        {"type": "image", "mediaType": "image/png", "data": PNG}]
    assert comp["type"] == "compaction" and comp["summary"] == "the summary" and comp["usageNotRecorded"] is True
    assert "usage" not in comp
    assert timeless["timestamp"] == "1970-01-01T00:00:00.000Z"
    assert timeless["message"]["usage"] == {"input": 1, "output": 2}
    assert last["message"]["content"] == [{"type": "text", "text": "last"}]
    assert import_all() == ["panto-log: 1 session (0 new, 0 grown, 1 unchanged), added 0 entries"]
    oc_add(db, SES, [oc_answer("msg_09", 9, [{"type": "text", "text": "more"}])])
    assert import_all() == ["panto-log: 1 session (0 new, 1 grown, 0 unchanged), added 1 entry"]
    grown = lines(read(path))
    assert grown[:-1] == out and grown[-1]["message"]["content"] == [{"type": "text", "text": "more"}]
    assert grown[-1]["parentId"] == last["id"]


def test_opencode_a_database_without_its_part_table(oc_home):
    no_parts = ";".join(s for s in OC_SCHEMA.split(";") if "TABLE part" not in s)
    path = os.path.join(oc_home, "opencode.db")
    oc_db(path, SES, [oc_user("msg_01", 1, [])], schema=no_parts)
    p = log("import", "--session", SES, path)
    assert_clean_error(p, 1, "panto-log")
    assert p.stdout == b"" and b"cannot read the opencode database (no such table: part)" in p.stderr
    err = import_all(status=1)
    assert err[0] == f"panto-log: {path}#{SES}: cannot read the opencode database (no such table: part)"
    assert err[1] == "panto-log: 0 sessions (0 new, 0 grown, 0 unchanged), added 0 entries; 1 source failed"
    assert not os.path.exists(os.environ["PANTO_SESSION_DIR"])


def test_opencode_a_channel_database_that_cannot_be_opened(oc_home):
    os.makedirs(os.path.join(oc_home, "opencode-beta.db"))          # a folder where the database should be
    err = import_all(status=1)
    assert len(err) == 2 and err[0].startswith("panto-log: opencode: ")
    assert "opencode-beta.db: cannot read the opencode database" in err[0]
    assert err[0].endswith("; its sessions were left out")
    assert err[1] == "panto-log: 0 sessions (0 new, 0 grown, 0 unchanged), added 0 entries; 1 source failed"


def test_opencode_an_unreadable_database_is_named_once(oc_home):
    db = os.path.join(oc_home, "opencode-beta.db")
    os.makedirs(db)
    err = import_all(status=1)
    assert err[0].startswith(f"panto-log: opencode: {db}: cannot read the opencode database (")
    assert err[0].endswith("); its sessions were left out") and err[0].count(db) == 1


def test_opencode_legacy_files_malformed_ones_skipped(oc_home):
    storage = os.path.join(oc_home, "storage")
    sid = "ses_legacy0000000000000001"
    with open(os.path.join(_mk(storage, "session", "prj"), f"{sid}.json"), "wb") as f:
        f.write(orjson.dumps({"id": sid, "directory": "/old", "title": "Old one",
                              "time": {"created": OC_T0, "updated": OC_T0 + 9000}}))
    with open(os.path.join(_mk(storage, "session", "prj"), "ses_broken.json"), "wb") as f:
        f.write(b"{broken")
    mdir = _mk(storage, "message", sid)
    for name, msg in (("msg_01.json", {"role": "user", "time": {"created": OC_T0 + 1000}}),
                      ("msg_02.json", {"role": "assistant", "time": {"created": OC_T0 + 2000,
                                                                     "completed": OC_T0 + 2500},
                                       "providerID": "anthropic", "modelID": "claude-sonnet-4-5",
                                       "tokens": {"input": 4, "output": 2}, "finish": "stop"})):
        with open(os.path.join(mdir, name), "wb") as f:
            f.write(orjson.dumps(msg))
    with open(os.path.join(mdir, "msg_00.json"), "wb") as f:
        f.write(b"[]")
    with open(os.path.join(mdir, "notes.txt"), "w") as f:
        f.write("not a message")
    for mid, parts in (("msg_01", [{"type": "text", "text": "old question"}]),
                       ("msg_02", [{"type": "text", "text": "old answer"}])):
        pdir = _mk(storage, "part", mid)
        for n, part in enumerate(parts):
            with open(os.path.join(pdir, f"prt_{n}.json"), "wb") as f:
                f.write(orjson.dumps(part))
        with open(os.path.join(pdir, "prt_9.json"), "wb") as f:
            f.write(b"{torn")
    err = import_all(status=1)
    src = os.path.join(storage, "session", "prj", f"{sid}.json")
    broken = os.path.join(storage, "session", "prj", "ses_broken.json")
    assert f"panto-log: {src}: 3 malformed lines skipped (-v names them)" in err
    assert any(e.startswith(f"panto-log: {broken}: ") and e.endswith(": not an opencode session file") for e in err)
    assert err[-1] == ("panto-log: 1 session (1 new, 0 grown, 0 unchanged), added 3 entries; 3 malformed lines; "
                       "1 source failed")
    out = lines(read(session_file(str(uuid.uuid5(uuid.NAMESPACE_URL, f"opencode:{sid}")), "/old")))
    assert [e.get("name") or e["message"]["content"][0]["text"] for e in out[1:]] == \
        ["Old one", "old question", "old answer"]
    os.unlink(session_file(str(uuid.uuid5(uuid.NAMESPACE_URL, f"opencode:{sid}")), "/old"))
    st = os.stat(src)
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 10 ** 9))     # opencode rewrote it (the same bytes)
    err = import_all("-v", status=1)           # its panto file is gone: read again, each bad file named
    assert [e for e in err if e.startswith(f"panto-log: {src}:")] == [
        f"panto-log: {src}:msg_00.json: not a JSON object; skipped",
        f"panto-log: {src}:prt_9.json: not a JSON object; skipped",
        f"panto-log: {src}:prt_9.json: not a JSON object; skipped"]
    assert err[-1] == ("panto-log: 1 session (1 new, 0 grown, 0 unchanged), added 3 entries; 3 malformed lines; "
                       "1 source failed")


def _mk(*parts):
    d = os.path.join(*parts)
    os.makedirs(d, exist_ok=True)
    return d


def test_a_session_made_by_another_writer_while_import_holds_it_gets_only_what_it_lacks(tmp_path):
    """A first import takes a session's lines all at once (Batch.add_lines)
    once it found no file; when another writer makes the file before the
    import creates it, the import adds to it what it lacks, each entry once,
    and never replaces it."""
    from builders import session_bytes

    from pantolib import session

    whole = session_bytes(tmp_path, turns=3)
    head, body = whole.split(b"\n", 1)
    path = str(tmp_path / "s.jsonl")
    batch = session.Batch(path, orjson.loads(head), head + b"\n", sync_dir=False, exists=False)
    batch.add_lines(body, body.count(b"\n"), True)
    theirs = b"".join(whole.splitlines(keepends=True)[:3])    # header and the first turn, made meanwhile
    with open(path, "xb") as f:
        f.write(theirs)
    try:
        assert batch.finish() == 4
    finally:
        batch.close()
    got = read(path)
    assert got.startswith(theirs) and sorted(got.splitlines()) == sorted(whole.splitlines())
