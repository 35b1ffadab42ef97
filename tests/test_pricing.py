"""pantolib.pricing in-process: units, unknown prices, turn cost rules, models.toml.

The seed's figures are micro-cents; panto stores picodollars, so every seed
figure appears here multiplied by 10^4.
"""
import io
import json
from decimal import Decimal

import orjson
import pytest

from conftest import SEED_TOML

from pantolib import models_toml, pricing
from pantolib import scan as scanner
from pantolib import prices as rates
from pantolib.entries import usage_of
from pantolib.errors import PantoError, SessionError
from pantolib.prices import Price, pico_per_token, turn_cost


def usage(input=0, output=0, cacheRead=0, cacheWrite=0, reasoning=0, cacheWrite1h=0):
    return dict(input=input, output=output, cacheRead=cacheRead, cacheWrite=cacheWrite,
                reasoning=reasoning, cacheWrite1h=cacheWrite1h)


# --- units --------------------------------------------------------------------

@pytest.mark.parametrize("usd, pico", [
    (3.0, 3_000_000), (15.0, 15_000_000), (0.3, 300_000), (0, 0), (-1, 0),  # seed x 10^4
    (0.1 * 3.0, 300_000),                  # float noise rounds to the clean integer
    (3, 3_000_000), (Decimal("3.75"), 3_750_000),
    (Decimal("0.005"), 5_000), (Decimal("0.025"), 25_000), (Decimal("0.125"), 125_000),
    (0.005, 5_000), (0.075, 75_000), (0.275, 275_000),
    (Decimal("0.0000005"), 1), (Decimal("0.0000004"), 0),  # half up
    (Decimal("1e-30"), 0), (Decimal("-0.5"), 0), (Decimal("-0"), 0),
    (float("nan"), 0), (float("inf"), 0), (float("-inf"), 0),
    (Decimal("NaN"), 0), (Decimal("Infinity"), 0), (Decimal("-Infinity"), 0),
])
def test_pico_per_token(usd, pico):
    got = pico_per_token(usd)
    assert got == pico and type(got) is int


@pytest.mark.parametrize("bad", ["3", True, False, None, [3], {"a": 1}])
def test_pico_per_token_refuses_non_numbers(bad):
    with pytest.raises(ValueError, match="'input' is not a number"):
        pico_per_token(bad, "input")


def test_pico_per_token_refuses_absurd_prices():
    with pytest.raises(ValueError, match="too large"):
        pico_per_token(Decimal("1e400"), "output")
    with pytest.raises(ValueError, match="too large"):
        pico_per_token(10**100, "output")


@pytest.mark.parametrize("pico, text", [
    (0, "$0.0000"), (9_375_000_000, "$0.0094"), (6_000_000_000, "$0.0060"),
    (421_000_000_000, "$0.4210"), (50_000_000, "$0.0001"), (49_999_999, "$0.000049999999"),
    (5_000, "$0.000000005"), (1, "$0.000000000001"), (1234 * 10**12, "$1,234.0000"),
])
def test_format_usd(pico, text):
    assert rates.format_usd(pico) == text


# --- turn cost (the seed's costMicroCents tests, x 10^4) ------------------------

def test_standard_mixed_input_output():
    p = Price(input=3_000_000, output=15_000_000)
    assert turn_cost(usage(input=1000, output=200), p) == 6_000_000_000


def test_cache_read_and_write_rates_are_honoured():
    p = Price(input=3_000_000, output=15_000_000, cache_read=300_000, cache_write=3_750_000)
    u = usage(input=1000, output=200, cacheRead=5000, cacheWrite=500)
    assert turn_cost(u, p) == 9_375_000_000


def test_reasoning_is_never_added():
    p = Price(input=0, output=15_000_000)
    assert turn_cost(usage(output=100, reasoning=60), p) == 1_500_000_000


def test_unknown_price_with_tokens_makes_the_turn_unknown():
    p = Price(input=2_500_000, output=10_000_000)
    assert turn_cost(usage(input=1000, output=200, cacheRead=500), p) is None


def test_unknown_price_with_zero_tokens_stays_known():
    p = Price(input=2_500_000, output=10_000_000)
    assert turn_cost(usage(input=1000, output=200), p) == 4_500_000_000


def test_known_zero_price_is_not_unknown():
    p = Price(input=2_500_000, output=10_000_000, cache_write=0)
    assert turn_cost(usage(input=10, cacheWrite=1000), p) == 25_000_000


def test_no_usage_is_unknown_even_for_free_models():
    assert turn_cost(None, Price(input=0, output=0, cache_read=0, cache_write=0)) is None


def test_model_missing_from_the_table():
    assert turn_cost(usage(input=1), None) is None
    assert turn_cost(usage(), None) == 0  # no tokens in any category: nothing is unknown


def test_one_hour_cache_writes_use_their_own_rate():
    p = Price(input=3_000_000, cache_write=3_750_000, cache_write_1h=6_000_000)
    u = usage(input=10, cacheWrite=1000, cacheWrite1h=400)
    assert turn_cost(u, p) == 10 * 3_000_000 + 600 * 3_750_000 + 400 * 6_000_000


def test_one_hour_cache_writes_without_a_price_are_unknown_not_underpriced():
    p = Price(input=3_000_000, cache_write=3_750_000)
    assert turn_cost(usage(cacheWrite=1000, cacheWrite1h=1), p) is None
    assert turn_cost(usage(cacheWrite=1000), p) == 1000 * 3_750_000


