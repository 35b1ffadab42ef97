"""opencode's sessions as panto entries (pantolib.agents.opencode): the
SQLite database (opened read-only, in use by a writer) and the legacy JSON
files, the mapping of messages and parts, usage with reasoning inside or
outside output, and reading on from where a run stopped."""
import hashlib
import os
import re
import sqlite3

import orjson
import pytest
from fixtures.records import OC_SCHEMA as SCHEMA, OC_T0 as T0

from pantolib.agents import opencode
from pantolib import stream
from pantolib.errors import SessionError

SES = "ses_4f1a2b3c4d5eAbCdEfGhIjKlMn"
SUB = "ses_4f1a2b3c4d5fSubAgentXyZ"
PNG = "iVBORw0KGgo="


def iso(s):
    return f"2026-01-02T10:00:{s:02d}.000Z"


def tokens(i, o, r=0, cr=0, cw=0, total=None):
    t = {"input": i, "output": o, "reasoning": r, "cache": {"read": cr, "write": cw}}
    if total is not None:
        t["total"] = total
    return t


def user(mid, s, parts, model=("anthropic", "claude-sonnet-4-5")):
    return (mid, s, {"role": "user", "time": {"created": T0 + s * 1000}, "agent": "build",
                     "model": {"providerID": model[0], "modelID": model[1]}}, parts)


def answer(mid, s, parent, parts, tok, finish="stop", done=True, model=("anthropic", "claude-sonnet-4-5"), **extra):
    time = {"created": T0 + s * 1000}
    if done:
        time["completed"] = T0 + s * 1000 + 500
    info = {"role": "assistant", "time": time, "parentID": parent, "modelID": model[1], "providerID": model[0],
            "mode": "build", "agent": "build", "path": {"cwd": "/proj", "root": "/proj"}, "cost": 0.01,
            "tokens": tok, **extra}
    if finish:
        info["finish"] = finish
    return (mid, s, info, parts)


def text(t, **kw):
    return {"type": "text", "text": t, **kw}


def step(kind="step-start"):
    return {"type": kind}


def tool(call, name, args, status="completed", **state):
    st = {"status": status, "input": args, **state}
    if status == "completed":
        st.setdefault("title", name)
        st.setdefault("metadata", {})
        st.setdefault("time", {"start": T0, "end": T0 + 1})
    return {"type": "tool", "callID": call, "tool": name, "state": st}


MESSAGES = [
    user("msg_01", 1, [text("look at this"), {"type": "file", "mime": "image/png", "filename": "a.png",
                                              "url": f"data:image/png;base64,{PNG}"},
                       text("Called the Read tool", synthetic=True), text("hidden", ignored=True),
                       {"type": "agent", "name": "build"}]),
    answer("msg_02", 2, "msg_01",
           [step(), {"type": "reasoning", "text": "thinking", "time": {"start": T0},
                     "metadata": {"anthropic": {"signature": "SIG"}}},
            text("I will list."), tool("call_1", "bash", {"command": "ls"}, output="a.png\n"),
            tool("call_2", "read", {"path": "x"}, status="error", error="no such file",
                 time={"start": T0, "end": T0 + 1}),
            step("step-finish")],
           tokens(10, 5, r=7, cr=100, cw=20, total=142), finish="tool-calls"),
    answer("msg_03", 3, "msg_01", [step(), text("Done."), step("step-finish")],
           tokens(3, 9, r=4, cr=130, total=142)),
    user("msg_04", 4, [{"type": "compaction", "auto": True, "tail_start_id": "msg_03"}]),
    answer("msg_05", 5, "msg_04", [text("Summary of it all.")], tokens(200, 50), summary=True),
    user("msg_06", 6, [text("next")], model=("openai", "gpt-5")),
    answer("msg_07", 7, "msg_06", [{"type": "reasoning", "text": "r", "time": {"start": T0},
                                    "metadata": {"openai": {"itemId": "rs_9", "reasoningEncryptedContent": "ENC"}}},
                                   text("ok")],
           tokens(40, 0, r=25), model=("openai", "gpt-5"), error={"name": "MessageAbortedError",
                                                                   "data": {"message": "aborted"}}),
]

SONNET = {"provider": "anthropic", "model": "claude-sonnet-4-5"}


