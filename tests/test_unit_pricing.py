"""pantolib.pricing on its own: token sums of priced entries by model, day
and session, priced at a real models.toml's rates (SPEC §8): a sum prices
exactly as its turns would one by one, unpriced turns are counted apart."""

import pytest

from pantolib import models_toml, pricing
from pantolib.entries import usage_of
from pantolib.prices import turn_cost, utc_day

TABLE = models_toml.parse("""\
[openai.m]
input = 1
output = 2
cache_read = 0.5
cache_write = 3
cache_write_1h = 4

[[openai.m.changes]]
since = 2026-03-01
input = 10

[openai.t]
input = 1
output = 2
above_tokens = 100
input_above = 5
output_above = 6

[[openai.t.changes]]
since = 2026-03-01
above_tokens = 1000

[openai.flat]
input = 1
output = 1
above_tokens = 50
input_above = 2
output_above = 2
""")


@pytest.fixture
def zone(local_zone):
    """The local time zone, five hours behind UTC (a POSIX TZ: no tz database needed)."""
    local_zone("XST+5")


def _turn(ts, usage, provider="openai", model="m", **top):
    return {"type": "message", "timestamp": ts, **top,
            "message": {"role": "assistant", "provider": provider, "model": model, "usage": usage}}


def test_when_key_and_days_of(zone):
    quarters = {}
    assert pricing.when_key("2026-04-25T03:40:16.000Z", quarters) == "2026-04-25 2026-04-24"
    assert quarters == {"2026-04-25T03:30:00Z": "2026-04-25 2026-04-24"}
    assert pricing.when_key("2026-04-25T03:44:59.999Z", quarters) == "2026-04-25 2026-04-24"
    assert len(quarters) == 1  # the same quarter hour: remembered
    assert pricing.when_key("2026-04-25T05:00:00.000Z", quarters) == "2026-04-25 2026-04-25"
    # 24 characters ending in Z, but not what panto writes
    assert pricing.when_key("2026-04-25T24:00:00.000Z", quarters) == "=2026-04-25T24:00:00.000Z"
    assert pricing.when_key("2026-04-25T03:40:16Z", quarters) == "=2026-04-25T03:40:16Z"
    assert pricing.when_key(None, quarters) is None and pricing.when_key(17, quarters) is None
    assert pricing.days_of(None) == (None, "unknown")
    assert pricing.days_of("2026-04-25 2026-04-24") == ("2026-04-25", "2026-04-24")
    assert pricing.days_of("=2026-04-25T03:40:16Z") == ("2026-04-25", "2026-04-24")
    assert pricing.days_of("=2026-04-25T01:00:00+02:00") == ("2026-04-24", "2026-04-24")
    assert pricing.days_of("=yesterday") == (None, "unknown")


@pytest.mark.parametrize("ts", ["yesterday", "", None, 5, "2026-04-25T99:00:00Z", "9999-12-31T23:59:59+00:00x"])
def test_local_day_unknown(zone, ts):
    assert pricing.local_day(ts) == "unknown"


def test_local_day(zone):
    assert pricing.local_day("2026-01-01T04:59:59Z") == "2025-12-31"
    assert pricing.local_day("2026-01-01T05:00:00Z") == "2026-01-01"


def test_tokens_take_provider_and_model_from_the_entry_when_the_message_has_none(zone):
    t = pricing.Tokens(TABLE)
    usage = {"input": 3, "output": 4, "cacheRead": 2, "cacheWrite": 5, "cacheWrite1h": 9, "reasoning": 1}
    e = {"type": "message", "timestamp": "2026-04-25T12:00:00.000Z", "provider": "openai", "model": "m",
         "message": {"role": "assistant", "usage": usage}}
    t.add(e)
    t.add(_turn("2026-04-25T12:05:00.000Z", usage))
    t.add(_turn("2026-04-25T12:05:00.000Z", usage, provider=7, model=["m"]))
    t.add({"type": "compaction", "timestamp": "2026-04-25T12:05:00.000Z", "provider": "openai", "model": "m",
           "usage": {"input": 8}})
    t.add(_turn(None, None))
    when = "2026-04-25 2026-04-25"
    # cacheWrite1h never more than cacheWrite: 5 of the 5 cache writes are 1h ones (mask bit 4, not bit 3)
    assert t.sums == {
        ("openai", "m", when, False, 0b10111): [2, 6, 8, 4, 10, 10, 2, 0],
        (None, None, when, False, 0b10111): [1, 3, 4, 2, 5, 5, 1, 0],
        ("openai", "m", when, False, 0b00001): [1, 8, 0, 0, 0, 0, 0, 1],
        ("openai", "m", None, False, -1): [1, 0, 0, 0, 0, 0, 0, 0],
    }
    assert t.today_dependent is False


