"""pantolib.prices on its own: the Price record, picodollars from USD per
million tokens, what one turn costs (SPEC §8), days and TOML type names."""
from datetime import date, datetime, time, timezone
from decimal import Decimal

import pytest

from pantolib import models_toml, prices
from pantolib.prices import Price


def test_price_names_its_rates_and_refuses_unknown_ones():
    p = Price(input=3, output_above=7, above_tokens=200000, context=10)
    assert (p.input, p.output, p.output_above, p.input_above) == (3, None, 7, None)
    assert (p.above_tokens, p.context) == (200000, 10)
    with pytest.raises(AttributeError, match="inputs"):
        p.inputs
    with pytest.raises(TypeError, match=r"unknown rates: \['cache', 'inputs'\]"):
        Price(inputs=1, cache=2)


def test_price_equality_and_repr():
    p = Price(input=3, cache_read_above=1, above_tokens=5, context=9)
    assert p == Price(input=3, cache_read_above=1, above_tokens=5, context=9)
    assert p != Price(input=3, cache_read_above=1, above_tokens=5)
    assert p != Price(input=3, cache_read=1, above_tokens=5, context=9)
    assert p != (p.base, p.above, 5, 9)
    assert repr(p) == "Price(input=3, cache_read_above=1, above_tokens=5, context=9)"
    assert repr(Price(output=0)) == "Price(output=0)"  # a known zero is shown, unknown is not
    assert repr(prices.UNKNOWN) == "Price()"


@pytest.mark.parametrize("usd, pico", [
    (3, 3_000_000), (0.005, 5_000), (Decimal("0.0000005"), 1), (Decimal("0.0000004"), 0),
    (0.1, 100_000), (Decimal("1.25"), 1_250_000), (0, 0), (-2, 0), (Decimal("-0.5"), 0),
    (float("nan"), 0), (float("inf"), 0), (float("-inf"), 0),
    (Decimal("NaN"), 0), (Decimal("Infinity"), 0), (Decimal("-Infinity"), 0),
    (10**9, 10**15), (Decimal("999999999.9999995"), 999999999999999 + 1),
])
def test_pico_per_token(usd, pico):
    assert prices.pico_per_token(usd) == pico


@pytest.mark.parametrize("usd", [10**9 + 1, 1e10, Decimal("1000000000.000001")])
def test_pico_per_token_refuses_absurd_prices(usd):
    with pytest.raises(ValueError) as e:
        prices.pico_per_token(usd, "output")
    assert str(e.value) == "'output' is too large (at most 1,000,000,000 USD per million tokens)"


@pytest.mark.parametrize("value, kind", [
    (True, "a boolean"), ("3", "a string"), ([1], "an array"), ({"a": 1}, "a table"),
    (date(2026, 1, 2), "a date"), (datetime(2026, 1, 2, 3, 4), "a date-time"), (time(3, 4), "a time"),
])
def test_pico_per_token_refuses_what_is_not_a_number(value, kind):
    with pytest.raises(ValueError) as e:
        prices.pico_per_token(value, "input")
    assert str(e.value) == f"'input' is not a number ({kind})"


def test_toml_type_of_numbers():
    assert [prices.toml_type(v) for v in (1, 1.5, Decimal("2"), False)] == ["a number"] * 3 + ["a boolean"]


def _usage(inp=0, out=0, cr=0, cw=0, **more):
    return {"input": inp, "output": out, "cacheRead": cr, "cacheWrite": cw, **more}


def test_turn_cost_unknown_without_usage_or_price():
    assert prices.turn_cost(None, Price(input=1)) is None
    assert prices.turn_cost(_usage(inp=1), None) is None
    assert prices.turn_cost(_usage(), None) == 0  # no tokens: nothing to price