def expected(source_path, title="Listing files"):
    return [
        {"type": "session", "version": 1, "id": "UUID", "timestamp": iso(0), "cwd": "/proj",
         "source": {"agent": "opencode", "path": source_path, "id": SES}},
        {"type": "sessionInfo", "id": "E1", "parentId": None, "timestamp": iso(0), "name": title},
        {"type": "message", "id": "E2", "parentId": "E1", "timestamp": iso(1), **SONNET,
         "message": {"role": "user", "content": [
             {"type": "text", "text": "look at this"}, {"type": "image", "mediaType": "image/png", "data": PNG},
             {"type": "text", "text": "Called the Read tool"}]}},
        {"type": "message", "id": "E3", "parentId": "E2", "timestamp": iso(2), "message": {
            "role": "assistant", "content": [
                {"type": "thinking", "thinking": "thinking", "signature": "SIG"},
                {"type": "text", "text": "I will list."},
                {"type": "toolUse", "id": "call_1", "name": "bash", "input": '{"command":"ls"}'},
                {"type": "toolUse", "id": "call_2", "name": "read", "input": '{"path":"x"}'}],
            **SONNET, "stopReason": "toolUse",
            "usage": {"input": 10, "output": 12, "cacheRead": 100, "cacheWrite": 20, "reasoning": 7}},
         "_billing": ["opencode", T0 + 2000, T0 + 2500, "anthropic", "claude-sonnet-4-5", 10, 5, 7, 100, 20]},
        {"type": "message", "id": "E4", "parentId": "E3", "timestamp": iso(2), **SONNET,
         "message": {"role": "user", "content": [
             {"type": "toolResult", "toolUseId": "call_1", "content": "a.png\n"},
             {"type": "toolResult", "toolUseId": "call_2", "content": "no such file", "isError": True}]}},
        {"type": "message", "id": "E5", "parentId": "E4", "timestamp": iso(3), "message": {
            "role": "assistant", "content": [{"type": "text", "text": "Done."}], **SONNET, "stopReason": "stop",
            "usage": {"input": 3, "output": 9, "cacheRead": 130, "reasoning": 4}},
         "_billing": ["opencode", T0 + 3000, T0 + 3500, "anthropic", "claude-sonnet-4-5", 3, 9, 4, 130, 0]},
        {"type": "compaction", "id": "E6", "parentId": "E5", "timestamp": iso(5), "summary": "Summary of it all.",
         "firstKeptId": "E5", **SONNET, "usage": {"input": 200, "output": 50},
         "_billing": ["opencode", T0 + 5000, T0 + 5500, "anthropic", "claude-sonnet-4-5", 200, 50, 0, 0, 0]},
        {"type": "message", "id": "E7", "parentId": "E6", "timestamp": iso(6), "provider": "openai",
         "model": "gpt-5", "message": {"role": "user", "content": [{"type": "text", "text": "next"}]}},
        {"type": "message", "id": "E8", "parentId": "E7", "timestamp": iso(7), "message": {
            "role": "assistant", "content": [
                {"type": "thinking", "thinking": "r", "signature": "ENC", "itemId": "rs_9"},
                {"type": "text", "text": "ok"}],
            "provider": "openai", "model": "gpt-5", "stopReason": "aborted",
            "usage": {"input": 40, "output": 25, "reasoning": 25}},
         "_billing": ["opencode", T0 + 7000, T0 + 7500, "openai", "gpt-5", 40, 0, 25, 0, 0]},
    ]


def named(out):
    names = {}
    for e in out[1:]:
        names[e["id"]] = f"E{len(names) + 1}"
    result = []
    for e in out:
        e = dict(e)
        if e["type"] == "session":
            e["id"] = "UUID"
        else:
            for key in ("id", "parentId", "firstKeptId"):
                if e.get(key) is not None:
                    e[key] = names[e[key]]
        result.append(e)
    return result


def make_db(path, sessions=((SES, None, "Listing files"),), wal=False):
    db = sqlite3.connect(path)
    if wal:
        db.execute("PRAGMA journal_mode=WAL")
    db.executescript(SCHEMA)
    for sid, parent, title in sessions:
        db.execute("INSERT INTO session VALUES (?,?,?,?,?,?,?,?,?)",
                   (sid, "prj", parent, "slug", "/proj", title, "1.2.3", T0, T0 + 60000))
    db.commit()
    return db