def test_tokens_tier_by_the_rates_of_the_day(zone):
    t = pricing.Tokens(TABLE)
    big = {"input": 101, "output": 1}
    t.add(_turn("2026-02-28T12:00:00.000Z", big, model="t"))   # above 100
    t.add(_turn("2026-03-01T12:00:00.000Z", big, model="t"))   # not above 1000
    t.add(_turn("2026-03-01T12:00:00Z", {"input": 1001}, model="t"))  # a stamp of another shape still has a day
    assert sorted((k[2], k[3]) for k in t.sums) == [
        ("2026-02-28 2026-02-28", True), ("2026-03-01 2026-03-01", False), ("=2026-03-01T12:00:00Z", True)]
    assert t.today_dependent is False
    t.add(_turn("not a time", {"input": 101}, model="t"))      # no day: today's rates (above_tokens 1000 since March)
    assert t.today_dependent is True
    assert t.sums[("openai", "t", "=not a time", False, 1)] == [1, 101, 0, 0, 0, 0, 0, 0]
    one = pricing.Tokens(TABLE)
    one.add(_turn("not a time", {"input": 51}, model="flat"))   # one period: no day needed
    assert one.today_dependent is False and list(one.sums) == [("openai", "flat", "=not a time", True, 1)]


def test_tokens_rows_read_back():
    t = pricing.Tokens(TABLE)
    t.add(_turn("2026-04-25T12:00:00.000Z", {"input": 3}))
    t.add(_turn(None, {"input": 3}, provider=None, model=None))
    rows = t.rows()
    assert pricing.Tokens.read(rows) == t.sums
    assert pricing.Tokens.read([]) == {}


@pytest.mark.parametrize("rows, error", [
    ([("openai", "m", None, False, 1, 1, 1, 0, 0, 0, 0, 0, 0)], "not a row of token sums"),
    ([["openai", "m", None, False, 1, 1, 1, 0, 0, 0, 0, 0]], "not a row of token sums"),
    ([["openai", "m", None, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0]], "not a row of token sums"),
    ([["openai", 3, None, False, 1, 1, 1, 0, 0, 0, 0, 0, 0]], "not a row of token sums"),
    ([[None, "m", 1, False, 1, 1, 1, 0, 0, 0, 0, 0, 0]], "not a row of token sums"),
    ([["openai", "m", None, False, 1.0, 1, 1, 0, 0, 0, 0, 0, 0]], "not a row of token sums"),
    ([["openai", "m", None, False, 1, 1, -1, 0, 0, 0, 0, 0, 0]], "not a row of token sums"),
    ([["openai", "m", None, False, 1, 1, 1, 0, 0, 0, 0, 0, True]], "not a row of token sums"),
    ([["openai", "m", "w", False, 1, 1, 1, 0, 0, 0, 0, 0, 0]] * 2, "a row twice"),
])
def test_tokens_read_refuses_rows_that_make_no_sense(rows, error):
    with pytest.raises(ValueError, match=error):
        pricing.Tokens.read(rows)


ENTRIES = [
    ("s1", _turn("2026-02-28T12:00:00.000Z", {"input": 5, "output": 7, "cacheRead": 2, "cacheWrite": 3, "cacheWrite1h": 1})),
    ("s1", _turn("2026-03-01T04:00:00.000Z", {"input": 5, "output": 7, "reasoning": 4})),   # local day 02-28
    ("s2", _turn("2026-03-02T12:00:00.000Z", {"input": 101, "output": 1}, model="t")),
    ("s2", _turn("2026-02-02T12:00:00.000Z", {"input": 101, "output": 1}, model="t")),      # above 100 then
    ("s2", _turn("2026-03-02T12:00:00.000Z", {"input": 1}, model="nope")),                # not in the table
    ("s2", _turn("2026-03-02T12:00:00.000Z", {"output": 1, "cacheRead": 1}, model="t")),  # no cache_read rate
    ("s3", _turn("2026-03-02T12:00:00.000Z", "n/a")),                                       # no usage
    ("s3", _turn("2026-03-02T12:00:00.000Z", {"output": 0, "cacheRead": 0}, model="t")),  # nothing to price
    ("s3", {"type": "compaction", "timestamp": "2026-03-03T12:00:00.000Z", "provider": "openai", "model": "m",
            "usage": {"input": 2}}),
]


def _cost(entry):
    src = entry if entry["type"] == "compaction" else entry["message"]
    return turn_cost(usage_of(src), TABLE.get(src["provider"], src["model"], utc_day(entry["timestamp"])))