def test_one_hour_part_larger_than_cache_write_is_clamped():
    p = Price(cache_write=1, cache_write_1h=10)
    assert turn_cost(usage(cacheWrite=5, cacheWrite1h=50), p) == 50


def long_context():
    return Price(input=3_000_000, output=15_000_000, cache_read=300_000, cache_write=3_750_000,
                 cache_write_1h=6_000_000, above_tokens=200_000, input_above=6_000_000,
                 output_above=22_500_000, cache_read_above=600_000, cache_write_above=7_500_000,
                 cache_write_1h_above=12_000_000)


def test_long_context_tier_prices_the_whole_request():
    p = long_context()
    at = usage(input=100_000, cacheRead=90_000, cacheWrite=10_000, output=1000)  # exactly 200k
    assert turn_cost(at, p) == (100_000 * 3_000_000 + 90_000 * 300_000 + 10_000 * 3_750_000
                                + 1000 * 15_000_000)
    over = usage(input=100_001, cacheRead=90_000, cacheWrite=10_000, cacheWrite1h=4000, output=1000)
    assert turn_cost(over, p) == (100_001 * 6_000_000 + 90_000 * 600_000 + 6000 * 7_500_000
                                  + 4000 * 12_000_000 + 1000 * 22_500_000)


def test_long_context_counts_cached_prompt_tokens_too():
    p = long_context()
    mostly_cached = usage(input=1, cacheRead=200_000, output=1)
    assert turn_cost(mostly_cached, p) == 6_000_000 + 200_000 * 600_000 + 22_500_000


def test_long_context_without_an_above_rate_is_unknown():
    p = Price(input=3_000_000, output=15_000_000, above_tokens=200_000, input_above=6_000_000)
    assert turn_cost(usage(input=200_001, output=1), p) is None
    assert turn_cost(usage(input=200_001), p) == 200_001 * 6_000_000
    assert turn_cost(usage(input=200_000, output=1), p) == 200_000 * 3_000_000 + 15_000_000


def test_exact_sums_where_floats_drift():
    price = Price(input=pico_per_token(Decimal("0.005")), output=pico_per_token(Decimal("0.1")))
    total = sum(turn_cost(usage(input=3, output=7), price) for _ in range(100_000))
    assert total == 100_000 * (3 * 5_000 + 7 * 100_000)
    floats = sum(3 * 0.005 / 1e6 + 7 * 0.1 / 1e6 for _ in range(100_000))
    assert floats != total / 10**12  # what a float sum would have said


# --- models.toml (the seed's models_toml tests, x 10^4) -------------------------



def test_two_providers_several_models():
    prices = models_toml.parse(SEED_TOML.encode())
    assert len(prices) == 3
    anth = prices.get("anthropic", "claude-sonnet-4-20250514")
    assert (anth.input, anth.output, anth.cache_read, anth.cache_write) == (
        3_000_000, 15_000_000, 300_000, 3_750_000)
    oa = prices.get("openai", "gpt-4o")
    assert (oa.input, oa.output, oa.cache_read, oa.cache_write) == (2_500_000, 10_000_000, 1_250_000, None)
    mini = prices.get("openai", "gpt-4o-mini")
    assert (mini.input, mini.output, mini.cache_read, mini.cache_write) == (150_000, 600_000, None, None)
    assert prices.get("openai", "gpt-5") is None
    assert prices.notes == []


def test_integers_are_accepted():
    p = models_toml.parse(b"[openai.gpt-4o]\ninput = 3\noutput = 15\n").get("openai", "gpt-4o")
    assert (p.input, p.output) == (3_000_000, 15_000_000)


def test_missing_fields_stay_unknown_and_zero_is_known():
    p = models_toml.parse(b"[openai.gpt-4o]\ninput = 2.5\noutput = 10.0\ncache_read = 1.25\n"
                      b"cache_write = 0\n").get("openai", "gpt-4o")
    assert p.cache_write == 0 and p.cache_write_1h is None and p.above_tokens is None


def test_numbers_are_read_exactly():
    p = models_toml.parse(b"[openai.x]\ninput = 0.005\noutput = 1e-1\ncache_read = 0.30000000000000004\n"
                      b"cache_write = 1_000\n").get("openai", "x")
    assert (p.input, p.output, p.cache_read, p.cache_write) == (5_000, 100_000, 300_000, 1_000_000_000)


def test_malformed_toml_names_file_line_and_column():
    with pytest.raises(PantoError, match=r"^F:1:5: invalid value"):
        models_toml.parse(b"x = =\n", "F")
    with pytest.raises(PantoError, match=r"^F:3:\d+: "):
        models_toml.parse(b"[a.b]\ninput = 1\n[a.b]\n", "F")
    with pytest.raises(PantoError, match=r"^F:2:\d+: unterminated string"):
        models_toml.parse(b"[a.b]\ninput = \"", "F")


def test_missing_file_is_an_empty_table(tmp_path):
    prices = models_toml.load(str(tmp_path / "nope" / "models.toml"))
    assert len(prices) == 0 and prices.missing


def test_config_path_xdg_wins_then_home():
    env = {"XDG_CONFIG_HOME": "/custom/cfg", "HOME": "/ignored"}
    assert models_toml.default_path(env) == "/custom/cfg/panto/models.toml"
    assert models_toml.default_path({"HOME": "/home/user"}) == "/home/user/.config/panto/models.toml"