def add(db, messages, sid=SES):
    for mid, s, info, parts in messages:
        db.execute("INSERT INTO message VALUES (?,?,?,?,?)",
                   (mid, sid, info["time"]["created"], info["time"]["created"], orjson.dumps(info).decode()))
        for n, part in enumerate(parts):
            db.execute("INSERT INTO part VALUES (?,?,?,?,?,?)", (f"prt_{mid}_{n:02d}", mid, sid, T0, T0,
                                                                 orjson.dumps(part).decode()))
    db.commit()


def read_all(source, start=0, state=None):
    """A run of the Reader; every line it gives is a valid panto line (stream.py's rule)."""
    r = opencode.Reader(source, start, state)
    out = list(r)
    for e in out:
        stream.parse_line(orjson.dumps({k: v for k, v in e.items() if k != "_billing"}) + b"\n")
    return out, r


@pytest.fixture
def dbfile(tmp_path):
    data = tmp_path / "opencode"
    data.mkdir()
    path = data / "opencode.db"
    db = make_db(path)
    add(db, MESSAGES)
    db.close()
    return path


def test_database_session_every_part_kind(dbfile):
    out, r = read_all(f"{dbfile}#{SES}")
    assert named(out) == expected(str(dbfile))
    assert re.fullmatch(r"[0-9a-f-]{36}", out[0]["id"]) and out[0]["id"] != SES
    assert all(re.fullmatch(r"[0-9a-f]{8}", e["id"]) for e in out[1:])
    assert r.skipped == {"part:agent": 1, "part:text": 1, "part:step-start": 2, "part:step-finish": 2,
                         "compaction request": 1}
    assert r.bad == [] and r.end == len(MESSAGES)


def test_same_output_every_run(dbfile):
    a, ra = read_all(f"{dbfile}#{SES}")
    b, rb = read_all(f"{dbfile}#{SES}")
    assert orjson.dumps(a) == orjson.dumps(b)
    assert orjson.loads(orjson.dumps(ra.state)) == rb.state


def test_reading_on_after_each_new_message_gives_one_run(tmp_path, dbfile):
    once, _ = read_all(f"{dbfile}#{SES}")
    path = tmp_path / "grown.db"
    db = make_db(path)
    out, start, state = [], 0, None
    for m in MESSAGES:
        add(db, [m])
        part, r = read_all(f"{path}#{SES}", start, state)
        out += part
        start, state = r.end, orjson.loads(orjson.dumps(r.state))
    db.close()
    strip = [{**e, "source": None} if e["type"] == "session" else e for e in out]
    assert strip == [{**e, "source": None} if e["type"] == "session" else e for e in once]
    assert start == len(MESSAGES)


def test_an_answer_still_being_written_waits(tmp_path):
    path = tmp_path / "opencode.db"
    db = make_db(path)
    streaming = answer("msg_02", 2, "msg_01", [text("partial")], tokens(0, 0), finish=None, done=False)
    add(db, [MESSAGES[0], streaming])
    out, r = read_all(f"{path}#{SES}")
    assert [e["type"] for e in out] == ["session", "sessionInfo", "message"] and r.end == 1
    # it completes: the next run reads it
    done = answer("msg_02", 2, "msg_01", [text("partial, then whole")], tokens(5, 6))
    db.execute("UPDATE message SET data = ? WHERE id = 'msg_02'", (orjson.dumps(done[2]).decode(),))
    db.execute("UPDATE part SET data = ? WHERE message_id = 'msg_02'", (orjson.dumps(text("partial, then whole")).decode(),))
    db.commit()
    more, r2 = read_all(f"{path}#{SES}", r.end, r.state)
    assert [e["message"]["content"] for e in more] == [[{"type": "text", "text": "partial, then whole"}]]
    assert more[0]["parentId"] == out[-1]["id"] and r2.end == 2