def test_turn_cost_long_context_tier_prices_the_whole_request_above():
    p = Price(input=10, output=20, cache_read=1, cache_write=5, cache_write_1h=8, above_tokens=100,
              input_above=100, output_above=200, cache_read_above=2, cache_write_above=50, cache_write_1h_above=80)
    at = _usage(inp=60, out=7, cr=30, cw=10, cacheWrite1h=4)  # prompt 100: not above
    assert prices.turn_cost(at, p) == 60 * 10 + 7 * 20 + 30 * 1 + 6 * 5 + 4 * 8
    above = _usage(inp=61, out=7, cr=30, cw=10, cacheWrite1h=4)  # prompt 101
    assert prices.turn_cost(above, p) == 61 * 100 + 7 * 200 + 30 * 2 + 6 * 50 + 4 * 80
    # above the threshold, a category whose _above rate is unknown is unknown
    assert prices.turn_cost(above, Price(input=1, output=1, cache_read=1, cache_write=1, cache_write_1h=1,
                                         above_tokens=100, input_above=2)) is None
    # cacheWrite1h never counts more than cacheWrite
    assert prices.turn_cost(_usage(cw=3, cacheWrite1h=9), p) == 3 * 8


def test_context_window():
    t = models_toml.parse('[openai.m]\ninput = 1\ncontext = 128000\n'
                          '[[openai.m.changes]]\nsince = 2026-05-01\ncontext = 400000\n[openai.n]\ninput = 1\n')
    assert prices.context_window(None, "openai", "m") is None
    assert prices.context_window(t, "openai", "m", "2026-04-30") == 128000
    assert prices.context_window(t, "openai", "m", "2026-05-01") == 400000
    assert prices.context_window(t, "openai", "n") is None
    assert prices.context_window(t, "anthropic", "m") is None


@pytest.mark.parametrize("stamp, day", [
    ("2026-04-25T17:40:16.000Z", "2026-04-25"),
    ("2026-04-25T23:30:00-02:00", "2026-04-26"),   # a local time with its offset
    ("2026-04-25T00:30:00+01:00", "2026-04-24"),
    ("2026-04-25T23:30:00", "2026-04-25"),         # no offset: taken as UTC
    ("2026-04-25", "2026-04-25"),
    ("yesterday", None), ("", None), ("2026-04-25T25:00:00+00:00", None),
    (None, None), (1777000000, None), (["2026-04-25"], None),
])
def test_utc_day(stamp, day):
    assert prices.utc_day(stamp) == day


def test_utc_day_of_a_z_stamp_that_is_no_date():
    assert prices.utc_day("2026-13-01T00:00:00Z") is None
    assert prices.utc_day("2026-ab-cdTnoonZ") is None


def test_today_is_the_utc_day():
    before = datetime.now(timezone.utc).date()
    got = prices.today()
    after = datetime.now(timezone.utc).date()
    assert got in (before.isoformat(), after.isoformat())
    assert before <= date.fromisoformat(got) <= after


def test_in_force_picks_the_last_period_begun():
    a, b, c = Price(input=1), Price(input=2), Price(input=3)
    periods = (("", a), ("2026-03-01", b), ("2026-06-01", c))
    assert [prices.in_force(periods, d) for d in ("2025-01-01", "2026-03-01", "2026-05-31", "2027-01-01")] == [a, b, b, c]
    # periods that all begin later: the first one still prices the day
    assert prices.in_force((("2026-03-01", b), ("2026-06-01", c)), "2026-01-01") is b


@pytest.mark.parametrize("pico, text", [
    (0, "$0.0000"), (938 * 10**8, "$0.0938"), (-5 * 10**11, "-$0.5000"), (123456 * 10**12, "$123,456.0000"),
    (3, "$0.000000000003"), (-49_999_999, "-$0.000049999999"), (50_000_000, "$0.0001"),
])
def test_format_usd(pico, text):
    assert prices.format_usd(pico) == text


def test_prompt_tokens():
    assert prices.prompt_tokens({"input": 5, "output": 9, "cacheRead": 3, "cacheWrite": 2}) == 10
    assert prices.prompt_tokens({"input": -5, "cacheRead": "3", "cacheWrite": 2}) == 2
    assert prices.prompt_tokens(None) == 0
    assert prices.prompt_tokens([1, 2]) == 0