def test_bare_dotted_model_ids_are_joined_back():
    prices = models_toml.parse(b"[openai.gpt-4.1]\ninput = 2\n[openai.gpt-4]\ninput = 3\n"
                           b"[openai.\"o1.preview.x\"]\ninput = 4\n")
    assert prices.get("openai", "gpt-4.1").input == 2_000_000
    assert prices.get("openai", "gpt-4").input == 3_000_000
    assert prices.get("openai", "o1.preview.x").input == 4_000_000
    assert prices.get("openai", "gpt-4.1.1") is None


def test_quoted_and_bare_spellings_of_one_model_conflict():
    with pytest.raises(PantoError, match=r'\[openai\."gpt-4\.1"\] is defined twice'):
        models_toml.parse(b"[openai.\"gpt-4.1\"]\ninput = 2\n[openai.gpt-4.1]\ninput = 3\n")


def test_empty_model_table_is_a_model_with_unknown_prices():
    prices = models_toml.parse(b"[openai.gpt-4o]\n")
    assert prices.get("openai", "gpt-4o") == Price()


def test_long_context_and_one_hour_keys():
    p = models_toml.parse(b"[anthropic.s]\ncache_write_1h = 6\nabove_tokens = 200000\ninput_above = 6\n"
                      b"output_above = 22.5\ncache_read_above = 0.6\ncache_write_above = 7.5\n"
                      b"cache_write_1h_above = 12\n").get("anthropic", "s")
    assert p.above_tokens == 200_000 and p.cache_write_1h == 6_000_000
    assert p.above == (6_000_000, 22_500_000, 600_000, 7_500_000, 12_000_000)


@pytest.mark.parametrize("src, message", [
    (b'[openai.gpt-4o]\ninput = "3"\n', r"\[openai\.gpt-4o\] 'input' is not a number \(a string\)"),
    (b"[openai.gpt-4o]\noutput = true\n", r"'output' is not a number \(a boolean\)"),
    (b"[openai.gpt-4o]\ncache_read = [1]\n", r"'cache_read' is not a number \(an array\)"),
    (b"[openai.gpt-4o]\ninput = 1979-05-27\n", r"^F:2:9: \[openai\.gpt-4o\] 'input' is not a number \(a date\)"),
    (b"[openai.gpt-4o]\ninput = {a = 1}\n", r"\[openai\.gpt-4o\] 'input' is not a number \(a table\)"),
    (b"[openai.gpt-4o]\ninput = 1e400\n", r"'input' is too large"),
    (b"[openai.gpt-4o]\nabove_tokens = 1.5\n", r"'above_tokens' must be a whole number"),
    (b"[openai.gpt-4o]\nabove_tokens = -1\n", r"'above_tokens' must be a whole number"),
    (b"input = 3\n", r"'input' is not a table of models"),
    (b"[openai]\ninput = 3\n", r"\[openai\] 'input': prices go in a model table"),
    (b"[[openai.gpt-4o]]\ninput = 3\n", r"array of tables"),
    (b"[a." + b".".join(b"k" for _ in range(40)) + b"]\ninput = 1\n", r"nested too deeply"),
    (b"[a.b]\ninput = 1\n\xff\n", r"^F:3:1: not valid UTF-8"),
    (b"[a.b]\ninput = 1\x00\n", r"^F:2:10: "),
    (b"x = " + b"[" * 100_000 + b"\n", r"^F(:\d+:\d+)?: "),
])
def test_hostile_toml_is_a_clear_error(src, message):
    with pytest.raises(PantoError, match=message):
        models_toml.parse(src, "F")


def test_non_finite_and_negative_prices_are_known_zeros():
    p = models_toml.parse(b"[a.b]\ninput = inf\noutput = nan\ncache_read = -inf\ncache_write = -3\n"
                      ).get("a", "b")
    assert p.base[:4] == (0, 0, 0, 0)


def test_unknown_keys_are_noted_not_priced():
    prices = models_toml.parse(b"[openai.gpt-4o]\ninptu = 2.5\nwindow = 'long'\n", "F")
    assert prices.get("openai", "gpt-4o").input is None
    assert len(prices.notes) == 2 and "unknown key 'inptu'" in prices.notes[0]


def test_byte_order_mark_is_accepted():
    assert models_toml.parse("\ufeff[a.b]\ninput = 1\n".encode()).get("a", "b").input == 1_000_000


def test_a_directory_is_not_a_price_table(tmp_path):
    with pytest.raises(PantoError, match="is a directory"):
        models_toml.load(str(tmp_path))


# --- the scanner ---------------------------------------------------------------

HEADER = {"type": "session", "version": 1, "id": "0199", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"}


def assistant(i, **usage_):
    return {"type": "message", "id": f"{i:08x}", "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "x" * i}],
                        "provider": "p", "model": "m", "stopReason": "stop", "usage": usage_}}


def scan(data, stream=False, chunk=None):
    """Scan data with the C library's memmem and with bytes.find: both must see the same."""
    s = scanner.PricedEntries(io.BytesIO(data), "F", stream=stream, chunk=chunk or scanner.CHUNK)
    ids = [e["id"] for e in s]
    plain = scanner.PricedEntries(io.BytesIO(data), "F", stream=stream, chunk=chunk or scanner.CHUNK, fast=False)
    assert [e["id"] for e in plain] == ids and plain.notes == s.notes and plain.header == s.header
    return s, ids