def test_an_answer_never_completed_but_followed_is_imported(tmp_path):
    path = tmp_path / "opencode.db"
    db = make_db(path)
    add(db, [MESSAGES[0], answer("msg_02", 2, "msg_01", [text("cut off")], tokens(5, 0), finish=None, done=False),
             user("msg_03", 3, [text("again")])])
    out, r = read_all(f"{path}#{SES}")
    assert [e["message"]["role"] for e in out[2:]] == ["user", "assistant", "user"] and r.end == 3


def test_a_prompt_whose_parts_are_not_written_yet_waits(tmp_path):
    path = tmp_path / "opencode.db"
    db = make_db(path)
    add(db, [MESSAGES[0], user("msg_02", 2, [])])
    out, r = read_all(f"{path}#{SES}")
    assert len(out) == 3 and r.end == 1


def test_the_database_is_read_while_opencode_writes_and_never_changed(tmp_path):
    data = tmp_path / "opencode"
    data.mkdir()
    path = data / "opencode.db"
    writer = make_db(path, wal=True)
    add(writer, MESSAGES[:3])
    writer.execute("BEGIN")
    writer.execute("INSERT INTO message VALUES ('msg_09', ?, ?, ?, ?)",
                   (SES, T0 + 9000, T0 + 9000, orjson.dumps(MESSAGES[0][2]).decode()))

    def snapshot():
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in data.iterdir()
                if not p.name.endswith("-shm")}

    before = snapshot()
    assert opencode.sources({"OPENCODE_DATA_DIR": str(data)}) == [f"{path}#{SES}"]
    out, r = read_all(f"{path}#{SES}")
    assert r.end == 3 and len(out) == 2 + 4     # header, title, prompt, answer, results, answer
    assert snapshot() == before
    writer.rollback()
    writer.close()


def test_bad_message_data_is_skipped_and_counted(tmp_path):
    path = tmp_path / "opencode.db"
    db = make_db(path)
    add(db, MESSAGES[:1])
    db.execute("INSERT INTO message VALUES ('msg_02', ?, ?, ?, 'not json')", (SES, T0 + 2000, T0 + 2000))
    db.execute("INSERT INTO part VALUES ('prt_x', 'msg_01', ?, 0, 0, '[1]')", (SES,))
    db.commit()
    add(db, [MESSAGES[2]])
    out, r = read_all(f"{path}#{SES}")
    assert r.bad == [("prt_x", "part data is not a JSON object"), ("msg_02", "message data is not a JSON object")]
    assert [e["message"]["role"] for e in out[2:]] == ["user", "assistant"]
    assert out[3]["parentId"] == out[2]["id"] and r.end == 3


def test_a_sub_agent_session_names_its_parent(tmp_path):
    path = tmp_path / "opencode.db"
    db = make_db(path, sessions=((SES, None, "Listing files"), (SUB, SES, "Child session - 2026-01-02T10:00:00")))
    add(db, [user("msg_50", 50, [text("sub task")])], sid=SUB)
    parent, _ = read_all(f"{path}#{SES}")
    child, _ = read_all(f"{path}#{SUB}")
    assert child[0]["parentSession"] == parent[0]["id"] and child[0]["relation"] == "subagent"
    assert [e["type"] for e in child] == ["session", "message"]      # opencode's default title is no title


def test_a_title_given_later_comes_where_that_run_stopped(tmp_path):
    path = tmp_path / "opencode.db"
    db = make_db(path, sessions=((SES, None, "New session - 2026-01-02T10:00:00.000Z"),))
    add(db, MESSAGES[:1])
    out, r = read_all(f"{path}#{SES}")
    assert [e["type"] for e in out] == ["session", "message"]
    db.execute("UPDATE session SET title = 'Renamed'")
    db.commit()
    more, r2 = read_all(f"{path}#{SES}", r.end, r.state)
    assert [(e["type"], e["name"], e["parentId"]) for e in more] == [("sessionInfo", "Renamed", out[1]["id"])]
    again, _ = read_all(f"{path}#{SES}", r2.end, r2.state)
    assert again == []


def test_no_such_session(dbfile):
    with pytest.raises(SessionError, match="no session 'ses_nope'"):
        read_all(f"{dbfile}#ses_nope")


