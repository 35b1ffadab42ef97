"""pantolib.entries on its own: timestamps, ids, usage and the shapes of the
entries panto writes (SPEC §3, panto-session(5))."""
import os
import random
import re
import time
from datetime import datetime, timedelta, timezone

import orjson
import pytest

from pantolib import entries, stream

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


# -- timestamps --------------------------------------------------------------------------

@pytest.mark.parametrize("ms,iso", [
    (0, "1970-01-01T00:00:00.000Z"),
    (1, "1970-01-01T00:00:00.001Z"),
    (999, "1970-01-01T00:00:00.999Z"),
    (1_777_139_215_990, "2026-04-25T17:46:55.990Z"),
    (951_782_400_000, "2000-02-29T00:00:00.000Z"),
    (4_102_444_799_999, "2099-12-31T23:59:59.999Z"),
    (-1, "1969-12-31T23:59:59.999Z"),
])
def test_iso_ms_is_utc_with_milliseconds(ms, iso):
    assert entries.iso_ms(ms) == iso


def test_iso_ms_agrees_with_datetime_on_random_instants():
    rng = random.Random(1)
    for _ in range(3000):
        ms = rng.randrange(-2_000_000_000_000, 7_000_000_000_000)
        want = (EPOCH + timedelta(milliseconds=ms)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        assert entries.iso_ms(ms) == want, ms


def test_now_iso_is_the_time_now(local_zone):
    local_zone("America/Los_Angeles")      # never local time
    before = entries.iso_ms(time.time_ns() // 1_000_000)
    now = entries.now_iso()
    after = entries.iso_ms(time.time_ns() // 1_000_000)
    assert ISO.fullmatch(now)
    assert before <= now <= after          # the format sorts as the time does


# -- ids ------------------------------------------------------------------------------------

def test_uuid7_is_a_canonical_version_7_uuid_of_the_time_now():
    before = time.time_ns() // 1_000_000
    ids = [entries.uuid7() for _ in range(2000)]
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == len(ids)
    for u in ids:
        assert UUID.fullmatch(u), u
        ms = int(u.replace("-", "")[:12], 16)          # 48 bits of Unix milliseconds
        assert before <= ms <= after


def test_new_id_is_8_lowercase_hex_not_taken_and_joins_what_is_taken():
    taken = set()
    made = [entries.new_id(taken) for _ in range(3000)]
    assert len(set(made)) == 3000 and taken == set(made)
    assert all(re.fullmatch(r"[0-9a-f]{8}", i) for i in made)
    as_dict = {"ab12cd34": {"x": 1}}
    i = entries.new_id(as_dict)
    assert i != "ab12cd34" and as_dict == {"ab12cd34": {"x": 1}, i: None}
    assert list(as_dict) == ["ab12cd34", i]


class EveryShortId(set):
    """A set that holds every 8-character id (a session whose ids are all taken)."""

    def __contains__(self, i):
        return len(i) == 8 or set.__contains__(self, i)


def test_new_id_falls_back_to_a_longer_id_after_a_hundred_collisions():
    taken = EveryShortId()
    i = entries.new_id(taken)
    assert re.fullmatch(r"[0-9a-f]{32}", i)
    assert set.__contains__(taken, i)


# -- the entries panto writes ---------------------------------------------------------------

def test_make_header_is_a_valid_header_of_this_directory(isolated):
    h = entries.make_header()
    assert list(h) == ["type", "version", "id", "timestamp", "cwd"]
    assert h["type"] == "session" and h["version"] == stream.VERSION == 1
    assert UUID.fullmatch(h["id"]) and ISO.fullmatch(h["timestamp"])
    assert h["cwd"] == os.getcwd() == str(isolated)
    assert entries.make_header("/else")["cwd"] == "/else"
    assert stream.classify(h) == stream.HEADER


def test_make_message_orders_keys_as_the_format_does():
    taken = set()
    u = entries.make_message("user", [entries.text("hi")], None, taken, provider="openai", model="gpt-4o",
                             api="openai_chat")
    assert list(u) == ["type", "id", "parentId", "timestamp", "provider", "model", "api", "message"]
    assert u["message"] == {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    assert u["parentId"] is None and taken == {u["id"]}
    a = entries.make_message("assistant", [], u["id"], taken)
    assert list(a) == ["type", "id", "parentId", "timestamp", "message"]
    assert a["parentId"] == u["id"] and taken == {u["id"], a["id"]}
    for e in (u, a):
        assert stream.classify(e) == stream.ENTRY and ISO.fullmatch(e["timestamp"])
    # as written: compact, in that order
    line = stream.dumps(u)
    assert line.startswith(b'{"type":"message","id":"' + u["id"].encode() + b'","parentId":null,"timestamp":"')
    assert line.endswith(b'"provider":"openai","model":"gpt-4o","api":"openai_chat",'
                         b'"message":{"role":"user","content":[{"type":"text","text":"hi"}]}}\n')


def test_complete_gives_a_bare_entry_its_envelope_and_keeps_the_rest_in_order():
    bare = {"type": "note", "z": 1, "message": {"role": "user", "content": []}, "a": [2]}
    taken = {"ab12cd34": None}
    e = entries.complete(bare, "ab12cd34", taken)
    assert list(e) == ["type", "id", "parentId", "timestamp", "z", "message", "a"]
    assert (e["type"], e["parentId"], e["z"], e["a"]) == ("note", "ab12cd34", 1, [2])
    assert e["id"] in taken and e["id"] != "ab12cd34" and ISO.fullmatch(e["timestamp"])
    assert "id" not in bare                                # the bare entry is left as it was
    assert stream.classify(bare) == stream.BARE and stream.classify(e) == stream.ENTRY


def test_stamp_puts_the_model_before_the_message_and_replaces_an_old_stamp():
    e = {"type": "message", "id": "x", "parentId": None, "timestamp": "t", "message": {"role": "user"}}
    same = entries.stamp(e, "openai", "gpt-4o", "openai_chat")
    assert same is e
    assert list(e.items()) == [("type", "message"), ("id", "x"), ("parentId", None), ("timestamp", "t"),
                               ("provider", "openai"), ("model", "gpt-4o"), ("api", "openai_chat"),
                               ("message", {"role": "user"})]
    entries.stamp(e, "anthropic", "claude")
    assert list(e) == ["type", "id", "parentId", "timestamp", "provider", "model", "message"]
    assert (e["provider"], e["model"]) == ("anthropic", "claude")   # no api left from the old stamp


# -- usage ------------------------------------------------------------------------------------

def test_usage_keys():
    assert entries.USAGE_KEYS == ("input", "output", "cacheRead", "cacheWrite", "reasoning", "cacheWrite1h")


@pytest.mark.parametrize("usage,want", [
    ({"input": 10, "output": 5}, (10, 5, 0, 0, 0, 0)),
    ({"input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4, "reasoning": 5, "cacheWrite1h": 6}, (1, 2, 3, 4, 5, 6)),
    ({}, (0, 0, 0, 0, 0, 0)),
    ({"input": -3, "output": 1.5, "cacheRead": "7", "cacheWrite": None, "reasoning": True, "cacheWrite1h": [1]},
     (0, 0, 0, 0, 0, 0)),
    ({"input": 10**30, "output": 0, "other": 9}, (10**30, 0, 0, 0, 0, 0)),
    (None, None),
    ([1, 2], None),
    ("10", None),
    (5, None),
])
def test_usage_counts_reads_missing_non_integer_and_negative_fields_as_zero(usage, want):
    assert entries.usage_counts(usage) == want
    msg = {"role": "assistant", "content": []}
    if usage is not None:
        msg["usage"] = usage
    got = entries.usage_of(msg)
    assert got == (None if want is None else dict(zip(entries.USAGE_KEYS, want)))


def test_usage_dict_writes_input_and_output_always_and_the_others_when_not_zero():
    assert entries.usage_dict() == {"input": 0, "output": 0}
    assert entries.usage_dict(3, 4, reasoning=2) == {"input": 3, "output": 4, "reasoning": 2}
    full = entries.usage_dict(1, 2, 3, 4, 5, 6)
    assert list(full) == ["input", "output", "cacheRead", "cacheWrite", "reasoning", "cacheWrite1h"]
    rng = random.Random(4)
    for _ in range(500):
        n = [rng.choice([0, 0, 1, rng.randrange(10**9)]) for _ in range(6)]
        u = entries.usage_dict(*n)
        assert entries.usage_counts(orjson.loads(orjson.dumps(u))) == tuple(n)
        assert all(u[k] for k in u if k not in ("input", "output"))


def test_image_blocks_are_read_and_named_by_type_and_decoded_size():
    import base64

    from pantolib.entries import image_of, image_text

    for n, shown in ((1, "1 byte"), (2, "2 bytes"), (1023, "1023 bytes"), (1024, "1 KB"),
                     (123 * 1024 + 300, "123 KB"), (3 * 1024 * 1024 + 1, "3.0 MB")):
        data = base64.b64encode(b"\0" * n).decode()
        for d in (data, data.rstrip("=")):        # padded or not, the same size
            block = {"type": "image", "mediaType": "image/png", "data": d}
            assert image_of(block) == ("image/png", d)
            assert image_text(block) == f"[image: image/png, {shown}]", (n, d[-3:])
    for bad in ({"type": "image", "data": "AAAA"}, {"type": "image", "mediaType": "image/png", "data": 5},
                {"type": "image", "mediaType": "", "data": "AAAA"}, {"type": "text", "text": "x"}, "image"):
        assert image_of(bad) is None
    assert image_text({"type": "image", "data": "AAAA"}) == "[image: not readable]"


def test_billed_in_is_a_non_empty_string_at_the_top_of_the_entry():
    from pantolib.entries import billed_in

    assert billed_in({"type": "message", "billedIn": "0199aaaa"}) == "0199aaaa"
    for e in ({"type": "message"}, {"billedIn": ""}, {"billedIn": 5}, {"message": {"billedIn": "x"}}, None):
        assert billed_in(e) is None