def test_scan_finds_assistant_lines_across_chunk_boundaries():
    lines = [HEADER] + [assistant(i, input=i) for i in range(1, 300)]
    data = b"".join(orjson.dumps(x) + b"\n" for x in lines)
    s, ids = scan(data, chunk=97)  # lines much longer and shorter than a chunk
    assert ids == [f"{i:08x}" for i in range(1, 300)] and s.header["id"] == "0199" and not s.notes


def test_scan_other_spacing_and_false_positives():
    spaced = b'{"type": "message", "id": "s1", "timestamp": "t", "message": {"role" : "assistant", "content": []}}\n'
    quoted = orjson.dumps({"type": "message", "id": "u1", "timestamp": "t", "message": {
        "role": "user", "content": [{"type": "text", "text": 'say "assistant"'}]}}) + b"\n"
    keyed = b'{"type":"note","id":"n1","timestamp":"t","who":"assistant"}\n'
    _, ids = scan(orjson.dumps(HEADER) + b"\n" + spaced + quoted + keyed)
    assert ids == ["s1"]


def test_scan_torn_tail_and_torn_middle():
    good = orjson.dumps(assistant(1)) + b"\n"
    s, ids = scan(good + good[:-10])
    assert ids == ["00000001"] and "no line feed" in s.notes[0] and s.notes[0].startswith("F:2:")
    s, ids = scan(good + good[:-10], stream=True)  # a stream's last line counts only if it parses
    assert ids == ["00000001"] and "F:2: not valid JSON" in s.notes[0]
    s, ids = scan(good + good[:-1], stream=True)
    assert ids == ["00000001", "00000001"] and not s.notes
    # a bad line with lines after it is no torn write (SPEC §4): it alone is left out, and named
    s, ids = scan(good + good[:-30] + b"\n" + good)
    assert ids == ["00000001", "00000001"] and s.notes == ["F:2: not valid JSON; not counted"]
    # lines without the mark are not parsed, so not checked either (panto-log replay checks)
    s, ids = scan(good + good[:40] + b"\n" + good)
    assert ids == ["00000001", "00000001"] and not s.notes


def test_scan_refuses_what_is_not_a_session():
    with pytest.raises(SessionError, match=r"^F:3: not a panto session"):
        scan(b"\n  \nhello\n")
    with pytest.raises(SessionError, match=r"^F:1: not a panto session"):
        scan(b'{"type":"session","version":99,"id":"x","timestamp":"t","cwd":"/"}\n')
    s, ids = scan(b"")
    assert ids == [] and s.header is None


# --- dated changes ---------------------------------------------------------------

SONNET_TOML = """\
[anthropic."claude-sonnet-5-5"]
input = 2.0
output = 10.0
cache_read = 0.2
context = 1000000

[[anthropic."claude-sonnet-5-5".changes]]
since = 2026-10-07
cache_read = 0.1

[[anthropic."claude-sonnet-5-5".changes]]
since = 2026-12-01
output = 8
context = 2000000
"""


def periods(src, provider="anthropic", model="claude-sonnet-5-5"):
    return models_toml.parse(src.encode(), "F").periods(provider, model)


def test_changes_apply_cumulatively_from_their_day():
    (d0, p0), (d1, p1), (d2, p2) = periods(SONNET_TOML)
    assert (d0, d1, d2) == ("", "2026-10-07", "2026-12-01")
    assert (p0.input, p0.output, p0.cache_read, p0.context) == (2_000_000, 10_000_000, 200_000, 1_000_000)
    assert (p1.input, p1.output, p1.cache_read, p1.context) == (2_000_000, 10_000_000, 100_000, 1_000_000)
    assert (p2.input, p2.output, p2.cache_read, p2.context) == (2_000_000, 8_000_000, 100_000, 2_000_000)
    prices = models_toml.parse(SONNET_TOML.encode())
    assert prices.get("anthropic", "claude-sonnet-5-5", "2026-10-06").cache_read == 200_000
    assert prices.get("anthropic", "claude-sonnet-5-5", "2026-10-07").cache_read == 100_000
    assert prices.get("anthropic", "claude-sonnet-5-5", "2027-01-01").output == 8_000_000


def test_changes_are_ordered_by_date_not_by_file_order():
    head, first, second = SONNET_TOML.split("\n\n")
    assert periods("\n\n".join([head, second, first])) == periods(SONNET_TOML)
    assert periods("\n\n".join([second, head, first])) == periods(SONNET_TOML)


def test_changes_under_a_bare_dotted_id_and_without_base_fields():
    src = "[[openai.gpt-4.1.changes]]\nsince = 2026-03-01\ninput = 2\n"
    (d0, p0), (d1, p1) = periods(src, "openai", "gpt-4.1")
    assert p0 == Price() and d1 == "2026-03-01" and p1.input == 2_000_000
    src = "[openai.\"gpt-4.1\"]\noutput = 8\n[[openai.gpt-4.1.changes]]\nsince = 2026-03-01\ninput = 2\n"
    (_, p0), (_, p1) = periods(src, "openai", "gpt-4.1")
    assert (p0.input, p0.output, p1.input, p1.output) == (None, 8_000_000, 2_000_000, 8_000_000)
    assert periods("[openai.x]\ninput = 1\nchanges = []\n", "openai", "x") == (("", Price(input=1_000_000)),)