@pytest.mark.parametrize("tok, out", [
    (tokens(10, 5, r=7, cr=1, cw=2, total=25), {"input": 10, "output": 12, "cacheRead": 1, "cacheWrite": 2,
                                                "reasoning": 7}),   # total counts reasoning apart
    (tokens(10, 12, r=7, total=22), {"input": 10, "output": 12, "reasoning": 7}),  # inside output
    (tokens(10, 12, r=7), {"input": 10, "output": 12, "reasoning": 7}),            # no total: inside
    (tokens(10, 3, r=7), {"input": 10, "output": 10, "reasoning": 7}),             # cannot be inside
    ({"total": 123}, {"input": 0, "output": 123}),
    ({"input": 4}, {"input": 4, "output": 0}),
    (None, None),
])
def test_usage(tok, out):
    assert opencode.usage(tok) == out


def legacy(root, sid=SES, messages=MESSAGES, title="Listing files", parent=None, created=T0):
    storage = root / "storage"
    info = {"id": sid, "slug": "s", "version": "0.9.0", "projectID": "prj", "directory": "/proj",
            "title": title, "time": {"created": created, "updated": T0 + 60000}}
    if parent:
        info["parentID"] = parent
    (storage / "session" / "prj").mkdir(parents=True, exist_ok=True)
    (storage / "session" / "prj" / f"{sid}.json").write_bytes(orjson.dumps(info))
    for mid, s, m, parts in messages:
        (storage / "message" / sid).mkdir(parents=True, exist_ok=True)
        (storage / "message" / sid / f"{mid}.json").write_bytes(orjson.dumps({"id": mid, "sessionID": sid, **m}))
        (storage / "part" / mid).mkdir(parents=True, exist_ok=True)
        for n, part in enumerate(parts):
            (storage / "part" / mid / f"prt_{mid}_{n:02d}.json").write_bytes(
                orjson.dumps({"id": f"prt_{mid}_{n:02d}", "sessionID": sid, "messageID": mid, **part}))
    return storage / "session" / "prj" / f"{sid}.json"


def test_legacy_files_map_like_the_database(tmp_path, dbfile):
    path = legacy(tmp_path / "data")
    out, r = read_all(str(path))
    db_out, _ = read_all(f"{dbfile}#{SES}")
    assert named(out) == expected(str(path))
    assert out[1:] == db_out[1:]
    assert r.end == len(MESSAGES)
    assert opencode.sniff(path.read_bytes())


def test_legacy_reading_on(tmp_path):
    once, _ = read_all(str(legacy(tmp_path / "whole")))
    root = tmp_path / "grown"
    out, start, state = [], 0, None
    for n in range(1, len(MESSAGES) + 1):
        path = legacy(root, messages=MESSAGES[:n])
        part, r = read_all(str(path), start, state)
        out += part
        start, state = r.end, orjson.loads(orjson.dumps(r.state))
    assert out[1:] == once[1:]


