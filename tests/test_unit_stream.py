"""pantolib.stream on its own: what a line is (SPEC §2-§4, panto-session(5)
"Schema"), the torn-line rule, nesting depth, framing on b"\\n" only, and
a property test that each fast path agrees with its full check on random
and hostile lines."""
import io
import json
import random

import orjson
import pytest

from builders import HEADER, assistant, jsonl, user
from hostile_lines import SCHEMA, TORN, random_line
from pantolib import stream
from pantolib.errors import SessionError

ENTRY = {"type": "message", "id": "ab12cd34", "parentId": None, "timestamp": "2026-04-25T17:40:16.000Z",
         "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]}}


def nest(n, inner=b""):
    """n nested JSON arrays."""
    return b"[" * n + inner + b"]" * n


def outcome(fn, obj):
    """What fn(obj) gives: its value, or the message of the ValueError it raises."""
    try:
        return "ok", fn(obj)
    except ValueError as e:
        return "error", str(e)


# -- loads ---------------------------------------------------------------------------------

@pytest.mark.parametrize("raw,want", [
    (b'{"a":1}\n', {"a": 1}),
    (b' {"a" : [1, {"b": null}]} \r\n', {"a": [1, {"b": None}]}),
    (b"{}", {}),
    (b"[1,2]\n", None),
    (b"null\n", None),
    (b'"text"\n', None),
    (b"7\n", None),
    (b'{"a":1', None),
    (b'{"a":1}{"b":2}\n', None),
    (b'{"a":"\\ud800"}\n', None),          # a lone surrogate: orjson refuses it
    (b'{"a":1e400}\n', None),              # out of range
    (b'{"a":"\xff"}\n', None),              # not UTF-8
    (b"", None),
])
def test_loads_gives_the_object_a_line_holds_or_none(raw, want):
    assert stream.loads(raw) == want


def test_loads_reads_nesting_up_to_read_depth_and_no_deeper():
    assert stream.READ_DEPTH == 1024
    obj = stream.loads(b'{"a":' + nest(stream.READ_DEPTH - 1) + b"}")
    assert obj is not None and list(obj) == ["a"]
    assert stream.loads(b'{"a":' + nest(stream.READ_DEPTH) + b"}") is None


def test_dumps_is_compact_json_and_a_line_feed_and_refuses_what_it_cannot_write():
    assert stream.dumps(ENTRY) == orjson.dumps(ENTRY) + b"\n"
    assert b" " not in stream.dumps({"a": [1, {"b": None}]})
    deep = inner = []
    for _ in range(stream.WRITE_DEPTH):
        inner.append([])
        inner = inner[0]
    with pytest.raises(SessionError, match="an entry that cannot be written"):
        stream.dumps({"a": deep})


# -- classify: the kinds and the schema -----------------------------------------------------

def test_classify_names_the_three_kinds():
    assert stream.classify(dict(HEADER)) == stream.HEADER
    assert stream.classify(user("hi")) == stream.ENTRY
    assert stream.classify(assistant([{"type": "text", "text": "x"}])) == stream.ENTRY
    assert stream.classify({"type": "message", "message": {"role": "user", "content": []}}) == stream.BARE
    # other entry types are entries (kept), whatever they hold
    assert stream.classify({"type": "sessionInfo", "id": "x", "parentId": None, "timestamp": "t",
                            "name": "n"}) == stream.ENTRY
    assert stream.classify({"type": "custom", "id": "x", "timestamp": "t", "anything": [1]}) == stream.ENTRY
    assert stream.classify({"type": "custom"}) == stream.BARE
    # a header of an older version is still a header (the migration hook takes it)
    assert stream.classify(dict(HEADER, version=0)) == stream.HEADER
    # unknown keys and block types are kept
    e = user("hi")
    e["message"]["content"].append({"type": "image", "data": 5})
    e["extra"] = {"nested": [1]}
    assert stream.classify(e) == stream.ENTRY
    # a thinking block's signature may be absent or null
    for block in ({"type": "thinking", "thinking": "t"}, {"type": "thinking", "thinking": "t", "signature": None},
                  {"type": "thinking", "thinking": "t", "signature": "s", "itemId": "i"}):
        assert stream.classify(assistant([block])) == stream.ENTRY


def _entry(**changes):
    e = orjson.loads(orjson.dumps(ENTRY))
    for path, value in changes.items():
        d, *keys = path.split("__")
        target = e if d == "e" else e["message"]
        for k in keys[:-1]:
            target = target[int(k)] if isinstance(target, list) else target[k]
        last = keys[-1]
        if isinstance(target, list):
            target[int(last)] = value
        elif value is KeyError:
            del target[last]
        else:
            target[last] = value
    return e


# (line, what is wrong) per rule of panto-session(5) "Schema"
SCHEMA_RULES = [
    (dict(HEADER, version="1"), "session header 'version' must be an integer"),
    (dict(HEADER, version=1.0), "session header 'version' must be an integer"),
    (dict(HEADER, version=2), "session format version 2 is newer than this panto reads (1)"),
    (dict(HEADER, id=5), "session header 'id' is not a string (int)"),
    ({k: v for k, v in HEADER.items() if k != "cwd"}, "session header 'cwd' is missing"),
    (dict(HEADER, timestamp=None), "session header 'timestamp' is not a string (NoneType)"),
    ({"id": "x"}, "no string 'type'"),
    ({"type": 3, "id": "x"}, "no string 'type'"),
    (_entry(e__id=""), "entry 'id' is not a non-empty string"),
    (_entry(e__id=7), "entry 'id' is not a non-empty string"),
    (_entry(e__id=None), "entry 'id' is not a non-empty string"),
    (_entry(e__parentId=3), "'parentId' is not a string or null"),
    (_entry(e__timestamp=KeyError), "entry 'timestamp' is missing"),
    (_entry(e__timestamp=5), "entry 'timestamp' is not a string (int)"),
    ({"type": "message", "parentId": None, "message": ENTRY["message"]}, "entry has 'parentId' or 'timestamp' but no 'id'"),
    ({"type": "note", "timestamp": "t"}, "entry has 'parentId' or 'timestamp' but no 'id'"),
    (_entry(e__provider=1), "entry 'provider' is not a string"),
    (_entry(e__model=["m"]), "entry 'model' is not a string"),
    (_entry(e__message="hi"), "'message' is not an object"),
    (_entry(e__message=KeyError), "'message' is not an object"),
    (_entry(m__role=KeyError), "message 'role' is missing"),
    (_entry(m__role="tool"), "unknown message role 'tool'"),
    (_entry(m__role=5), "unknown message role of type int"),
    (_entry(m__role="x" * 100), "unknown message role '" + "x" * 40 + "…'"),
    (_entry(m__content="hi"), "message 'content' is not a list"),
    (_entry(m__content__0="hi"), "a content block is not an object"),
    (_entry(m__content__0={"text": "hi"}), "a content block has no 'type'"),
    (_entry(m__content__0={"type": None}), "a content block has no 'type'"),
    (_entry(m__content__0={"type": "text"}), "text block 'text' is missing"),
    (_entry(m__content__0={"type": "text", "text": 5}), "text block 'text' is not a string (int)"),
    (_entry(m__content__0={"type": "thinking", "signature": "s"}), "thinking block 'thinking' is missing"),
    (_entry(m__content__0={"type": "thinking", "thinking": "t", "signature": 5}),
     "thinking block 'signature' is not a string"),
    (_entry(m__content__0={"type": "redactedThinking"}), "redactedThinking block 'data' is missing"),
    (_entry(m__content__0={"type": "toolUse", "id": "1", "name": "bash", "input": {}}),
     "toolUse block 'input' is not a string (dict)"),
    (_entry(m__content__0={"type": "toolUse", "id": "1", "input": "{}"}), "toolUse block 'name' is missing"),
    (_entry(m__content__0={"type": "toolResult", "content": "ok"}), "toolResult block 'toolUseId' is missing"),
    (_entry(m__content__0={"type": "toolResult", "toolUseId": "1", "content": ["ok"]}),
     "toolResult block 'content' is not a string (list)"),
    (_entry(m__stopReason=1), "message 'stopReason' is not a string"),
    (_entry(m__provider=False), "message 'provider' is not a string"),
    (_entry(m__model={}), "message 'model' is not a string"),
]


@pytest.mark.parametrize("obj,why", SCHEMA_RULES, ids=[w for _, w in SCHEMA_RULES])
def test_classify_says_what_breaks_the_schema(obj, why):
    with pytest.raises(ValueError) as e:
        stream.classify(obj)
    assert str(e.value) == why
    # parse_line says the same at the line
    with pytest.raises(SessionError) as e:
        stream.parse_line(orjson.dumps(obj) + b"\n", "F", 9)
    assert (e.value.message, e.value.file, e.value.line) == (why, "F", 9)
    assert str(e.value) == f"F:9: {why}"


@pytest.mark.parametrize("obj", [[1], None, "x", 5])
def test_classify_refuses_what_is_not_an_object(obj):
    with pytest.raises(ValueError, match="not a JSON object"):
        stream.classify(obj)


def test_a_role_nested_deeply_is_named_by_its_type():
    """What is wrong is said without a recursive repr of the value."""
    raw = SCHEMA["role 1000 deep"]
    with pytest.raises(SessionError, match="unknown message role of type list"):
        stream.parse_line(raw)


# -- the header predicates -----------------------------------------------------------------------

def test_is_header_and_header_of():
    assert stream.is_header(dict(HEADER))
    assert not stream.is_header(dict(HEADER, version=2))
    assert not stream.is_header(dict(HEADER, type="sessions"))
    assert not stream.is_header(ENTRY)
    assert not stream.is_header([HEADER])
    first = orjson.dumps(HEADER) + b"\n"
    assert stream.header_of(first) == HEADER
    assert stream.header_of(first[:-3]) is None
    assert stream.header_of(jsonl(ENTRY)) is None
    assert stream.header_of(b"") is None


def test_is_assistant_and_is_compaction():
    assert stream.is_assistant(assistant([]))
    assert not stream.is_assistant(user("x"))
    assert not stream.is_assistant({"type": "compaction", "message": {"role": "assistant"}})
    assert not stream.is_assistant({"type": "message", "message": "assistant"})
    assert not stream.is_assistant(None)
    assert stream.is_compaction({"type": "compaction", "id": "c"})
    assert not stream.is_compaction({"type": "message"})
    assert not stream.is_compaction("compaction")


# -- the torn-line rule and nesting depth -------------------------------------------------------

@pytest.mark.parametrize("name", [n for n, raw in TORN.items() if raw is not None])
def test_what_a_crash_can_leave_is_torn(name):
    raw = TORN[name]
    assert stream.torn(raw)
    assert not stream.too_deep(raw)


@pytest.mark.parametrize("name", list(SCHEMA))
def test_a_complete_object_that_breaks_the_schema_is_not_torn(name):
    raw = SCHEMA[name]
    assert not stream.torn(raw)
    with pytest.raises(SessionError) as e:
        stream.parse_line(raw, "F", 4)
    assert e.value.line == 4
    if name in ("nesting 1100", "message 100000 deep"):
        assert stream.too_deep(raw)
        assert e.value.message == stream.DEEP


def test_a_line_without_its_line_feed_is_torn_even_when_it_is_valid():
    raw = orjson.dumps(ENTRY)
    assert stream.torn(raw)
    assert not stream.torn(raw + b"\n")
    assert not stream.torn(raw + b"\r\n")


@pytest.mark.parametrize("depth", [stream.READ_DEPTH - 1, stream.READ_DEPTH, stream.READ_DEPTH + 1, 3000])
def test_too_deep_is_decided_by_the_depth_of_a_complete_object(depth):
    """The object itself is one level: {"a": n arrays} is n + 1 deep."""
    raw = b'{"a":' + nest(depth - 1) + b"}\n"
    deep = depth > stream.READ_DEPTH
    assert stream.too_deep(raw) is deep
    assert (stream.loads(raw) is None) is deep
    assert stream.torn(raw) is False
    cut = b'{"a":' + nest(depth - 1)[:-1] + b"}\n"   # one bracket short: cut, not complete
    assert not stream.too_deep(cut)
    assert stream.torn(cut)


def test_many_brackets_are_not_too_deep_unless_nested():
    """More than READ_DEPTH brackets side by side read fine; a line refused
    for something other than its depth (a bad value far in) is not too deep."""
    wide = b'{"a":[' + b",".join([b"[]"] * (stream.READ_DEPTH + 10)) + b"]}\n"
    assert stream.loads(wide) is not None and not stream.too_deep(wide) and not stream.torn(wide)
    bad = b'{"a":[' + b",".join([b"[]"] * (stream.READ_DEPTH + 10)) + b',nope]}\n'
    assert stream.loads(bad) is None and not stream.too_deep(bad) and stream.torn(bad)
    strung = b'{"a":"' + b"[" * (stream.READ_DEPTH + 10) + b'", "b": ' + nest(10)[:-1] + b"}\n"
    assert not stream.too_deep(strung)    # brackets in a string are no nesting


def test_may_be_assistant():
    assert stream.may_be_assistant(jsonl(assistant([{"type": "text", "text": "hi"}])))
    assert not stream.may_be_assistant(jsonl(user('the "assistant" said')))   # quotes in text are escaped
    assert stream.may_be_assistant(jsonl(user("assistant")))         # a whole text of that word: a candidate
    assert stream.may_be_assistant(b'{"x": "assistant"}')            # bytes level: a candidate only


def test_a_deep_entry_is_kept_but_a_deep_bare_entry_cannot_be_completed():
    def deep(levels, bare):
        e = {"type": "note", "x": None} if bare else {"type": "note", "id": "ab12cd34", "timestamp": "t", "x": None}
        raw = orjson.dumps(e).replace(b"null", nest(levels - 1, b"1")) + b"\n"
        return raw

    ok = stream.parse_line(deep(stream.WRITE_DEPTH, bare=True))
    assert ok.kind == stream.BARE and stream.writable(ok.obj)
    with pytest.raises(SessionError, match="cannot be completed"):
        stream.parse_line(deep(stream.WRITE_DEPTH + 1, bare=True))
    kept = stream.parse_line(deep(stream.WRITE_DEPTH + 1, bare=False))
    assert kept.kind == stream.ENTRY and not stream.writable(kept.obj)
    assert kept.raw == deep(stream.WRITE_DEPTH + 1, bare=False)
    # inside a larger document, fewer levels are left
    assert stream.writable(ok.obj) and not stream.writable(ok.obj, inside=1)


def test_same_compares_at_any_depth():
    a = b = 1
    for _ in range(100_000):
        a, b = [a], [b]
    assert stream.same(a, b)
    assert not stream.same(a, [[2]])
    assert stream.same({"a": [1, {"b": None}]}, {"a": [1, {"b": None}]})
    assert not stream.same({"a": [1]}, {"a": (1,)})
    assert not stream.same({"a": 1}, {"b": 1})
    assert not stream.same([1, 2], [1])
    assert not stream.same({"a": [1]}, {"a": 1})
    rng = random.Random(3)
    for _ in range(300):
        x, y = _random_value(rng, 3), _random_value(rng, 3)
        assert stream.same(x, y) == (x == y)
        assert stream.same(x, orjson.loads(orjson.dumps(x)))


def _random_value(rng, depth):
    r = rng.random()
    if depth == 0 or r < 0.4:
        return rng.choice([None, True, 0, 1, "a", "b", 1.5])
    if r < 0.7:
        return [_random_value(rng, depth - 1) for _ in range(rng.randint(0, 2))]
    return {rng.choice("ab"): _random_value(rng, depth - 1) for _ in range(rng.randint(0, 2))}


# -- reading a stream ------------------------------------------------------------------------------

def test_read_frames_on_line_feeds_only_and_keeps_the_bytes():
    text = "a\u2028b\u2029c\x85d\x0be\x0cf\x1cg"
    e1 = dict(ENTRY, id="00000001")
    e1["message"] = {"role": "user", "content": [{"type": "text", "text": text}]}
    spaced = json.dumps(dict(ENTRY, id="00000002"), ensure_ascii=False).encode() + b"\r\n"
    data = orjson.dumps(HEADER) + b"\n\n  \n" + orjson.dumps(e1) + b"\n" + spaced + orjson.dumps(
        dict(ENTRY, id="00000003"))
    got = list(stream.read(io.BytesIO(data), "S"))
    assert [(x.kind, x.lineno) for x in got] == [(stream.HEADER, 1), (stream.ENTRY, 4), (stream.ENTRY, 5),
                                                 (stream.ENTRY, 6)]
    assert got[1].obj["message"]["content"][0]["text"] == text
    assert got[2].raw == spaced
    assert got[3].raw == orjson.dumps(dict(ENTRY, id="00000003")) + b"\n"     # the line feed added
    assert b"".join(x.raw for x in got[:3]) == data[:data.index(spaced) + len(spaced)].replace(b"\n\n  \n", b"\n")


def test_read_refuses_a_header_after_the_first_line_and_names_the_line():
    data = jsonl(ENTRY, HEADER)
    got = []
    with pytest.raises(SessionError) as e:
        for batch in stream.read_batches(io.BytesIO(data), "S"):
            got.extend(batch)
    assert str(e.value) == "S:2: a session header after the first line"
    assert [x.obj for x in got] == [ENTRY]       # the lines before the bad one are taken first
    with pytest.raises(SessionError, match="S:2: a session header after the first line"):
        list(stream.read(io.BytesIO(jsonl(HEADER, HEADER)), "S"))


def test_read_names_a_line_that_is_not_json():
    with pytest.raises(SessionError) as e:
        list(stream.read(io.BytesIO(jsonl(HEADER) + b"\n{nope\n"), "S"))
    assert e.value.line == 3 and e.value.message.startswith("not valid JSON (")
    with pytest.raises(SessionError) as e:
        list(stream.read(io.BytesIO(SCHEMA["nesting 1100"])))
    assert str(e.value) == "<stdin>:1: " + stream.DEEP


# -- the fast paths agree with the full checks --------------------------------------------------------

WEIRD = [None, "", "x", 0, 5, 1.5, True, False, [], {}, [{}], {"a": 1}, ["x"], "assistant", "message"]
BLOCKS = [{"type": "text", "text": "t"}, {"type": "thinking", "thinking": "th"},
          {"type": "thinking", "thinking": "th", "signature": "s", "itemId": "i"},
          {"type": "thinking", "thinking": "th", "signature": None}, {"type": "redactedThinking", "data": "d"},
          {"type": "toolUse", "id": "c1", "name": "bash", "input": "{}"},
          {"type": "toolResult", "toolUseId": "c1", "content": "ok", "isError": True},
          {"type": "image", "source": "x"}, {"type": "text", "text": "t", "extra": 1}]


def mutant(rng):
    """A message entry (or header, or bare entry), valid, then with up to
    three of its values replaced, removed or added, anywhere in it."""
    kind = rng.random()
    if kind < 0.08:
        obj = dict(HEADER)
    else:
        obj = {"type": "message", "id": rng.choice(["ab12cd34", "0" * 8, "x"]),
               "parentId": rng.choice([None, "ab12cd34"]), "timestamp": "2026-04-25T17:40:16.000Z"}
        if rng.random() < 0.5:
            obj["provider"], obj["model"] = "openai", "gpt-4o"
        if rng.random() < 0.2:
            obj["api"] = "openai_chat"
        m = {"role": rng.choice(stream.ROLES), "content": [dict(rng.choice(BLOCKS)) for _ in range(rng.randint(0, 4))]}
        if m["role"] == "assistant" and rng.random() < 0.7:
            m.update(provider="openai", model="gpt-4o", stopReason=rng.choice(["stop", "toolUse", None]),
                     usage={"input": 1, "output": 2})
        obj["message"] = m
        if kind > 0.9:                       # bare
            for key in ("id", "parentId", "timestamp"):
                obj.pop(key)
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        spots = list(_spots(obj))
        container, key = rng.choice(spots)
        r = rng.random()
        if r < 0.15 and isinstance(container, dict):
            del container[key]
        elif r < 0.25 and isinstance(container, dict):
            container[rng.choice(["id", "parentId", "timestamp", "provider", "model", "stopReason",
                                  "signature", "type", "role", "content", "message"])] = _weird(rng)
        else:
            container[key] = _weird(rng) if rng.random() < 0.8 else dict(rng.choice(BLOCKS))
    return obj


def _weird(rng):
    """One of WEIRD, a copy of its own (a mutant must not share, or hold itself)."""
    return orjson.loads(orjson.dumps(rng.choice(WEIRD)))


def _spots(obj):
    """(container, key) of every value in obj, nested ones included."""
    stack = [obj]
    while stack:
        c = stack.pop()
        for k, v in (c.items() if isinstance(c, dict) else enumerate(c)):
            yield c, k
            if isinstance(v, (dict, list)):
                stack.append(v)


def hostile_objects(rng, n):
    """Parsed lines: mutants, random_line()'s lines and the hostile lines that parse."""
    return [obj for obj, _ in hostile_pairs(rng, n)]


def hostile_pairs(rng, n):
    """(object, its line) of hostile_objects; the line is None for a mutant."""
    out = [(mutant(rng), None) for _ in range(n)]
    for raw in [random_line(rng) for _ in range(n)] + [*TORN.values(), *SCHEMA.values()]:
        obj = stream.loads(raw) if raw else None
        if obj is not None:
            out.append((obj, raw))
    return out


def test_classify_fast_path_agrees_with_the_full_check():
    """classify takes the common line (a complete message entry) in one
    pass; every other goes through the checks that say why. Both must give
    the same answer, and the same reason, on every line."""
    rng = random.Random(21)
    fast = refused = 0
    for obj in hostile_objects(rng, 4000):
        got = outcome(stream.classify, obj)
        assert got == outcome(stream._classify, obj), obj
        fast += got == ("ok", stream.ENTRY) and obj.get("type") == "message"
        refused += got[0] == "error"
    assert fast > 1000 and refused > 1000, (fast, refused)     # both sides were exercised


def test_classify_agrees_on_the_line_as_parse_line_reads_it():
    """parse_line (bytes) gives classify's kind, or its reason at the line;
    laid out compactly or spaced, in any key order."""
    rng = random.Random(5)
    for obj, raw in hostile_pairs(rng, 1500):
        if raw is None:
            raw = rng.choice([orjson.dumps, lambda o: json.dumps(o, indent=None).encode()])(obj)
        raw = raw.rstrip(b"\n") + b"\n"
        want = outcome(stream.classify, obj)
        try:
            got = ("ok", stream.parse_line(raw, "F", 3).kind)
        except SessionError as e:
            assert (e.file, e.line) == ("F", 3)
            got = ("error", e.message)
        if want[0] == "ok" and want[1] == stream.BARE and not stream.writable(obj):
            want = ("error", stream.UNWRITABLE)
        assert got == want, raw


def test_is_header_agrees_with_classify():
    rng = random.Random(8)
    headers = 0
    pairs = hostile_pairs(rng, 1500) + [(dict(HEADER, version=v), None) for v in (-1, 0, 1, 2, "1", None)]
    for obj, raw in pairs:
        full = outcome(stream.classify, obj) == ("ok", stream.HEADER)
        assert stream.is_header(obj) is full, obj
        raw = orjson.dumps(obj) + b"\n" if raw is None else raw
        assert (stream.header_of(raw) is not None) is full
        headers += full
    assert headers > 25


def _marks_lines(rng, n):
    """Lines, compact or spaced, whose type and role values are written as
    is (the marks' promise does not cover values written with \\u escapes)."""
    out = []
    for obj, raw in hostile_pairs(rng, n):
        if raw is not None and not stream.writable(obj):
            out.append(raw)
            continue
        if rng.random() < 0.3 and obj.get("type") == "message" and isinstance(obj.get("message"), dict):
            obj["message"]["role"] = "assistant"
        if rng.random() < 0.1:
            obj = {"type": "compaction", "id": "c0ffee00", "parentId": None, "timestamp": "t",
                   "summary": "s", "firstKeptId": None, **{k: v for k, v in obj.items() if k not in ("type", "id")}}
        out.append(rng.choice([orjson.dumps, lambda o: json.dumps(o).encode(),
                               lambda o: json.dumps(o, indent=1).encode().replace(b"\n", b"")])(obj))
    return out


def test_the_byte_marks_are_in_every_assistant_and_compaction_entry():
    """A scanner may skip a line without ASSISTANT_MARK (COMPACTION_MARK)
    unparsed: no such line is an assistant (compaction) entry."""
    rng = random.Random(13)
    seen = [0, 0]
    for raw in _marks_lines(rng, 3000):
        obj = stream.loads(raw)
        if obj is None or outcome(stream.classify, obj) != ("ok", stream.ENTRY):
            continue
        if stream.is_assistant(obj):
            seen[0] += 1
            assert stream.ASSISTANT_MARK in raw, raw
        if stream.is_compaction(obj):
            seen[1] += 1
            assert stream.COMPACTION_MARK in raw, raw
    assert seen[0] > 300 and seen[1] > 50, seen


def _random_stream(rng):
    """Bytes of a stream: valid lines laid out every way JSON allows
    (\\r among the whitespace too), blank lines, characters other readers
    break lines at, lines longer than a read, and maybe no last line feed."""
    pieces = [orjson.dumps(HEADER) + b"\n"]
    for i in range(rng.randint(0, 60)):
        r = rng.random()
        if r < 0.1:
            pieces.append(rng.choice([b"\n", b"  \n", b"\r\n", b"\t\r \n"]))
            continue
        text = "".join(rng.choice(["a", "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\r", "\n", "é", "\\"])
                       for _ in range(rng.randint(0, 12)))
        if r > 0.98:
            text = (text or "a") * (70000 // len(text or "a") + 1)     # longer than one read of the stream
        e = dict(ENTRY, id=f"{i:08x}")
        e["message"] = {"role": "user", "content": [{"type": "text", "text": text}]}
        if rng.random() < 0.5:
            raw = orjson.dumps(e)
        else:
            raw = json.dumps(e, ensure_ascii=rng.random() < 0.5).encode()
            raw = raw.replace(b", ", rng.choice([b",\r", b", ", b",\r\r ", b",\t"]))
        pieces.append(raw + rng.choice([b"\n", b"\r\n", b" \r\n"]))
    data = b"".join(pieces)
    if rng.random() < 0.3 and data.endswith(b"}\n"):
        data = data[:-1]
    return data


def _split_on_line_feeds(data, name):
    """The stream's lines as the format defines them: split on b"\\n" only."""
    out = []
    for n, piece in enumerate(data.split(b"\n"), 1):
        if piece.strip():
            raw = piece + b"\n"
            out.append((raw, orjson.loads(raw), stream.classify(orjson.loads(raw)), n))
    return out


def test_reading_in_batches_agrees_with_a_split_on_line_feeds():
    """read_batches splits a read of many lines with bytes.splitlines when it
    holds no \\r (that splits at \\r too): whatever the stream, both readers
    give exactly the lines of a split on b"\\n"."""
    rng = random.Random(34)
    carriage = 0
    for _ in range(200):
        data = _random_stream(rng)
        want = _split_on_line_feeds(data, "S")
        carriage += b"\r" in data.strip()
        batches = list(stream.read_batches(io.BytesIO(data), "S"))
        assert all(batches)
        got = [(x.raw, x.obj, x.kind, x.lineno) for b in batches for x in b]
        assert got == want
        assert [(x.raw, x.obj, x.kind, x.lineno) for x in stream.read(io.BytesIO(data), "S")] == want
    assert carriage > 100


def test_reading_a_real_file_in_batches(tmp_path):
    rng = random.Random(55)
    p = tmp_path / "s.jsonl"
    for _ in range(20):
        data = _random_stream(rng)
        p.write_bytes(data)
        with open(p, "rb") as f:
            got = [(x.raw, x.lineno) for b in stream.read_batches(f, str(p)) for x in b]
        assert got == [(raw, n) for raw, _, _, n in _split_on_line_feeds(data, str(p))]


def test_read_ahead_yields_the_same_items_then_what_was_raised_from_another_thread():
    import threading

    where = []

    def items():
        for k in range(50):
            where.append(threading.current_thread())
            yield [k]
        raise SessionError("a bad line", "<stdin>", 51)

    got = []
    with pytest.raises(SessionError, match="a bad line"):
        for item in stream.read_ahead(items()):
            got.append(item)
    assert got == [[k] for k in range(50)]
    # the first in the caller's thread, every later one in the reading thread
    assert where[0] is threading.current_thread()
    assert len(where) == 50 and all(t is not threading.current_thread() for t in where[1:])
    assert list(stream.read_ahead(iter([]))) == []


def test_read_ahead_holds_at_most_depth_items():
    import threading

    taken = []
    consumed = threading.Event()

    def items():
        for k in range(20):
            taken.append(k)
            yield k

    it = stream.read_ahead(items(), depth=3)
    assert next(it) == 0 and taken == [0]     # taken by the caller: no thread yet
    assert next(it) == 1                      # the thread starts
    for _ in range(5000):   # until the thread has filled the queue and waits for room
        if len(taken) >= 6:
            break
        consumed.wait(0.002)
    # 0 and 1 handed out, 2-4 queued, 5 taken and waiting for room: never more, however long
    assert len(taken) == 6
    consumed.wait(0.05)
    assert len(taken) == 6
    assert list(it) == list(range(2, 20))


def test_lineage_of_a_header():
    """agent, parentSession and relation (SPEC 12); a value of the wrong type reads as absent."""
    h = dict(HEADER, source={"agent": "codex", "path": "/r.jsonl", "id": "x"}, parentSession="p", relation="fork")
    assert stream.lineage(h) == ("codex", "p", "fork")
    assert stream.lineage(HEADER) == ("panto", None, None)
    assert stream.lineage(None) == ("panto", None, None)
    for bad in ({"source": "codex"}, {"source": {"agent": 5}}, {"source": {"agent": ""}},
                {"parentSession": 7, "relation": ["fork"]}, {"parentSession": "", "relation": ""}):
        assert stream.lineage(dict(HEADER, **bad)) == ("panto", None, None), bad
    assert stream.is_branch_summary({"type": "branchSummary"}) and not stream.is_branch_summary({"type": "x"})