@pytest.mark.parametrize("src, message", [
    ("[a.m]\ninput = 1\n\n[[a.m.changes]]\ninput = 2\n",
     r"^F:4:1: \[\[a\.m\.changes\]\] has no 'since' date \(write e\.g\. since = 2026-10-07\)$"),
    ("[a.m]\ninput = 1\n[[a.m.changes]]\n  since = \"2026-10-07\"\n",
     r"^F:4:11: \[\[a\.m\.changes\]\] 'since' must be a TOML date such as 2026-10-07, not a string"),
    ("[[a.m.changes]]\nsince = 2026-10-07T00:00:00Z\n", r"^F:2:9: .* not a date-time"),
    ("[[a.m.changes]]\nsince = 12:00:00\n", r"^F:2:9: .* not a time"),
    ("[[a.\"m.1\".changes]]\nsince = 2026-10-07\n\n[[a.'m.1'.changes]]\nsince = 2026-10-07\ninput = 1\n",
     r"^F:5:9: \[\[a\.\"m\.1\"\.changes\]\] has two changes since 2026-10-07: merge them"),
    ("[[a.\"m.1\".changes]]\nsince = 2026-10-07\n[[a.m.1.changes]]\nsince = 2026-10-08\n",
     r"^F: \[a\.\"m\.1\"\] is defined twice"),
    ("[[a.m.changes]]\nsince = 2026-10-07\ninput = 'cheap'\n",
     r"^F:3:9: \[\[a\.m\.changes\]\] since 2026-10-07 'input' is not a number \(a string\)"),
    ("[[a.m.changes]]\nsince = 2026-10-07\n[a.m.changes.extra]\ninput = 1\n",
     r"'extra' is not a number \(a table\)"),
    ("[[a.m.changes]]\nsince = 2026-10-07\n[[a.m.changes.changes]]\nsince = 2026-10-08\n",
     r"'changes' cannot be nested in a change"),
    ("[a.m]\ninput = 1\nchanges = 3\n", r"^F:3:11: \[a\.m\] 'changes' must be an array of tables"),
    ("[a.m]\nchanges = [1, 2]\n", r"^F:2:11: \[a\.m\] 'changes' must be an array of tables"),
    ("[a]\nm = {changes = [{input = 1}]}\n", r"^F: \[\[a\.m\.changes\]\] has no 'since' date"),  # no header to point at
    ("[[a.changes]]\nsince = 2026-10-07\n", r"array of tables, not a model table"),
    ("[a.m]\ncontext = 0\n", r"^F:2:11: \[a\.m\] 'context' must be a positive whole number of tokens"),
    ("[a.m]\ncontext = 1.5\n", r"'context' must be a positive whole number"),
    ("[a.m]\ncontext = '1M'\n", r"'context' must be a positive whole number"),
    ("[a.m]\nchecked = 'yesterday'\n", r"^F:2:11: \[a\.m\] 'checked' must be a TOML date"),
    ("[a]\nsource = 3\n", r"^F: \[a\] 'source' must be a string"),
])
def test_malformed_changes_and_fields_name_file_line_and_column(src, message):
    with pytest.raises(PantoError, match=message):
        models_toml.parse(src.encode(), "F")


def test_checked_and_source_are_kept_for_people_not_priced():
    prices = models_toml.parse(b'[a]\nsource = "https://example.com/pricing"\n[a.m]\ninput = 1\n'
                           b'checked = 2026-12-01\nsource = "https://example.com/m"\n'
                           b'[[a.m.changes]]\nsince = 2026-10-07\nsource = "https://example.com/news"\n')
    assert prices.notes == [] and len(prices) == 1
    assert prices.get("a", "m", "2026-01-01") == prices.get("a", "m", "2026-12-01") == Price(input=1_000_000)


# --- context and prompt tokens ------------------------------------------------------

def test_context_window():
    prices = models_toml.parse(SONNET_TOML.encode() + b"[openai.x]\ninput = 1\n[openai.w]\ncontext = 1e6\n")
    assert rates.context_window(prices, "anthropic", "claude-sonnet-5-5", "2026-11-30") == 1_000_000
    assert rates.context_window(prices, "anthropic", "claude-sonnet-5-5", "2026-12-01") == 2_000_000
    assert rates.context_window(prices, "openai", "w") == 1_000_000
    assert rates.context_window(prices, "openai", "x") is None        # the table does not say
    assert rates.context_window(prices, "openai", "nobody") is None   # not in the table
    assert rates.context_window(None, "openai", "w") is None          # no table at all
    today = rates.today()
    assert rates.context_window(prices, "anthropic", "claude-sonnet-5-5") == (
        2_000_000 if today >= "2026-12-01" else 1_000_000)


@pytest.mark.parametrize("usage_, n", [
    ({"input": 10, "output": 99, "cacheRead": 200, "cacheWrite": 3000, "reasoning": 7}, 3210),
    ({"input": 10}, 10),
    ({"input": -5, "cacheRead": "100", "cacheWrite": True, "output": 9}, 0),
    ({"input": 1.5, "cacheRead": None, "cacheWrite": 4}, 4),
    ({}, 0), (None, 0), ([1, 2], 0), ("10", 0),
])
def test_prompt_tokens(usage_, n):
    assert rates.prompt_tokens(usage_) == n