def test_tally_prices_each_turn_as_turn_cost_does(zone):
    tally = pricing.Tally(TABLE, by="session")
    for group, e in ENTRIES:
        tally.add(e, group)
    rows = tally.rows
    assert tally.rows is rows  # priced once until something is added
    known = sum(c for c in map(_cost, (e for _, e in ENTRIES)) if c is not None)
    assert known == (5 * 10**6 + 7 * 2 * 10**6 + 2 * 5 * 10**5 + 2 * 3 * 10**6 + 1 * 4 * 10**6
                     + 5 * 10 * 10**6 + 7 * 2 * 10**6
                     + 101 * 10**6 + 2 * 10**6 + 101 * 5 * 10**6 + 6 * 10**6 + 2 * 10 * 10**6)
    total = tally.rollup("total")
    assert pricing.as_dict(total) == {
        "turns": 9, "input": 5 + 5 + 101 + 101 + 1 + 2, "output": 7 + 7 + 1 + 1 + 1, "cacheRead": 3,
        "cacheWrite": 3, "cacheWrite1h": 1, "reasoning": 4, "knownPicoUsd": known, "unpricedTurns": 3,
        "compactions": 1, "billedElsewhere": 0, "picoUsd": None}
    assert {k: (v[0], v[7], v[8]) for k, v in rows.items()} == {
        ("s1", "openai", "m"): (2, 5 * 10**6 + 14 * 10**6 + 10**6 + 6 * 10**6 + 4 * 10**6 + 50 * 10**6 + 14 * 10**6, 0),
        ("s2", "openai", "t"): (3, 101 * 10**6 + 2 * 10**6 + 505 * 10**6 + 6 * 10**6, 1),
        ("s2", "openai", "nope"): (1, 0, 1),
        ("s3", "openai", "m"): (2, 20 * 10**6, 1),
        ("s3", "openai", "t"): (1, 0, 0),
    }
    group = tally.rollup("group")
    assert pricing.as_dict(group["s1"])["picoUsd"] == 94 * 10**6
    assert pricing.as_dict(group["s2"])["picoUsd"] is None
    assert set(tally.rollup("model")) == {("openai", "m"), ("openai", "t"), ("openai", "nope")}
    assert tally.rollup("model")[("openai", "m")][0] == 4
    tally.add(ENTRIES[0][1], "s4")
    assert tally.rows is not rows and tally.rollup("total")[0] == 10


def test_tally_by_local_day_and_within_days(zone):
    by_day = pricing.Tally(TABLE, by="day")
    for _, e in ENTRIES[:4]:
        by_day.add(e)
    by_day.add(_turn("undated", {"input": 1}))
    assert {k: v[0] for k, v in by_day.rows.items()} == {
        ("2026-02-28", "openai", "m"): 2, ("2026-03-02", "openai", "t"): 1,
        ("2026-02-02", "openai", "t"): 1, ("unknown", "openai", "m"): 1}
    ranged = pricing.Tally(TABLE, since="2026-02-28", until="2026-03-01")
    for _, e in ENTRIES:
        ranged.add(e)
    ranged.add(_turn("undated", {"input": 1}))
    assert {k: v[0] for k, v in ranged.rows.items()} == {(None, "openai", "m"): 2}
    assert pricing.Tally(TABLE, since="2026-03-02").rows == {}
    after = pricing.Tally(TABLE, since="2026-03-02")
    for _, e in ENTRIES:
        after.add(e)
    assert after.rollup("total")[0] == 6


def test_merged_sums_price_as_the_entries_would(zone):
    one_by_one = pricing.Tally(TABLE, by="session")
    merged = pricing.Tally(TABLE, by="session")
    per_group = {}
    for group, e in ENTRIES:
        one_by_one.add(e, group)
        per_group.setdefault(group, pricing.Tokens(TABLE)).add(e)
    for group, t in per_group.items():
        merged.merge(group, t.rows() if group == "s2" else t.sums)
    assert merged.rows == one_by_one.rows
    assert merged.rollup("total") == one_by_one.rollup("total")


def test_rates_are_shared_by_the_sums_of_one_utc_day(zone):
    tally = pricing.Tally(TABLE)
    tally.add(_turn("2026-03-02T01:00:00.000Z", {"input": 1}))   # local day 03-01
    tally.add(_turn("2026-03-02T12:00:00.000Z", {"input": 2}))   # local day 03-02: another key, the same rates
    tally.add(_turn("2026-03-02T12:00:00.000Z", {"input": 60, "output": 1}, model="flat"))
    tally.add(_turn("2026-03-02T12:00:00.000Z", {"input": 10, "output": 1}, model="flat"))
    assert tally.rows == {(None, "openai", "m"): [2, 3, 0, 0, 0, 0, 0, 30 * 10**6, 0, 0, 0],
                          (None, "openai", "flat"): [2, 70, 2, 0, 0, 0, 0, 122 * 10**6 + 11 * 10**6, 0, 0, 0]}
