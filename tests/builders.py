"""Sessions built by hand for the tests: header and entries, as JSON Lines
bytes (header(), msg(), bare()) or as dicts to join with jsonl() (HEADER,
user(), assistant()), and a session file written where panto keeps it."""
import os

import orjson

from pantolib import paths

SID = "0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee"
OTHER = "0199aaaa-bbbb-7ccc-8ddd-ffffffffffff"
HEADER = {"type": "session", "version": 1, "id": SID, "timestamp": "2026-04-25T14:00:00.000Z",
          "cwd": "/somewhere"}


def jsonl(*objs):
    """Objects as JSON Lines bytes."""
    return b"".join(orjson.dumps(o) + b"\n" for o in objs)


def lines(out):
    """The JSON Lines of some output, parsed."""
    return [orjson.loads(x) for x in out.split(b"\n") if x]


def reply_of(p):
    """The assistant message a successful panto-send run wrote last."""
    assert p.returncode == 0, p.stderr
    last = lines(p.stdout)[-1]
    assert last["message"]["role"] == "assistant", last
    return last["message"]


def user_texts(entries):
    """The text blocks of the user messages among entries, in order."""
    return [b["text"] for e in entries if e["type"] == "message" and e["message"]["role"] == "user"
            for b in e["message"]["content"] if b["type"] == "text"]


def split_lines(b):
    """The non-blank lines of some bytes, each with its line feed."""
    return [line + b"\n" for line in b.split(b"\n") if line.strip()]


def read(p):
    with open(p, "rb") as f:
        return f.read()


# -- lines ------------------------------------------------------------------------

def header(cwd, sid=SID, ts="2026-04-25T17:40:15.990Z", version=1):
    return orjson.dumps({"type": "session", "version": version, "id": sid,
                         "timestamp": ts, "cwd": str(cwd)}) + b"\n"


def msg(eid, parent, role, text, ts="2026-04-25T17:40:16.000Z", stamp=True, **extra):
    """A message entry with one text block; a user entry carries the model's
    stamp (provider, model) unless stamp is false."""
    entry = {"type": "message", "id": eid, "parentId": parent, "timestamp": ts}
    if role == "user" and stamp:
        entry["provider"], entry["model"] = "openai", "gpt-4o"
    entry["message"] = {"role": role, "content": [{"type": "text", "text": text}], **extra}
    return orjson.dumps(entry) + b"\n"


def bare(role, text):
    return orjson.dumps({"type": "message", "message": {"role": role,
                         "content": [{"type": "text", "text": text}]}}) + b"\n"


def session_bytes(cwd, sid=SID, turns=1):
    """header, then user/assistant pairs in a linear chain."""
    out, parent = [header(cwd, sid)], None
    for i in range(turns):
        u, a = f"{i:04x}aaaa", f"{i:04x}bbbb"
        out.append(msg(u, parent, "user", f"question {i}"))
        out.append(msg(a, u, "assistant", f"answer {i}", stopReason="stop", provider="openai",
                       model="gpt-4o", usage={"input": 10, "output": 5}))
        parent = a
    return b"".join(out)


def session_file(cwd, sid=SID, turns=1, data=None):
    """Write a session where panto would keep it (session_bytes, or data); return its path."""
    d = paths.session_dir(str(cwd))
    os.makedirs(d, mode=0o700, exist_ok=True)
    p = os.path.join(d, sid + ".jsonl")
    with open(p, "wb") as f:
        f.write(session_bytes(cwd, sid, turns) if data is None else data)
    return p


def compaction(eid, parent, first_kept, summary="what came before"):
    return orjson.dumps({"type": "compaction", "id": eid, "parentId": parent,
                         "timestamp": "2026-04-25T17:40:16.000Z", "summary": summary,
                         "firstKeptId": first_kept, "provider": "openai", "model": "gpt-4o"}) + b"\n"


def two_prompts_compacted(cwd):
    """A session file of a system prompt and two exchanges, compacted after the
    second keeping it (firstKeptId its prompt): its path."""
    c = {"type": "compaction", "id": "cccccccc", "parentId": "a0000002", "timestamp": "2026-04-25T17:40:17.000Z",
         "summary": "we talked", "firstKeptId": "u0000002", "provider": "openai", "model": "gpt-4o"}
    data = (header(cwd) + msg("s0000001", None, "system", "be brief")
            + msg("u0000001", "s0000001", "user", "the early prompt")
            + msg("a0000001", "u0000001", "assistant", "early answer", provider="openai", model="gpt-4o")
            + msg("u0000002", "a0000001", "user", "the kept prompt")
            + msg("a0000002", "u0000002", "assistant", "kept answer", provider="openai", model="gpt-4o")
            + orjson.dumps(c) + b"\n")
    return session_file(cwd, data=data)


def compacted_session(cwd, turns=6, branch=True):
    """system, `turns` user/assistant pairs (an abandoned branch after the
    second), a compaction keeping the last two prompts, then one more turn
    whose prompt has no stamp: (bytes, the ids a request needs, the leaf)."""
    out = [header(cwd), msg("5555aaaa", None, "system", "be brief")]
    parent, ids = "5555aaaa", []
    for i in range(turns):
        u, a = f"{i:04x}aaaa", f"{i:04x}bbbb"
        out += [msg(u, parent, "user", f"question {i}"),
                msg(a, u, "assistant", f"answer {i}", stopReason="stop", provider="openai", model="gpt-4o",
                    usage={"input": 10, "output": 5})]
        ids.append((u, a))
        parent = a
        if branch and i == 1:
            out.append(msg("7777aaaa", ids[0][1], "user", "an abandoned branch"))
    first = ids[-2][0]
    out += [compaction("cccc0000", parent, first), msg("9999aaaa", "cccc0000", "user", "after it", stamp=False),
            msg("9999bbbb", "9999aaaa", "assistant", "ok", stopReason="stop", provider="openai", model="gpt-4o")]
    kept = ["5555aaaa", ids[-2][0], ids[-2][1], ids[-1][0], ids[-1][1], "cccc0000", "9999aaaa", "9999bbbb"]
    return b"".join(out), kept, "9999bbbb"


# -- dicts --------------------------------------------------------------------------

def user(text, eid="u0000001", parent=None, provider="openai", model="gpt-4o"):
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": "2026-04-25T14:00:00.000Z",
            "provider": provider, "model": model,
            "message": {"role": "user", "content": [{"type": "text", "text": text}]}}


def assistant(content, eid="a0000001", parent="u0000001", provider="openai", model="gpt-4o", stop="stop"):
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": "2026-04-25T14:00:01.000Z",
            "message": {"role": "assistant", "content": content, "provider": provider, "model": model,
                        "stopReason": stop}}

BASE = jsonl(HEADER, user("earlier"))


def settled(*files):
    """Wait until no file is racy any more (pantolib.persist.racy: changed within a
    timestamp tick of now), so that a cache entry stamped after this call may be
    believed on identity alone. Waits for that moment, not for a guess of time
    (about 20 ms after a write)."""
    import time

    from pantolib import persist

    while any(persist.racy(persist.ident(os.stat(f)), persist.now()) for f in files):
        time.sleep(0.002)
    return files[0] if len(files) == 1 else files