@pytest.mark.parametrize("ts, day", [
    ("2026-10-06T23:59:59.999Z", "2026-10-06"),
    ("2026-10-07T00:00:00.000Z", "2026-10-07"),
    ("2026-10-06T20:30:00-05:00", "2026-10-07"),   # an offset: its UTC day counts
    ("2026-10-07T01:00:00+02:00", "2026-10-06"),
    ("2026-10-07T12:00:00", "2026-10-07"),          # no offset: taken as UTC
    ("2026-10-07", "2026-10-07"),
    ("2026-10-07T00:00:00.000+00:00", "2026-10-07"), ("0001-01-01T00:00:00+01:00", None),
    ("t", None), ("", None), (None, None), (17, None), ("2026-13-45T00:00:00", None),
])
def test_utc_day(ts, day):
    assert rates.utc_day(ts) == day


def test_pricing_is_cheap_to_import():
    import subprocess
    import sys

    code = ("import sys, pantolib.pricing, pantolib.models_toml, pantolib.prices as p; "
            "assert p.prompt_tokens({'input': 1}) == 1; "
            "print(' '.join(sorted(m for m in ('orjson', 'tomllib', 'decimal', 'datetime', 'pantolib.stream', "
            "'httpx', 'pantolib.paths') if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == []


# --- priced entries: compaction, and the stream's verdict on hostile lines --------------

def compaction(i, **usage_):
    return {"type": "compaction", "id": f"c{i:07x}", "parentId": None, "timestamp": "2026-01-01T00:00:02.000Z",
            "summary": "so far: assistant said hi", "firstKeptId": None, "provider": "p", "model": "m",
            "usage": usage_}


def test_scan_finds_compaction_entries_too():
    lines = [HEADER, assistant(1, input=1), compaction(2, input=2), assistant(3, input=3), compaction(4)]
    data = b"".join(orjson.dumps(x) + b"\n" for x in lines)
    for chunk in (None, 50, 7):
        s, ids = scan(data, chunk=chunk)
        assert ids == ["00000001", "c0000002", "00000003", "c0000004"] and not s.notes
    spaced = b'{"type": "compaction", "id": "c9", "timestamp": "t", "summary": "", "usage": {"input": 5}}\n'
    _, ids = scan(orjson.dumps(HEADER) + b"\n" + spaced)
    assert ids == ["c9"]
    s, ids = scan(orjson.dumps(compaction(1)) + b"\n")  # a stream that starts with one
    assert ids == ["c0000001"] and s.header is None


def test_tally_prices_compaction_like_a_turn():
    prices = models_toml.parse(b"[p.m]\ninput = 1\noutput = 2\n")
    t = pricing.Tally(prices)
    t.add(compaction(1, input=1000, output=100))
    t.add(compaction(2))                                   # usage without tokens: known, $0
    t.add({k: v for k, v in compaction(3).items() if k != "usage"})  # no usage: unknown
    t.add(assistant(4, input=1))
    d = pricing.as_dict(t.rollup("total"))
    assert (d["turns"], d["compactions"], d["unpricedTurns"], d["input"]) == (4, 3, 1, 1001)
    assert d["knownPicoUsd"] == 1000 * 1_000_000 + 100 * 2_000_000 + 1_000_000


def test_tally_prices_each_turn_at_its_own_day():
    prices = models_toml.parse(SONNET_TOML.encode())
    t = pricing.Tally(prices)
    for ts in ("2026-09-15T10:00:00.000Z", "2026-10-06T20:30:00-05:00", "2026-12-15T10:00:00.000Z"):
        e = assistant(1, cacheRead=1_000_000, output=1)
        e["timestamp"] = ts
        e["message"]["provider"], e["message"]["model"] = "anthropic", "claude-sonnet-5-5"
        t.add(e, group=ts)
    costs = {g: pricing.as_dict(r)["picoUsd"] for g, r in t.rollup("group").items()}
    assert costs == {"2026-09-15T10:00:00.000Z": 200_000 * 10**6 + 10_000_000,
                     "2026-10-06T20:30:00-05:00": 100_000 * 10**6 + 10_000_000,   # Oct 7 in UTC
                     "2026-12-15T10:00:00.000Z": 100_000 * 10**6 + 8_000_000}


HOSTILE = [
    b'["assistant"]',                                                   # not an object
    b'"assistant"',
    b'{"type":"message","id":"x1","timestamp":"t","message":{"role":"assistant","content":"hi"}}',
    b'{"type":"message","id":"x2","timestamp":"t","message":{"role":"assistant","content":[1]}}',
    b'{"type":"message","id":"x3","message":{"role":"assistant","content":[]}}',  # id, no timestamp
    b'{"type":"message","id":17,"timestamp":"t","message":{"role":"assistant","content":[]}}',
    b'{"type":"message","id":"x5","timestamp":"t","message":{"role":"assistant","content":[],"model":3}}',
    b'{"type":"session","version":2,"id":"x","timestamp":"t","cwd":"assistant"}',  # version 2 header
    b'{"type":"session","version":1,"id":"x","timestamp":"t","cwd":"assistant"}',  # a second header
    b'{"type":"compaction","id":"c1","timestamp":"t","provider":["p"],"usage":{"input":1}}',
    b'{"type":"compaction","timestamp":"t","usage":{"input":1}}',     # a timestamp but no id
    b'{"type":"message","id":"x6","timestamp":"t","message":{"role":"assistant","content":[]}',  # cut
]


@pytest.mark.parametrize("line", HOSTILE)
def test_scan_agrees_with_the_stream_rules_on_hostile_lines(line):
    from pantolib import stream

    good = orjson.dumps(assistant(1)) + b"\n"
    s, ids = scan(orjson.dumps(HEADER) + b"\n" + good + line + b"\n" + good)
    try:
        valid = stream.parse_line(line + b"\n")
        valid = None if valid.kind == stream.HEADER else valid.obj  # a header after the first line is bad
    except SessionError:
        valid = None
    assert ids[0] == ids[-1] == "00000001"  # the lines around it count, whatever it is
    if valid is None:
        assert ids == ["00000001"] * 2 and len(s.notes) == 1 and s.notes[0].startswith("F:3: ")
        assert s.notes[0].endswith("; not counted")
    else:
        assert len(ids) == 2 + scanner.priced(valid) and not s.notes


@pytest.mark.parametrize("line", HOSTILE)
def test_scan_refuses_a_hostile_first_line_as_the_stream_does(line):
    from pantolib import stream

    try:
        kind = stream.classify(orjson.loads(line))
    except (orjson.JSONDecodeError, ValueError):
        kind = None
    data = line + b"\n" + orjson.dumps(assistant(1)) + b"\n"
    if kind is None:
        with pytest.raises(SessionError, match=r"^F:1: not a panto session or stream"):
            scan(data)
    else:
        s, ids = scan(data)
        assert ids[-1] == "00000001" and (s.header is not None) == (kind == stream.HEADER)


def test_the_fast_search_is_the_one_used_here():
    import sys

    if sys.platform.startswith("linux"):  # glibc and musl have memmem; elsewhere bytes.find serves
        assert scanner.memmem() is not None
    good = orjson.dumps(assistant(1)) + b"\n"
    n = scanner.FAST_FROM // len(good) + 2  # enough text for the fast search
    data = orjson.dumps(HEADER) + b"\n" + good * n + orjson.dumps(compaction(2)) + b"\n"
    for chunk in (None, 13, scanner.FAST_FROM + 7):  # marks straddling chunk ends, long lines
        _, ids = scan(data, chunk=chunk)
        assert ids == ["00000001"] * n + ["c0000002"]


# --- token sums price as their turns do, one by one ------------------------------------------

SUMS_TOML = """
[p.tiered]
input = 1.0
output = 2.0
cache_read = 0.1
above_tokens = 3000
input_above = 2.0
output_above = 4.0

[[p.tiered.changes]]
since = 2026-04-25
above_tokens = 1000
cache_write = 1.5
cache_read_above = 0.3

[p.plain]
input = 0.5
output = 1.5
cache_read = 0.05
cache_write = 0.6
cache_write_1h = 1.2
"""


def random_entry(rng, i):
    """A priced entry with usage of any shape and a timestamp of any kind."""
    def n():
        return rng.choice([0, 0, 1, 7, 999, 4000, -5, "12", 2.5, None, True])

    usage = {k: n() for k in ("input", "output", "cacheRead", "cacheWrite", "cacheWrite1h", "reasoning")
             if rng.random() < 0.8}
    ts = rng.choice([
        f"2026-04-{rng.randint(23, 27):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
        f"{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z",
        f"2026-04-25T{rng.randint(0, 23):02d}:30:00+05:45", "2026-04-25T23:59:59.999999Z", "2026-04-25",
        "2026-04-25T24:00:00.000Z", "2026-04-25T10:00:99.000Z", "yesterday", None])
    model = rng.choice(["tiered", "plain", "nowhere", None])
    if rng.random() < 0.2:
        e = {"type": "compaction", "id": f"c{i}", "provider": "p", "model": model, "usage": usage}
    else:
        m = {"role": "assistant", "content": [], "provider": "p", "model": model, "usage": usage}
        if rng.random() < 0.1:
            del m["usage"]
        e = {"type": "message", "id": f"{i:08x}", "message": m}
    if ts is not None:
        e["timestamp"] = ts
    return e


@pytest.mark.parametrize("tz", ["UTC", "Asia/Kathmandu", "America/St_Johns", "Australia/Lord_Howe"])
def test_token_sums_price_exactly_as_their_turns(tz, local_zone):
    import random

    local_zone(tz)
    prices = models_toml.parse(SUMS_TOML.encode())
    rng = random.Random(tz)
    entries = [random_entry(rng, i) for i in range(3000)]
    for by in ("model", "day", "session"):
        tally = pricing.Tally(prices, by=by)
        split = pricing.Tally(prices, by=by)   # the same, summed in pieces (as files are)
        want = {}
        for i, e in enumerate(entries):
            group = str(i % 7)
            tally.add(e, None if by == "model" else group)
            src = e if e["type"] == "compaction" else e["message"]
            usage = usage_of(src)
            price = prices.get("p", src["model"], rates.utc_day(e.get("timestamp")) or rates.today())
            cost = rates.turn_cost(usage, price)
            g = pricing.local_day(e.get("timestamp")) if by == "day" else None if by == "model" else group
            row = want.setdefault((g, "p", src["model"]), [0] * len(pricing.FIELDS))
            row[0] += 1
            if usage is not None:
                for j, k in ((1, "input"), (2, "output"), (3, "cacheRead"), (4, "cacheWrite"), (6, "reasoning")):
                    row[j] += usage[k]
                row[5] += min(usage["cacheWrite1h"], usage["cacheWrite"])
            row[7 if cost is not None else 8] += cost if cost is not None else 1
            row[9] += e["type"] == "compaction"
        for part in range(7):
            t = pricing.Tokens(prices)
            for e in entries[part::7]:
                t.add(e)
            split.merge(None if by == "model" else str(part), t.rows())
        assert tally.rows == want
        assert split.rows == want


def test_a_day_range_keeps_the_turns_of_those_local_days(local_zone):
    local_zone("UTC")
    prices = models_toml.parse(SUMS_TOML.encode())
    t = pricing.Tally(prices, by="day", since="2026-04-25", until="2026-04-25")
    for ts in ("2026-04-24T23:59:59.999Z", "2026-04-25T00:00:00.000Z", "2026-04-25T23:59:59.999Z",
               "2026-04-26T00:00:00.000Z", None, "not a time"):
        e = assistant(1, input=1)
        if ts is None:
            del e["timestamp"]
        else:
            e["timestamp"] = ts
        t.add(e)
    days = {g: r[0] for g, r in t.rollup("group").items()}
    assert days == {"2026-04-25": 2}    # no time, no day: outside any range


def test_the_marks_agree_with_the_full_rule_on_random_lines():
    """A line the scanner skips unparsed (no stream.ASSISTANT_MARK or COMPACTION_MARK)
    is never one the full rule would price; one it parses is judged by that rule."""
    import random

    from pantolib import stream
    from hostile_lines import SCHEMA, TORN
    from hostile_lines import random_line

    rng = random.Random(11)
    lines = [random_line(rng).replace(b'"role":"user"', rng.choice([b'"role":"user"', b'"role":"assistant"']))
             .replace(b'"type":"custom"', rng.choice([b'"type":"compaction"', b'"type":"branchSummary"']))
             for _ in range(6000)]
    lines += [b.rstrip(b"\n") for b in [*TORN.values(), *SCHEMA.values()] if b]
    priced_seen = 0
    for raw in lines:
        try:
            obj = orjson.loads(raw)
            full = type(obj) is dict and obj.get("type") != "session" and scanner.priced(obj)
            bad = False
        except (orjson.JSONDecodeError, ValueError):
            full, bad = False, True
        if type(obj if not bad else None) is dict and obj.get("type") == "session":
            bad = True           # a second header
        data = orjson.dumps(HEADER) + b"\n" + raw + b"\n"
        s = scanner.PricedEntries(io.BytesIO(data), "F")
        ids = list(s)
        plain = scanner.PricedEntries(io.BytesIO(data), "F", fast=False)
        assert list(plain) == ids and plain.notes == s.notes
        marked = (stream.may_be_assistant(raw) or stream.COMPACTION_MARK in raw
                  or stream.BRANCH_SUMMARY_MARK in raw)
        if full:
            priced_seen += 1
            assert marked and len(ids) == 1 and not s.notes, raw
        else:
            assert ids == [], raw
            assert bool(s.notes) == (marked and bad), (raw, s.notes)
    assert priced_seen > 100


def test_the_scanned_sums_agree_with_the_full_rule_on_billed_copies():
    """What panto-cost sums through the byte scanner (marks, then pricing.Tokens)
    equals the full rule applied to every line parsed: a priced entry (scan.priced)
    with `billedIn` (entries.billed_in) is a known zero turn whatever usage it
    holds, any other one counts its usage (entries.usage_of) or is unknown."""
    import random

    from pantolib import pricing
    from pantolib.entries import billed_in, usage_of

    rng = random.Random(12)
    table = models_toml.parse("[p.m]\ninput = 1\noutput = 2\n")
    lines = []
    for i in range(3000):
        t = rng.choice(["message", "message", "compaction", "branchSummary", "custom"])
        e = {"type": t, "id": f"{i:08x}", "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z"}
        usage = rng.choice([None, {"input": rng.randint(0, 9), "output": rng.randint(0, 9)}, "x", {}])
        if t == "message":
            e["message"] = {"role": rng.choice(["assistant", "assistant", "user"]), "content": [],
                            "provider": "p", "model": rng.choice(["m", "unpriced"])}
            if usage is not None:
                e["message"]["usage"] = usage
        else:
            e["provider"], e["model"] = "p", rng.choice(["m", "unpriced"])
            if usage is not None:
                e["usage"] = usage
        if rng.random() < 0.4:
            e["billedIn"] = rng.choice(["0199aaaa-0000-7000-8000-00000000000a", "", None, 5, "x"])
        lines.append(orjson.dumps(e) if rng.random() < 0.8 else json.dumps(e).encode())
    data = orjson.dumps(HEADER) + b"\n" + b"\n".join(lines) + b"\n"

    fast = pricing.Tokens(table)
    for e in scanner.PricedEntries(io.BytesIO(data), "F"):
        fast.add(e)
    tally = pricing.Tally(table)
    tally.merge(None, fast.sums)
    got = pricing.as_dict(tally.rollup("total"))

    turns = billed = unknown = tokens_in = known = 0
    for raw in lines:
        e = orjson.loads(raw)
        if not scanner.priced(e):
            continue
        turns += 1
        if billed_in(e) is not None:
            billed += 1
            continue
        u = usage_of(e if e["type"] != "message" else e["message"])
        src = e if e["type"] != "message" else e["message"]
        if u is None or (src["model"] == "unpriced" and (u["input"] or u["output"])):
            unknown += 1
        if u is not None:
            tokens_in += u["input"]
            if src["model"] == "m":
                known += u["input"] * 1_000_000 + u["output"] * 2_000_000
    assert billed > 300 and unknown > 100
    assert (got["turns"], got["billedElsewhere"], got["unpricedTurns"], got["input"], got["knownPicoUsd"]) == (
        turns, billed, unknown, tokens_in, known)