def _within(seconds, fn, *args):
    """fn(*args) in a thread of its own, which must end within `seconds` (a
    FIFO opened would leave it waiting for a writer: the test fails, not hangs)."""
    import threading

    got = []
    worker = threading.Thread(target=lambda: got.append(fn(*args)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "a FIFO was opened and waited on"
    return got[0]


def test_a_fifo_among_legacy_files_is_left_out_never_waited_on(tmp_path):
    """A FIFO where a message or a part file would be is reported and left
    out (opening it for reading would wait for a writer forever); the
    session's other messages come as they would without it."""
    path = legacy(tmp_path / "data")
    want, _ = read_all(str(legacy(tmp_path / "plain")))
    storage = tmp_path / "data" / "storage"
    os.mkfifo(storage / "message" / SES / "msg_zzfifo.json", 0o600)
    mid = MESSAGES[0][0]
    os.mkfifo(storage / "part" / mid / "prt_zzfifo.json", 0o600)
    out, r = _within(30, read_all, str(path))
    assert out[1:] == want[1:]
    assert sorted(name for name, _ in r.bad) == ["msg_zzfifo.json", "prt_zzfifo.json"]


def test_sources_by_creation_time_and_each_session_once(tmp_path):
    data = tmp_path / "opencode"
    data.mkdir()
    db = make_db(data / "opencode.db", sessions=((SES, None, "t"), (SUB, SES, "c")))
    db.close()
    legacy(data, sid=SES)                                   # also in the database: taken from there
    old = legacy(data, sid="ses_9old", messages=[], title="old", created=T0 - 1)
    new = legacy(data, sid="ses_0new", messages=[], title="new", created=T0 + 1)
    env = {"OPENCODE_DATA_DIR": str(data)}
    assert opencode.sources(env) == [str(old), f"{data / 'opencode.db'}#{SES}", f"{data / 'opencode.db'}#{SUB}",
                                     str(new)]
    assert opencode.sources({"OPENCODE_DATA_DIR": str(tmp_path / "none")}) == []
    assert opencode.sources({"HOME": str(tmp_path / "home")}) == []


def test_sources_channel_database(tmp_path):
    data = tmp_path / "opencode"
    data.mkdir()
    make_db(data / "opencode-beta.db").close()
    assert opencode.sources({"OPENCODE_DATA_DIR": str(data)}) == [f"{data / 'opencode-beta.db'}#{SES}"]


def test_a_fifo_named_like_the_database_is_named_never_opened(tmp_path):
    """SQLite's open of a FIFO would wait for a writer forever: the FIFO is
    named as a database that cannot be read (as a folder is), and left."""
    data = tmp_path / "opencode"
    data.mkdir()
    os.mkfifo(data / "opencode-alpha.db", 0o600)

    def sources():
        try:
            return opencode.sources({"OPENCODE_DATA_DIR": str(data)})
        except OSError as e:
            return str(e)

    got = _within(30, sources)
    assert got == f"{data / 'opencode-alpha.db'}: cannot read the opencode database (not a regular file)"


def test_an_unreadable_database_is_named(tmp_path):
    data = tmp_path / "opencode"
    data.mkdir()
    (data / "opencode.db").write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    with pytest.raises(OSError, match=re.escape(str(data / "opencode.db"))):
        opencode.sources({"OPENCODE_DATA_DIR": str(data)})


def test_sniff(dbfile):
    assert opencode.sniff(dbfile.read_bytes()[:65536])
    assert not opencode.sniff(b'{"type":"session","version":3,"id":"x","cwd":"/"}\n')
    assert not opencode.sniff(b"garbage")
    assert not os.path.exists(str(dbfile) + "-wal")


def test_a_later_answer_names_its_model_in_an_object(tmp_path):
    path = tmp_path / "opencode.db"
    db = make_db(path)
    later = answer("msg_02", 2, "msg_01", [text("hi")], tokens(1, 2), model=(None, None))
    for key in ("modelID", "providerID"):
        later[2].pop(key)
    later[2]["model"] = {"id": "gpt-5", "providerID": "openai"}
    add(db, [MESSAGES[0], later])
    out, _ = read_all(f"{path}#{SES}")
    assert (out[-1]["message"]["provider"], out[-1]["message"]["model"]) == ("openai", "gpt-5")
    assert (out[-2]["provider"], out[-2]["model"]) == ("anthropic", "claude-sonnet-4-5")


def test_a_legacy_session_with_a_location(tmp_path):
    path = legacy(tmp_path / "data", messages=MESSAGES[:1])
    info = orjson.loads(path.read_bytes())
    info["location"] = {"directory": info.pop("directory")}
    path.write_bytes(orjson.dumps(info))
    out, _ = read_all(str(path))
    assert out[0]["cwd"] == "/proj"


def test_an_answer_whose_tool_still_runs_waits(tmp_path):
    path = tmp_path / "opencode.db"
    db = make_db(path)
    running = answer("msg_02", 2, "msg_01", [tool("call_1", "bash", {"command": "sleep 9"}, status="running",
                                                  time={"start": T0})], tokens(5, 6), finish="tool-calls")
    add(db, [MESSAGES[0], running])
    out, r = read_all(f"{path}#{SES}")
    assert r.end == 1 and out[-1]["message"]["role"] == "user"
    db.execute("UPDATE part SET data = ? WHERE message_id = 'msg_02'",
               (orjson.dumps(tool("call_1", "bash", {"command": "sleep 9"}, output="slept")).decode(),))
    db.commit()
    more, _ = read_all(f"{path}#{SES}", r.end, r.state)
    assert more[-1]["message"]["content"] == [{"type": "toolResult", "toolUseId": "call_1", "content": "slept"}]
