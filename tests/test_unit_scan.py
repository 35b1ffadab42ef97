"""pantolib.scan on its own: the listing summary of real session files (SPEC
§7: messages, first prompt, name, last activity) and what --grep finds,
read from raw bytes, against a plain full parse (orjson per line) of random
sessions laid out as panto writes them and otherwise."""
import json
import random
from datetime import datetime

import orjson
import pytest

from builders import header, msg
from pantolib import scan

STAMPS = ["2026-04-25T17:40:16.000Z", "2026-04-25T18:00:00.500Z", "2026-12-01T23:59:59.999Z", "2026-05-01T00:00:00Z"]
NOT_STAMPS = ["t", "", "yesterday"]
WORDS = ["café", "CAFÉ", "Straße", "tool", "grep me", "\u2028", "\t", "line\nbreak", '"role":"user"', "{\"type\":\"message\"",
         "\\", "naïve", "x"]


def _text(rng, long=False):
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 8)))
    return text * (5000 // (len(text) + 1) + 1) if long else text


def _entry(rng, i, parent, long):
    eid = f"{i:08x}"
    ts = rng.choice(STAMPS) if rng.random() > 0.05 else rng.choice(NOT_STAMPS)
    r = rng.random()
    if r < 0.06:
        return {"type": "sessionInfo", "id": eid, "parentId": parent, "timestamp": ts, "name": _text(rng)}
    if r < 0.09:
        return {"type": "compaction", "id": eid, "parentId": parent, "timestamp": ts, "summary": _text(rng),
                "firstKeptId": None, "provider": "openai", "model": "gpt-4o", "usage": {"input": 1, "output": 2}}
    if r < 0.11:
        return {"type": "custom", "id": eid, "parentId": parent, "timestamp": ts, "message": {"role": "user"}}
    role = rng.choice(["user", "user", "assistant", "assistant", "system"])
    e = orjson.loads(msg(eid, parent, role, _text(rng, long), ts=ts))
    content = e["message"]["content"]
    r = rng.random()
    if r < 0.15:
        content.insert(0, {"type": "toolResult", "toolUseId": "c1", "content": _text(rng)})
    elif r < 0.3 and role == "assistant":
        content.append({"type": "toolUse", "id": "c1", "name": rng.choice(["bash", "grep"]), "input": json.dumps({"q": _text(rng)})})
    elif r < 0.35:
        content.insert(0, {"type": "thinking", "thinking": _text(rng), "signature": "sig"})
    elif r < 0.45:
        del content[0]                   # a message with no text
    if role == "assistant":
        e["message"].update(provider="openai", model="gpt-4o", stopReason="stop", usage={"input": 3, "output": 1})
    return e


def random_session(rng, cwd, escapes=True):
    """(bytes, entries) of a valid session file; its last line may be torn.
    escapes: some lines are written with non-ASCII characters as \\u escapes
    (as another writer may), which --grep does not look through (it
    searches the bytes as panto writes them, SPEC §7)."""
    layout = rng.random()                # most as panto writes them; some with lines of another writer
    long = rng.random() < 0.2            # lines of many kilobytes
    out, entries, ids = [header(cwd)], [], []
    for i in range(rng.randint(0, 70)):
        parent = ids[-1] if ids and rng.random() < 0.9 else (rng.choice(ids) if ids else None)
        e = _entry(rng, i, parent, long)
        ids.append(e["id"])
        entries.append(e)
        if layout < 0.2 and rng.random() < 0.1:
            raw = json.dumps(e, ensure_ascii=escapes and rng.random() < 0.5).encode()
        elif layout < 0.3 and rng.random() < 0.1:
            raw = orjson.dumps(dict(reversed(list(e.items()))))
        else:
            raw = orjson.dumps(e)
        out.append(raw + b"\n")
        if rng.random() < 0.03:
            out.append(b"\n")
    data = b"".join(out)
    if rng.random() < 0.1:
        data += b'{"type":"message","id":"torn'        # a torn last line: not read
    return data, entries


def full_parse(entries):
    """What the listing shows of these entries, by the rules of SPEC §7."""
    messages, prompt, name, last = 0, None, None, None
    for e in entries:
        if e["type"] == "message":
            role = e["message"]["role"]
            messages += role in ("user", "assistant")
            if role == "user" and prompt is None:
                texts = [b["text"] for b in e["message"]["content"] if b["type"] == "text"]
                if texts:
                    prompt = texts[0][:scan.PROMPT_MAX]
        elif e["type"] == "sessionInfo":
            name = e["name"]
        if e["timestamp"] in STAMPS:
            last = e["timestamp"]
    return messages, prompt, name, last


def texts(e):
    """The message text a search looks in: text, tool calls and results."""
    if e["type"] != "message":
        return []
    out = []
    for b in e["message"]["content"]:
        if b["type"] == "text":
            out.append(b["text"])
        elif b["type"] == "toolUse":
            out += [b["name"], b["input"]]
        elif b["type"] == "toolResult":
            out.append(b["content"])
    return out


def test_the_summary_agrees_with_a_full_parse(tmp_path):
    rng = random.Random(41)
    kinds = set()
    for n in range(300):
        data, entries = random_session(rng, tmp_path)
        p = tmp_path / f"{n}.jsonl"
        p.write_bytes(data)
        s = scan.summarize(str(p))
        assert s.header == orjson.loads(header(tmp_path))
        assert (s.messages, s.prompt, s.name, s.last) == full_parse(entries), (n, data[:2000])
        assert s.match is None
        assert scan.last_timestamp(str(p)) == s.last
        kinds.add((s.prompt is not None, s.name is not None, s.last is not None))
    assert len(kinds) >= 4              # with and without each (a name comes with a prompt, mostly)


@pytest.mark.parametrize("needle", ["café", "CAFÉ", "straße", "grep me", "GREP", "naïve tool", "bash", "\\", '"role"',
                                    "nowhere", "é"])
def test_what_grep_finds_agrees_with_a_full_parse(tmp_path, needle):
    rng = random.Random(needle)
    found = 0
    for n in range(60):
        data, entries = random_session(rng, tmp_path, escapes=False)
        p = tmp_path / f"{n}.jsonl"
        p.write_bytes(data)
        N = scan.Needle(needle)
        s = scan.summarize(str(p), N)
        first = next((t for e in entries for t in texts(e) if needle.lower() in t.lower()), None)
        assert (s.match is None) == (first is None), (needle, data[:3000])
        assert scan.grep(str(p), N) == s.match
        assert (s.messages, s.prompt, s.name, s.last) == full_parse(entries)
        if first is not None:
            found += 1
            assert s.match == scan.snippet(first, N)      # the first text that matches, shown
            assert "\n" not in s.match and len(s.match) <= 80
            assert needle.lower() in s.match.lower()
    assert found > 5 or needle == "nowhere"


def test_a_session_larger_than_a_read_is_summarized_whole(tmp_path):
    rng = random.Random(2)
    rows, entries = [header(tmp_path)], []
    size, i = 0, 0
    while size < 9 << 20:                # more than one read of the scanner
        e = _entry(rng, i, f"{i - 1:08x}" if i else None, long=rng.random() < 0.5)
        raw = orjson.dumps(e) + b"\n"
        rows.append(raw)
        entries.append(e)
        size += len(raw)
        i += 1
    p = tmp_path / "big.jsonl"
    p.write_bytes(b"".join(rows))
    s = scan.summarize(str(p), scan.Needle("straße"))
    assert (s.messages, s.prompt, s.name, s.last) == full_parse(entries)
    assert s.match is not None and "straße" in s.match.lower()


def test_a_file_that_is_not_a_session_is_refused(tmp_path):
    cases = {"empty": b"", "no header": msg("0000aaaa", None, "user", "hi"), "torn header": header(tmp_path)[:-5],
             "json array": b"[1]\n", "header of a newer version": header(tmp_path, version=2),
             "partial": header(tmp_path)[:-2] + b',"partial":{"omitted":[]}}\n'}
    for name, data in cases.items():
        p = tmp_path / "x.jsonl"
        p.unlink(missing_ok=True)
        p.write_bytes(data)
        with pytest.raises(scan.NotASession):
            scan.summarize(str(p))
        with pytest.raises(scan.NotASession):
            scan.grep(str(p), scan.Needle("hi"))


def test_a_session_with_only_a_header(tmp_path):
    p = tmp_path / "h.jsonl"
    p.write_bytes(header(tmp_path))
    s = scan.summarize(str(p))
    assert (s.messages, s.prompt, s.name, s.last, s.match) == (0, None, None, None, None)
    assert scan.last_timestamp(str(p)) is None


def test_activity_is_the_last_timestamp_else_the_mtime():
    assert scan.activity("2026-04-25T17:40:16.000Z", 5 * 10**9) == datetime.fromisoformat(
        "2026-04-25T17:40:16.000+00:00").timestamp()
    assert scan.activity(None, 5 * 10**9) == 5.0
    assert scan.activity("t", 1_500_000_000) == 1.5
    assert scan.epoch("2026-04-25T17:40:16") == scan.epoch("2026-04-25T17:40:16Z")   # no zone: UTC
    assert scan.epoch("2026-13-01T00:00:00Z") is None and scan.epoch(5) is None


def test_a_needle_that_is_not_utf8_is_a_usage_error():
    from pantolib.errors import UsageError

    with pytest.raises(UsageError, match="not valid UTF-8"):
        scan.Needle("caf\udce9")
