"""panto-cost, spawned for real: reports, unknown prices, files, --all, --json, --strict."""
import datetime
import os
import re
import tomllib

import orjson
import pytest
from conftest import SEED_TOML, assert_clean_error, run

from pantolib import paths

SONNET = ("anthropic", "claude-sonnet-4-20250514")
GPT4O = ("openai", "gpt-4o")


def header(sid="0199aaaa-0000-7000-8000-000000000001", cwd="/w", ts="2026-04-25T14:00:00.000Z"):
    return {"type": "session", "version": 1, "id": sid, "timestamp": ts, "cwd": cwd}


class Builder:
    """Session lines in a parent chain; turns on other branches with parent=."""

    def __init__(self, **h):
        self.lines, self.n, self.last = [header(**h)], 0, None

    def _entry(self, message, parent, ts, stamp=None):
        self.n += 1
        e = {"type": "message", "id": f"{self.n:08x}",
             "parentId": self.last if parent is False else parent,
             "timestamp": ts or f"2026-04-25T14:{self.n // 60 % 60:02d}:{self.n % 60:02d}.000Z"}
        if stamp:
            e["provider"], e["model"] = stamp
        e["message"] = message
        self.lines.append(e)
        self.last = e["id"]
        return e["id"]

    def user(self, text="hi", model=SONNET, parent=False, ts=None):
        return self._entry({"role": "user", "content": [{"type": "text", "text": text}]}, parent, ts, model)

    def assistant(self, model=SONNET, parent=False, ts=None, text="ok", **usage):
        m = {"role": "assistant", "content": [{"type": "text", "text": text}],
             "provider": model[0], "model": model[1], "stopReason": "stop"}
        if usage.pop("no_usage", False) is False:
            m["usage"] = {"input": 0, "output": 0, **usage}
        return self._entry(m, parent, ts)

    def bytes(self):
        return b"".join(orjson.dumps(x) + b"\n" for x in self.lines)

    def write(self, path):
        os.makedirs(os.path.dirname(str(path)) or ".", exist_ok=True)
        with open(path, "wb") as f:
            f.write(self.bytes())
        return str(path)


@pytest.fixture
def prices(isolated):
    """Write the seed's example models.toml where panto-cost looks by default."""
    def write(text=SEED_TOML):
        d = os.path.join(os.environ["XDG_CONFIG_HOME"], "panto")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "models.toml"), "w") as f:
            f.write(text)
    write()
    return write


def cost_json(*args, input=b""):
    p = run(["panto-cost", "--json", *args], input=input)
    assert p.returncode == 0, p.stderr
    return orjson.loads(p.stdout), p


def by_model(doc):
    return {(m["provider"], m["model"]): m for m in doc["models"]}


# --- the seed's figures, end to end ----------------------------------------------

def test_seed_prices_give_the_seed_totals_times_10_4(prices):
    b = Builder()
    b.user()
    b.assistant(input=1000, output=200, cacheRead=5000, cacheWrite=500)   # 937_500 micro-cents
    b.user(model=GPT4O)
    b.assistant(model=GPT4O, input=1000, output=200, reasoning=60)         # 450_000
    b.user(model=("anthropic", "claude-sonnet-4-20250514"))
    b.assistant(input=1000, output=200)                                    # 600_000
    doc, _ = cost_json(input=b.bytes())
    assert doc["total"]["picoUsd"] == (937_500 + 450_000 + 600_000) * 10**4
    assert doc["total"]["knownPicoUsd"] == doc["total"]["picoUsd"] and doc["total"]["unpricedTurns"] == 0
    m = by_model(doc)
    assert m[SONNET]["picoUsd"] == (937_500 + 600_000) * 10**4
    assert m[GPT4O]["picoUsd"] == 450_000 * 10**4
    assert m[GPT4O]["reasoning"] == 60 and m[GPT4O]["output"] == 200  # reasoning never added



def test_a_compaction_its_source_recorded_no_usage_for_is_not_a_turn(prices):
    # SPEC §12: an imported compaction (usageNotRecorded, no usage) is left
    # out of the turns; panto's own compaction without usage is a turn of
    # unknown cost, and so is a marked one that carries usage after all
    def summary(eid, **extra):
        return {"type": "compaction", "id": eid, "parentId": b.last, "timestamp": "2026-04-25T15:00:00.000Z",
                "summary": "before", "firstKeptId": None, "provider": SONNET[0], "model": SONNET[1], **extra}

    b = Builder()
    b.user()
    b.assistant(input=1000, output=200)
    b.lines.append(summary("c0000001", usageNotRecorded=True))
    b.lines.append({**summary("c0000002", usageNotRecorded=True), "type": "branchSummary", "fromId": None})
    doc, _ = cost_json(input=b.bytes())
    assert doc["total"]["unpricedTurns"] == 0 and by_model(doc)[SONNET]["turns"] == 1
    assert doc["total"]["picoUsd"] == 600_000 * 10**4
    b.lines.append(summary("c0000003"))
    b.lines.append(summary("c0000004", usageNotRecorded=True, usage={"input": 1000, "output": 0}))
    doc, _ = cost_json(input=b.bytes())
    assert by_model(doc)[SONNET]["turns"] == 3 and doc["total"]["unpricedTurns"] == 1
    assert doc["total"]["knownPicoUsd"] == (600_000 + 300_000) * 10**4 and doc["total"]["picoUsd"] is None

def test_json_shape(prices):
    b = Builder()
    b.assistant(input=1, output=2, cacheRead=3, cacheWrite=4, reasoning=1)
    doc, _ = cost_json(input=b.bytes())
    assert set(doc) >= {"total", "models"}
    assert set(doc["total"]) >= {"picoUsd", "knownPicoUsd", "unpricedTurns"}
    (m,) = doc["models"]
    assert list(m)[:9] == ["provider", "model", "turns", "input", "output", "cacheRead",
                           "cacheWrite", "reasoning", "picoUsd"]
    assert (m["turns"], m["input"], m["output"], m["cacheRead"], m["cacheWrite"], m["reasoning"]) == (
        1, 1, 2, 3, 4, 1)
    assert m["picoUsd"] == 1 * 3_000_000 + 2 * 15_000_000 + 3 * 300_000 + 4 * 3_750_000


def test_human_report(prices):
    b = Builder()
    b.assistant(input=1000, output=200, cacheRead=5000, cacheWrite=500)
    b.assistant(model=GPT4O, input=1234567, output=10)
    p = run(["panto-cost"], input=b.bytes())
    assert p.returncode == 0 and p.stderr == b""
    lines = p.stdout.decode().splitlines()
    assert lines[0].split() == ["PROVIDER", "MODEL", "TURNS", "INPUT", "OUTPUT", "CACHE-READ",
                                "CACHE-WRITE", "REASONING", "COST"]
    assert lines[1].split() == ["anthropic", "claude-sonnet-4-20250514", "1", "1,000", "200",
                                "5,000", "500", "0", "$0.0094"]
    assert lines[2].split()[:4] == ["openai", "gpt-4o", "1", "1,234,567"]
    assert lines[3].split()[0] == "TOTAL" and lines[3].endswith("$3.0959")


# --- unknown prices ------------------------------------------------------------

def test_unknown_price_with_and_without_tokens(prices):
    b = Builder()
    b.assistant(model=GPT4O, input=1000, output=200)                   # known: no cache writes
    b.assistant(model=GPT4O, input=1000, output=200, cacheWrite=5)     # cache_write unknown
    b.assistant(model=("openai", "gpt-4o-mini"), input=10, cacheRead=0)
    doc, _ = cost_json(input=b.bytes())
    m = by_model(doc)
    assert m[GPT4O]["picoUsd"] is None and m[GPT4O]["knownPicoUsd"] == 450_000 * 10**4
    assert m[GPT4O]["unpricedTurns"] == 1 and m[GPT4O]["turns"] == 2
    assert m[("openai", "gpt-4o-mini")]["picoUsd"] == 10 * 150_000
    assert doc["total"] == {**doc["total"], "picoUsd": None, "unpricedTurns": 1,
                            "knownPicoUsd": 450_000 * 10**4 + 10 * 150_000}


def test_unknowns_are_never_shown_as_zero_dollars(prices):
    b = Builder()
    b.assistant(model=("openai", "nobody-prices-me"), input=5, output=5)
    b.assistant(model=GPT4O, no_usage=True)
    p = run(["panto-cost"], input=b.bytes())
    out = p.stdout.decode()
    assert p.returncode == 0 and "$0" not in out, out
    assert "unknown (2 turns unpriced)" in out.splitlines()[-1]
    b.assistant(input=1000, output=200)
    out = run(["panto-cost"], input=b.bytes()).stdout.decode()
    assert out.splitlines()[-1].endswith("≥ $0.0060 (2 turns unpriced)"), out


def test_missing_usage_is_unknown_even_when_free(prices):
    prices("[local.llama]\ninput = 0\noutput = 0\ncache_read = 0\ncache_write = 0\n")
    b = Builder()
    b.assistant(model=("local", "llama"), input=100, output=100)
    b.assistant(model=("local", "llama"), no_usage=True)
    doc, _ = cost_json(input=b.bytes())
    assert doc["total"]["unpricedTurns"] == 1 and doc["total"]["picoUsd"] is None
    assert doc["total"]["knownPicoUsd"] == 0 and doc["total"]["turns"] == 2


def test_no_price_table_every_turn_unpriced_with_a_hint(isolated):
    b = Builder()
    b.assistant(input=1, output=1)
    p = run(["panto-cost"], input=b.bytes())
    assert p.returncode == 0 and "unknown (1 turn unpriced)" in p.stdout.decode()
    assert b"no price table at" in p.stderr and b"--example-prices" in p.stderr


def test_strict(prices):
    b = Builder()
    b.assistant(input=1, output=1)
    assert run(["panto-cost", "--strict"], input=b.bytes()).returncode == 0
    b.assistant(model=("openai", "mystery"), input=1)
    p = run(["panto-cost", "--strict"], input=b.bytes())
    assert_clean_error(p, 1, "panto-cost")
    assert b"1 turn unpriced: openai/mystery" in p.stderr
    assert b"TOTAL" in p.stdout  # the report is still printed


# --- exactness ------------------------------------------------------------------

def test_tiny_prices_are_exact(prices):
    prices("[openai.gpt-5-nano]\ninput = 0.05\noutput = 0.4\ncache_read = 0.005\ncache_write = 0\n")
    b = Builder()
    b.assistant(model=("openai", "gpt-5-nano"), cacheRead=1)
    doc, _ = cost_json(input=b.bytes())
    assert doc["total"]["picoUsd"] == 5_000
    assert "$0.000000005" in run(["panto-cost"], input=b.bytes()).stdout.decode()


def test_exact_totals_over_100000_turns(prices, tmp_path):
    prices("[openai.gpt-5-nano]\ninput = 0.05\noutput = 0.4\ncache_read = 0.005\ncache_write = 0\n")
    turn = orjson.dumps({"type": "message", "id": "x", "parentId": None, "timestamp": "t", "message": {
        "role": "assistant", "content": [], "provider": "openai", "model": "gpt-5-nano",
        "usage": {"input": 3, "output": 7, "cacheRead": 11}}}) + b"\n"
    path = tmp_path / "big.jsonl"
    path.write_bytes(orjson.dumps(header()) + b"\n" + turn * 100_000)
    doc, _ = cost_json(str(path))
    each = 3 * 50_000 + 7 * 400_000 + 11 * 5_000
    assert doc["total"]["picoUsd"] == 100_000 * each == 300_500_000_000
    assert doc["total"]["turns"] == 100_000 and doc["total"]["cacheRead"] == 1_100_000
    assert run(["panto-cost", str(path)]).stdout.decode().splitlines()[-1].endswith(" $0.3005")


# --- what counts -----------------------------------------------------------------

def test_every_branch_counts(prices):
    b = Builder()
    root = b.user()
    b.assistant(input=1000, output=0)
    b.assistant(parent=root, input=1000, output=0)  # a retried, abandoned branch: paid too
    b.lines.append({"type": "custom", "id": "c1", "timestamp": "t", "note": "assistant"})
    b.lines.append({"type": "message", "message": {"role": "assistant", "content": [],
                                                   "provider": "anthropic", "model": SONNET[1],
                                                   "usage": {"input": 1000, "output": 0}}})  # bare
    doc, _ = cost_json(input=b.bytes())
    assert doc["total"]["turns"] == 3 and doc["total"]["picoUsd"] == 3 * 1000 * 3_000_000


def test_user_text_mentioning_assistant_does_not_count(prices):
    b = Builder()
    b.user(text='{"role":"assistant","usage":{"input":99}} "assistant"')
    b.assistant(input=1)
    doc, _ = cost_json(input=b.bytes())
    assert doc["total"]["turns"] == 1 and doc["total"]["input"] == 1


def test_other_key_spacing_counts(prices):
    line = (b'{"type": "message", "id": "a", "parentId": null, "timestamp": "t", "message": '
            b'{"role":  "assistant", "content": [], "provider": "anthropic", '
            b'"model": "claude-sonnet-4-20250514", "usage": {"input": 10, "output": 1}}}\n')
    doc, _ = cost_json(input=orjson.dumps(header()) + b"\n" + line)
    assert doc["total"]["turns"] == 1 and doc["total"]["picoUsd"] == 10 * 3_000_000 + 15_000_000


def test_several_files_and_stdin(prices, tmp_path):
    a, b = Builder(sid="s-a"), Builder(sid="s-b")
    a.assistant(input=1000)
    b.assistant(model=GPT4O, input=1000)
    fa, fb = a.write(tmp_path / "a.jsonl"), b.write(tmp_path / "b.jsonl")
    c = Builder(sid="s-c")
    c.assistant(input=1)
    doc, _ = cost_json("--by", "session", fa, "-", fb, input=c.bytes())
    assert {s["session"]: s["picoUsd"] for s in doc["sessions"]} == {
        "s-a": 3_000_000_000, "s-b": 2_500_000_000, "s-c": 3_000_000}
    assert doc["total"]["picoUsd"] == 3_000_000_000 + 2_500_000_000 + 3_000_000


def test_by_day_and_by_model(prices):
    b = Builder()
    b.assistant(input=1, ts="2026-04-25T10:00:00.000Z")
    b.assistant(input=2, ts="2026-04-25T23:59:59.999Z")
    b.assistant(model=GPT4O, input=4, ts="2026-04-26T00:00:00.000Z")
    p = run(["panto-cost", "--json", "--by", "day"], input=b.bytes(), env={**os.environ, "TZ": "UTC"})
    days = {d["day"]: d["input"] for d in orjson.loads(p.stdout)["days"]}
    assert days == {"2026-04-25": 3, "2026-04-26": 4}
    p = run(["panto-cost", "--by=day"], input=b.bytes(), env={**os.environ, "TZ": "UTC"})
    rows = p.stdout.decode().splitlines()
    assert rows[0].split()[0] == "DAY" and rows[1].split()[:2] == ["2026-04-25", "2"]
    doc, _ = cost_json("--by", "model", input=b.bytes())
    assert "days" not in doc and "sessions" not in doc and len(doc["models"]) == 2


def test_all_sessions_with_a_torn_and_a_foreign_file(prices, tmp_path):
    made = []
    for i, cwd in enumerate(["/home/me/a", "/home/me/b", "/home/me/b"]):
        b = Builder(sid=f"0199aaaa-0000-7000-8000-00000000000{i}", cwd=cwd)
        b.user()
        b.assistant(input=1000, output=100)
        made.append(b.write(os.path.join(paths.session_dir(cwd), b.lines[0]["id"] + ".jsonl")))
    torn = made[2]
    with open(torn, "ab") as f:
        f.write(orjson.dumps(Builder().lines[0] | {"type": "message"})[:-20])  # a torn write
    before = (open(torn, "rb").read(), os.stat(torn).st_mtime_ns, os.stat(torn).st_size)
    foreign = os.path.join(paths.session_dir("/home/me/a"), "notes.jsonl")
    with open(foreign, "w") as f:
        f.write("just some notes\n")
    doc, p = cost_json("--all", "--by", "session")
    assert doc["total"]["turns"] == 3 and doc["total"]["picoUsd"] == 3 * (3_000_000_000 + 1_500_000_000)
    assert len(doc["sessions"]) == 3
    err = p.stderr.decode()
    assert f"{torn}:4: the last line has no line feed" in err
    assert f"skipped {foreign}:1: not a panto session" in err
    assert (open(torn, "rb").read(), os.stat(torn).st_mtime_ns, os.stat(torn).st_size) == before


def test_all_with_no_sessions(isolated):
    doc, _ = cost_json("--all")
    assert doc["total"]["turns"] == 0 and doc["total"]["picoUsd"] == 0 and doc["models"] == []


def test_explicit_file_that_is_not_a_session(isolated, tmp_path):
    f = tmp_path / "README.md"
    f.write_text("# hello\n")
    assert_clean_error(run(["panto-cost", str(f)]), 1, "panto-cost")
    assert f"{f}:1: not a panto session or stream" in run(["panto-cost", str(f)]).stderr.decode()
    assert_clean_error(run(["panto-cost", str(tmp_path / "missing.jsonl")]), 1, "panto-cost")
    assert_clean_error(run(["panto-cost", str(tmp_path)]), 1, "panto-cost")


def test_a_stream_without_header_and_empty_input(prices):
    b = Builder()
    b.assistant(input=1)
    doc, _ = cost_json(input=b.bytes().split(b"\n", 1)[1])
    assert doc["total"]["turns"] == 1
    doc, _ = cost_json(input=b"")
    assert doc["total"] == {**doc["total"], "turns": 0, "picoUsd": 0, "unpricedTurns": 0}


# --- models.toml from the command line ------------------------------------------

def test_malformed_toml_names_file_line_column(isolated, tmp_path):
    bad = tmp_path / "m.toml"
    bad.write_text("[openai.gpt-4o]\ninput = 2.5\noutput = = 3\n")
    p = run(["panto-cost", "--prices", str(bad)], input=b"")
    assert_clean_error(p, 1, "panto-cost")
    assert re.fullmatch(rf"panto-cost: {re.escape(str(bad))}:3:10: invalid value\n", p.stderr.decode())


def test_default_toml_errors_and_non_numbers(prices):
    prices('[openai.gpt-4o]\ninput = "2.5"\n')
    p = run(["panto-cost"], input=b"")
    assert_clean_error(p, 1, "panto-cost")
    assert b"[openai.gpt-4o] 'input' is not a number (a string)" in p.stderr
    assert b"models.toml" in p.stderr


def test_prices_option_overrides_and_must_exist(prices, tmp_path):
    other = tmp_path / "other.toml"
    other.write_text("[anthropic.\"claude-sonnet-4-20250514\"]\ninput = 1\n")
    b = Builder()
    b.assistant(input=1000)
    doc, _ = cost_json("--prices", str(other), input=b.bytes())
    assert doc["total"]["picoUsd"] == 1000 * 1_000_000
    assert_clean_error(run(["panto-cost", "--prices", str(tmp_path / "nope.toml")]), 1, "panto-cost")


def example_prices(tmp_path):
    p = run(["panto-cost", "--example-prices"])
    assert p.returncode == 0 and p.stderr == b""
    f = tmp_path / "models.toml"
    f.write_bytes(p.stdout)
    return p.stdout.decode(), str(f)


def test_example_prices_parse_with_panto_and_say_when_and_where(isolated, tmp_path):
    from pantolib import models_toml

    text, _ = example_prices(tmp_path)
    table = models_toml.parse(text.encode(), "example")
    assert table.notes == [] and "CHECK" in text
    doc = tomllib.loads(text)
    assert set(doc) == {"anthropic", "openai"}
    official = {"anthropic": "https://platform.claude.com/", "openai": "https://developers.openai.com/"}
    for provider, models in doc.items():
        assert models["source"].startswith(official[provider])  # each provider's own pricing page
        entries = {m: t for m, t in models.items() if isinstance(t, dict)}
        assert len(entries) >= 3, provider  # flagship, everyday, small at least
        for model, t in entries.items():
            assert isinstance(t["checked"], datetime.date) and t["checked"].year == 2026, model
            assert t["context"] >= 100_000 and {"input", "output", "cache_read", "cache_write"} <= set(t)
            for change in t.get("changes", []):
                assert isinstance(change["since"], datetime.date) and change["since"].year == 2026
            if provider == "anthropic":
                assert "cache_write_1h" in t, model
    sonnet = table.periods("anthropic", "claude-sonnet-5-5")
    assert [d for d, _ in sonnet] == ["", "2026-10-07"] and sonnet[1][1].cache_read < sonnet[0][1].cache_read


def test_example_prices_name_current_models_of_the_sdks(isolated, tmp_path):
    anthropic_model = pytest.importorskip("anthropic.types.model_param")
    openai_model = pytest.importorskip("openai.types.shared.chat_model")
    from anthropic._data import DEPRECATED_MODELS
    from typing import get_args

    text, _ = example_prices(tmp_path)
    doc = tomllib.loads(text)
    known = {a for arg in get_args(anthropic_model.ModelParam) for a in get_args(arg)}
    for model in (m for m, t in doc["anthropic"].items() if isinstance(t, dict)):
        assert model in known and model not in DEPRECATED_MODELS, model
    known = set(get_args(openai_model.ChatModel))
    # the SDK marks no OpenAI model deprecated: these are the deprecations page's, as of 2026-12-01
    deprecated = {"gpt-5", "gpt-5-mini", "gpt-5-nano", "o3", "gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini"}
    for model in (m for m, t in doc["openai"].items() if isinstance(t, dict)):
        assert model in known and model not in deprecated, model


def test_example_prices_price_every_model_they_name(isolated, tmp_path):
    text, f = example_prices(tmp_path)
    doc = tomllib.loads(text)
    b = Builder()
    for provider, models in doc.items():
        for model, t in models.items():
            if isinstance(t, dict):
                b.assistant(model=(provider, model), input=1000, output=100, cacheRead=5000, cacheWrite=100,
                            ts="2026-11-30T12:00:00.000Z")
    doc2, q = cost_json("--prices", f, "--strict", input=b.bytes())
    assert q.stderr == b"" and doc2["total"]["unpricedTurns"] == 0 and doc2["total"]["turns"] >= 6
    sol = by_model(doc2)[("openai", "gpt-6.2-sol")]
    assert sol["picoUsd"] == 1000 * 2_000_000 + 100 * 10_000_000 + 5000 * 100_000 + 100 * 2_500_000


def test_example_prices_september_and_december_sonnet_turns(isolated, tmp_path):
    _, f = example_prices(tmp_path)
    b = Builder()
    b.assistant(model=("anthropic", "claude-sonnet-5-5"), cacheRead=1_000_000, ts="2026-09-30T12:00:00.000Z")
    b.assistant(model=("anthropic", "claude-sonnet-5-5"), cacheRead=1_000_000, ts="2026-12-01T12:00:00.000Z")
    p = run(["panto-cost", "--prices", f, "--json", "--by", "day"], input=b.bytes(), env={**os.environ, "TZ": "UTC"})
    days = {d["day"]: d["picoUsd"] for d in orjson.loads(p.stdout)["days"]}
    assert days == {"2026-09-30": 1_000_000 * 200_000, "2026-12-01": 1_000_000 * 100_000}


# --- prices that change -----------------------------------------------------------

DATED = """\
[anthropic."claude-sonnet-5-5"]
input = 2.0
cache_read = 0.2

[[anthropic."claude-sonnet-5-5".changes]]
since = 2026-10-07
cache_read = 0.1

[[anthropic."claude-sonnet-5-5".changes]]
since = 2026-12-01
input = 1.5
"""
S55 = ("anthropic", "claude-sonnet-5-5")


def dated_session():
    b = Builder()
    b.user(model=S55, ts="2026-09-14T09:00:00.000Z")
    b.assistant(model=S55, input=1000, cacheRead=10_000, ts="2026-09-14T09:00:05.000Z")
    b.user(model=S55, ts="2026-12-03T09:00:00.000Z")
    b.assistant(model=S55, input=1000, cacheRead=10_000, ts="2026-12-03T09:00:05.000Z")
    return b


def test_september_and_december_turns_are_priced_at_their_own_rates(prices, tmp_path):
    prices(DATED)
    f = dated_session().write(tmp_path / "s.jsonl")
    doc, p = cost_json(f)
    september = 1000 * 2_000_000 + 10_000 * 200_000
    december = 1000 * 1_500_000 + 10_000 * 100_000
    assert p.stderr == b"" and doc["total"]["picoUsd"] == september + december
    q = run(["panto-cost", "--json", "--by", "day", f], env={**os.environ, "TZ": "UTC"})
    assert {d["day"]: d["picoUsd"] for d in orjson.loads(q.stdout)["days"]} == {
        "2026-09-14": september, "2026-12-03": december}


def test_the_order_of_changes_in_the_file_does_not_matter(prices, tmp_path):
    f = dated_session().write(tmp_path / "s.jsonl")
    prices(DATED)
    forward = run(["panto-cost", "--json", f]).stdout
    head, first, second = DATED.split("\n\n")
    prices("\n\n".join([second, head, first]))
    assert run(["panto-cost", "--json", f]).stdout == forward
    prices("\n\n".join([head, second, first]))
    assert run(["panto-cost", "--json", f]).stdout == forward


def test_a_change_takes_effect_at_utc_midnight(prices):
    prices(DATED)
    b = Builder()
    b.assistant(model=S55, cacheRead=1_000_000, ts="2026-10-06T23:59:59.999Z")
    b.assistant(model=S55, cacheRead=1_000_000, ts="2026-10-06T20:00:00.000-05:00")  # 01:00 UTC on the 7th
    b.assistant(model=S55, cacheRead=1_000_000, ts="2026-10-07T00:00:00.000Z")
    doc, _ = cost_json(input=b.bytes())
    assert doc["total"]["picoUsd"] == 1_000_000 * (200_000 + 100_000 + 100_000)


def test_an_unstamped_bare_turn_is_priced_at_todays_rates(prices):
    from pantolib import models_toml

    prices(DATED)
    bare = {"type": "message", "message": {"role": "assistant", "content": [], "provider": S55[0],
                                           "model": S55[1], "usage": {"input": 1, "cacheRead": 1000}}}
    doc, _ = cost_json(input=orjson.dumps(bare) + b"\n")
    today = models_toml.parse(DATED.encode()).get(*S55)
    assert doc["total"]["picoUsd"] == 1 * today.input + 1000 * today.cache_read


def test_malformed_changes_are_one_clear_error(isolated, tmp_path):
    bad = tmp_path / "m.toml"
    bad.write_text(DATED.replace("since = 2026-12-01", 'since = "2026-12-01"'))
    p = run(["panto-cost", "--prices", str(bad)], input=b"")
    assert_clean_error(p, 1, "panto-cost")
    assert p.stderr.decode() == (f"panto-cost: {bad}:10:9: [[anthropic.claude-sonnet-5-5.changes]] 'since' "
                                 f"must be a TOML date such as 2026-10-07, not a string (2026-12-01)\n")


# --- compaction entries ---------------------------------------------------------------

def compaction_entry(b, usage=None, model=SONNET, spaced=False):
    b.n += 1
    e = {"type": "compaction", "id": f"{b.n:08x}", "parentId": b.last, "timestamp": "2026-04-25T15:00:00.000Z",
         "summary": "The user asked what the assistant could do.", "firstKeptId": None,
         "provider": model[0], "model": model[1]}
    if usage is not None:
        e["usage"] = usage
    b.lines.append(e)
    b.last = e["id"]


def test_compaction_entries_are_priced_like_turns(prices, tmp_path):
    b = Builder()
    b.user()
    b.assistant(input=1000, output=100)
    compaction_entry(b, {"input": 20_000, "output": 500, "cacheRead": 1000})
    b.user()
    b.assistant(input=10, output=10)
    f = b.write(tmp_path / "s.jsonl")
    doc, _ = cost_json(f)
    m = by_model(doc)[SONNET]
    assert (m["turns"], m["compactions"], m["input"], m["output"], m["cacheRead"]) == (3, 1, 21_010, 610, 1000)
    assert m["picoUsd"] == 21_010 * 3_000_000 + 610 * 15_000_000 + 1000 * 300_000
    table = run(["panto-cost", f]).stdout.decode().splitlines()
    assert table[1].split()[:4] == ["anthropic", SONNET[1], "3", "21,010"]


def test_a_compaction_without_usage_is_unpriced_and_its_own_model_counts(prices):
    b = Builder()
    b.assistant(input=1)
    compaction_entry(b)                                              # no usage: unknown
    compaction_entry(b, {"input": 100, "output": 10}, model=GPT4O)   # summarised by another model
    line = (b'{"type": "compaction", "id": "c1", "parentId": null, "timestamp": "t", "summary": "",'
            b' "provider": "openai", "model": "gpt-4o", "usage": {"input": 1}}\n')
    doc, _ = cost_json(input=b.bytes() + line)
    m = by_model(doc)
    assert (m[SONNET]["turns"], m[SONNET]["unpricedTurns"], m[SONNET]["compactions"]) == (2, 1, 1)
    assert (m[GPT4O]["turns"], m[GPT4O]["input"], m[GPT4O]["picoUsd"]) == (2, 101, 101 * 2_500_000 + 10 * 10_000_000)


# --- counted once, shown safely ----------------------------------------------------------

def test_all_with_a_file_of_the_sessions_folder_counts_it_once(prices, tmp_path):
    b = Builder(cwd="/home/me/a")
    b.assistant(input=1000)
    path = b.write(os.path.join(paths.session_dir("/home/me/a"), b.lines[0]["id"] + ".jsonl"))
    link = tmp_path / "link.jsonl"
    link.symlink_to(path)
    hard = tmp_path / "hard.jsonl"
    os.link(path, hard)
    for args in (["--all", path], ["--all", str(link)], ["--all", str(hard)], [path, path], [path, str(link)]):
        doc, p = cost_json(*args)
        assert doc["total"]["turns"] == 1 and doc["total"]["picoUsd"] == 1000 * 3_000_000, args
        assert p.stderr == b"", args
    other = Builder(sid="0199aaaa-0000-7000-8000-00000000000f")
    other.assistant(input=1)
    doc, _ = cost_json("--all", other.write(tmp_path / "other.jsonl"))
    assert doc["total"]["turns"] == 2


HOSTILE_NAME = "evil\x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07\r\x9b31m\u202eok\nnext"


def test_escape_sequences_in_names_are_shown_not_executed(prices):
    b = Builder(sid="sess\x1b]0;title\x07")
    b.assistant(model=("open\x1bai", HOSTILE_NAME), input=1)
    for args in ([], ["--by", "session"], ["--strict"]):
        p = run(["panto-cost", *args], input=b.bytes())
        out = p.stdout + p.stderr
        assert not any(c in out for c in (b"\x1b", b"\x07", b"\r", b"\xc2\x9b", "\u202e".encode())), (args, out)
        assert len(p.stdout.splitlines()) == 3, (args, p.stdout)  # header, row, total: no stray newline
    table = run(["panto-cost"], input=b.bytes()).stdout.decode()
    assert "evil^[[2J^[]52;c;cm0gLXJmIH4=^G^M\\x9b31m<U+202E>ok next" in table
    assert "open^[ai" in table
    assert "sess^[]0;title^G" in run(["panto-cost", "--by", "session"], input=b.bytes()).stdout.decode()
    strict = run(["panto-cost", "--strict"], input=b.bytes()).stderr.decode()
    assert "open^[ai/evil^[[2J" in strict
    doc, _ = cost_json(input=b.bytes())  # JSON keeps the names as they are
    assert doc["models"][0]["model"] == HOSTILE_NAME


# --- hostile lines: the stream's verdict -------------------------------------------------

def test_bad_marked_lines_are_named_and_the_rest_still_counts(prices, tmp_path):
    b = Builder()
    b.assistant(input=1)
    good = b.bytes()
    bad = [b'["assistant"]', b'{"type":"message","id":"x","timestamp":"t","message":{"role":"assistant"}}',
           b'{"type":"session","version":1,"id":"y","timestamp":"t","cwd":"assistant"}',
           b'{"type":"message","id":"z","message":{"role":"assistant","content":[]', b"\x1b[2J\"assistant\""]
    f = tmp_path / "s.jsonl"
    f.write_bytes(good + b"\n".join(bad) + b"\n" + good.split(b"\n", 1)[1])
    doc, p = cost_json(str(f))
    assert doc["total"]["turns"] == 2
    notes = p.stderr.decode().splitlines()
    assert [n.split(": ")[1].split(":")[1] for n in notes] == ["3", "4", "5", "6", "7"], notes
    assert all(n.startswith(f"panto-cost: {f}:") and n.endswith("; not counted") for n in notes)
    assert "a session header after the first line" in notes[2] and "\x1b" not in p.stderr.decode()


def test_a_newer_format_is_refused_as_replay_refuses_it(prices, tmp_path):
    b = Builder(cwd="/home/me/a")
    b.assistant(input=1)
    b.lines[0]["version"] = 2
    f = b.write(os.path.join(paths.session_dir("/home/me/a"), b.lines[0]["id"] + ".jsonl"))
    p = run(["panto-cost", f])
    assert_clean_error(p, 1, "panto-cost")
    assert b"version 2 is newer" in p.stderr
    doc, q = cost_json("--all")
    assert doc["total"]["turns"] == 0 and b"skipped" in q.stderr and b"version 2 is newer" in q.stderr


# --- the command's manners ----------------------------------------------------------

def test_usage_errors_and_help(isolated):
    assert run(["panto-cost", "--by", "week"]).returncode == 2
    assert run(["panto-cost", "--bogus"]).returncode == 2
    h = run(["panto-cost", "--help"])
    assert h.returncode == 0 and b"Usage:" in h.stdout
    v = run(["panto-cost", "--version"])
    assert v.returncode == 0 and re.match(rb"\d+\.\d+", v.stdout)


def test_closed_pipe_is_quiet(prices):
    import subprocess

    b = Builder()
    for i in range(2000):
        b.assistant(model=("p", f"model-{i}"), input=1)
    proc = subprocess.run("panto-cost | head -c 10 >/dev/null", shell=True, input=b.bytes(),
                          capture_output=True)
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr


def test_man_page_synopsis_matches_usage():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    from pantolib.cmd import cost

    usage = [line.strip() for line in cost.__doc__.split("Usage:")[1].split("\n\n")[0].splitlines()
             if line.strip()]
    with open(os.path.join(root, "man", "panto-cost.1")) as f:
        man = f.read()
    synopsis = man.split(".SH SYNOPSIS")[1].split(".SH")[0]
    text = re.sub(r"\\f[BIRP]", "", synopsis).replace("\\-", "-")
    flat = " ".join(line for line in text.splitlines() if not line.startswith("."))
    for u in usage:
        assert " ".join(u.split()) in " ".join(flat.split()), (u, flat)


# --- the caches: a report read through them is the report read afresh ------------------------

TIERED_TOML = SEED_TOML + """
[[anthropic."claude-sonnet-4-20250514".changes]]
since = 2026-04-25
cache_read = 0.1
above_tokens = 5000
input_above = 6.0
output_above = 22.5
cache_read_above = 0.6
cache_write_above = 7.5
"""


def cache_dir():
    return os.path.join(os.environ["XDG_CACHE_HOME"], "panto")


def tree_session(i, turns, day="2026-04-2"):
    """A session of the sessions folder with turns of two models over two days (UTC and local)."""
    sid = f"0199aaaa-0000-7000-8000-{i:012d}"
    b = Builder(sid=sid, cwd=f"/w/{i % 2}", ts=f"{day}3T23:00:00.000Z")
    for n in range(turns):
        ts = f"{day}{4 + n % 2}T{(n * 7) % 24:02d}:{n % 60:02d}:{(n * 13) % 60:02d}.{n % 1000:03d}Z"
        model = SONNET if n % 3 else GPT4O
        b.user(f"question {n}", model=model, ts=ts)
        if n % 5 == 4:
            b.assistant(model=model, ts=ts, no_usage=True)
        else:
            b.assistant(model=model, ts=ts, input=100 * n + 1, output=10 * n, cacheRead=1000 * (n % 4),
                        cacheWrite=50 * (n % 3), cacheWrite1h=20 * (n % 2))
    path = os.path.join(paths.sessions_root(), paths.encode_cwd(f"/w/{i % 2}"), sid + ".jsonl")
    return b.write(path)


REPORTS = [["--by", by] for by in ("model", "session", "day")] + [
    ["--by", "day", "--since", "2026-04-25"], ["--by", "session", "--until", "2026-04-24"],
    ["--by", "model", "--since", "2026-04-25", "--until", "2026-04-25"]]


def assert_cache_agrees(extra=()):
    """Every report, cached (twice: read on, then remembered) and afresh, with its notes."""
    for report in REPORTS:
        argv = ["panto-cost", "--all", "--json", *report, *extra]
        fresh = run([*argv, "--no-cache"])
        assert fresh.returncode == 0 and b"Traceback" not in fresh.stderr, fresh.stderr
        for _ in range(2):
            cached = run(argv)
            assert cached.returncode == 0, cached.stderr
            assert orjson.loads(cached.stdout) == orjson.loads(fresh.stdout), report
            assert sorted(cached.stderr.splitlines()) == sorted(fresh.stderr.splitlines()), report
    listed = run(["panto-ls", "--all", "--json"])
    again = run(["panto-ls", "--all", "--json"])
    afresh = run(["panto-ls", "--all", "--json"],
                 env=dict(os.environ, XDG_CACHE_HOME=os.path.join(os.environ["HOME"], f"fresh-{os.urandom(4).hex()}")))
    assert listed.stdout == again.stdout == afresh.stdout and afresh.returncode == 0, afresh.stderr
    return orjson.loads(run(["panto-cost", "--all", "--json", "--by", "session", *extra]).stdout)


def test_cached_and_uncached_reports_agree_as_files_change(prices, tmp_path, monkeypatch):
    prices(TIERED_TOML)
    from hostile_lines import SCHEMA, TORN

    files = [tree_session(i, turns=3 + 2 * i) for i in range(5)]
    first = assert_cache_agrees()
    turns = first["total"]["turns"]

    # appended to: one more turn, read on from where the last report stopped
    b = Builder()
    b.n = 1000
    b.assistant(ts="2026-04-25T10:00:00.000Z", input=7, output=7)
    with open(files[0], "ab") as f:
        f.write(orjson.dumps(b.lines[-1]) + b"\n")
    assert assert_cache_agrees()["total"]["turns"] == turns + 1

    # a torn tail (not counted, named), then completed
    line = orjson.dumps(b.lines[-1]).replace(b'"00000' , b'"10000') + b"\n"
    with open(files[1], "ab") as f:
        f.write(line[:-20])
    assert assert_cache_agrees()["total"]["turns"] == turns + 1
    with open(files[1], "ab") as f:
        f.write(line[-20:])
    assert assert_cache_agrees()["total"]["turns"] == turns + 2

    # hostile lines in the middle and at the end of a file
    for bad in [*TORN.values(), *SCHEMA.values()]:
        if bad is None:
            continue
        with open(files[2], "ab") as f:
            f.write(bad.replace(b'"role":"user"', b'"role":"assistant"'))
        with open(files[2], "ab") as f:
            f.write(orjson.dumps(b.lines[-1]).replace(b'"00000', b'"2' + os.urandom(2).hex().encode()) + b"\n")
    assert_cache_agrees()

    # cut: the file is shorter than what was read
    data = open(files[3], "rb").read()
    with open(files[3], "r+b") as f:
        f.truncate(data.rindex(b"\n", 0, len(data) - 1) + 1)
    assert_cache_agrees()
    # cut, then grown past its old size with other lines
    with open(files[3], "r+b") as f:
        f.truncate(data.index(b"\n") + 1)
        f.seek(0, 2)
        for _ in range(20):
            f.write(orjson.dumps(b.lines[-1]) + b"\n")
    assert os.path.getsize(files[3]) > len(data)
    assert_cache_agrees()

    # rewritten in place: same size, mtime put back
    st = os.stat(files[4])
    data = open(files[4], "rb").read()
    changed = data.replace(b'"input":1,', b'"input":9,').replace(b'"input":401,', b'"input":901,')
    assert changed != data and len(changed) == len(data)
    with open(files[4], "r+b") as f:
        f.write(changed)
    os.utime(files[4], ns=(st.st_atime_ns, st.st_mtime_ns))
    before = assert_cache_agrees()
    assert os.stat(files[4]).st_mtime_ns == st.st_mtime_ns
    # replaced by another file under the same name, same size and mtime
    tmp = files[4] + ".new"
    with open(tmp, "wb") as f:
        f.write(data)
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, files[4])
    after = assert_cache_agrees()
    assert before != after

    # removed
    os.unlink(files[0])
    assert_cache_agrees()

    # the price table changes: rates, then a long-context threshold
    prices(TIERED_TOML.replace("output = 15.0", "output = 16.0"))
    assert_cache_agrees()
    prices(TIERED_TOML.replace("above_tokens = 5000", "above_tokens = 2000"))
    assert_cache_agrees()
    # another time zone: other local days
    days = {d["day"] for d in cost_json("--all", "--by", "day")[0]["days"]}
    monkeypatch.setenv("TZ", "Pacific/Kiritimati")
    assert_cache_agrees()
    assert {d["day"] for d in cost_json("--all", "--by", "day")[0]["days"]} != days


def test_the_caches_are_private_whatever_the_umask(prices):
    tree_session(1, turns=2)
    import subprocess

    for argv in ("panto-cost --all", "panto-cost --all --by session", "panto-ls --all"):
        p = subprocess.run(["bash", "-c", f"umask 000 && {argv}"], capture_output=True)
        assert p.returncode == 0, p.stderr
    assert os.stat(cache_dir()).st_mode & 0o777 == 0o700
    assert os.stat(os.path.dirname(cache_dir())).st_mode & 0o777 == 0o700
    names = sorted(os.listdir(cache_dir()))
    assert names == ["cost-args.memo", "cost-cache.json", "cost-parts.memo", "cost-report.memo", "ls-args.memo",
                     "ls-cache.json", "ls-report.memo", "prices.memo"]
    for name in names:
        assert os.stat(os.path.join(cache_dir(), name)).st_mode & 0o777 == 0o600


def test_a_broken_or_foreign_cache_is_rebuilt_and_no_cache_leaves_it_alone(prices):
    tree_session(1, turns=4)
    want = cost_json("--all")[0]
    for name in ("cost-cache.json", "cost-report.memo", "cost-args.memo"):
        path = os.path.join(cache_dir(), name)
        good = open(path, "rb").read()
        head, body = good.split(b"\n", 1)
        for bad in (b"", b"garbage", head + b"\n" + body[:-5], head + b"\n" + body.replace(b"0", b"1"),
                    b'{"version":1,"crc32":0}\n[]', good.replace(b'"version":1', b'"version":99', 1),
                    good.replace(b"panto-memo 2 ", b"panto-memo 99 ", 1)):
            with open(path, "wb") as f:
                f.write(bad)
            got, p = cost_json("--all")
            assert got == want and p.stderr == b"", (name, bad[:40])
            with open(path, "wb") as f:
                f.write(bad)
            got, p = cost_json("--all", "--no-cache")
            assert got == want and open(path, "rb").read() == bad


def test_since_and_until_skip_files_outside_without_reading_them(prices):
    old = tree_session(1, turns=4, day="2026-03-0")
    new = tree_session(2, turns=4, day="2026-05-1")
    # a bad line in each: only a file that is read names it
    for path in (old, new):
        last = open(path, "rb").read().rsplit(b'"timestamp":"', 1)[1][:24]
        with open(path, "ab") as f:
            f.write(b'{"type":"message","id":"x","timestamp":"%s","message":'
                    b'{"role":"assistant","content":"not a list"}}\n' % last)
        b = Builder()
        b.assistant(ts=last.decode(), input=1)
        with open(path, "ab") as f:
            f.write(orjson.dumps(b.lines[-1]).replace(b'"00000001"', b'"zz000001"') + b"\n")
    for extra in ([], ["--no-cache"]):
        doc, p = cost_json("--all", "--by", "session", "--since", "2026-04-01", *extra)
        assert [s["session"] for s in doc["sessions"]] == [os.path.basename(new)[:-6]]
        assert old.encode() not in p.stderr and new.encode() in p.stderr
        doc, p = cost_json("--all", "--by", "session", "--until", "2026-04-01", *extra)
        assert [s["session"] for s in doc["sessions"]] == [os.path.basename(old)[:-6]]
        assert new.encode() not in p.stderr and old.encode() in p.stderr
    doc, _ = cost_json("--all", "--since", "2026-04-01", "--until", "2026-04-30")
    assert doc["total"]["turns"] == 0 and doc["models"] == []
    for bad in (["--since", "2026-13-01"], ["--until", "yesterday"], ["--since", "2026-05-02", "--until", "2026-05-01"]):
        p = run(["panto-cost", "--all", *bad])
        assert_clean_error(p, status=2, name="panto-cost")


# --- each response paid once; agents, sub-agents and forks (SPEC 8, 12) -------------------

PARENT = "0199aaaa-0000-7000-8000-00000000000a"
CHILD = "0199aaaa-0000-7000-8000-00000000000b"
FORK = "0199aaaa-0000-7000-8000-00000000000c"
LONE = "0199aaaa-0000-7000-8000-00000000000d"


def imported(sid, cwd="/w", agent=None, parent=None, relation=None):
    """A Builder whose header says which agent wrote the session and whose child it is."""
    b = Builder(sid=sid, cwd=cwd)
    if agent is not None:
        b.lines[0]["source"] = {"agent": agent, "path": f"/src/{sid}.jsonl", "id": sid}
    if parent is not None:
        b.lines[0]["parentSession"] = parent
    if relation is not None:
        b.lines[0]["relation"] = relation
    return b


def billed_copy(b, paid_in, model=SONNET, **usage):
    """An assistant entry copied from session paid_in: billedIn, and usage only when given."""
    b.assistant(model=model, no_usage=not usage, **usage)
    b.lines[-1]["billedIn"] = paid_in


def in_sessions(b, sid, cwd="/w"):
    return b.write(os.path.join(paths.sessions_root(), paths.encode_cwd(cwd), sid + ".jsonl"))


def test_a_copy_billed_elsewhere_is_a_known_zero_turn(prices, tmp_path):
    b = Builder()
    b.user()
    b.assistant(input=1000, output=100)
    billed_copy(b, PARENT)                                   # copied without usage
    billed_copy(b, PARENT, input=5000, output=500)           # a usage it carries anyway is not counted
    billed_copy(b, PARENT, model=("anthropic", "not-in-the-table"))   # no price needed for nothing
    f = b.write(tmp_path / "s.jsonl")
    for args, given in (([f], b""), ([f], b""), ([], b.bytes()), ([f, "--no-cache"], b"")):  # cache written, read
        doc, _ = cost_json(*args, input=given)
        t = doc["total"]
        assert (t["turns"], t["billedElsewhere"], t["unpricedTurns"]) == (4, 3, 0)
        assert (t["input"], t["output"]) == (1000, 100)
        assert t["picoUsd"] == 1000 * 3_000_000 + 100 * 15_000_000
        assert by_model(doc)[("anthropic", "not-in-the-table")]["picoUsd"] == 0
    table = run(["panto-cost", f]).stdout.decode()
    assert "unpriced" not in table and "unknown" not in table


def test_a_billed_in_mark_that_is_not_a_session_id_does_not_hide_usage(prices):
    b = Builder()
    b.assistant(input=10)
    b.lines[-1]["billedIn"] = ""
    b.assistant(no_usage=True)
    b.lines[-1]["billedIn"] = 7
    doc, _ = cost_json(input=b.bytes())
    t = doc["total"]
    assert (t["turns"], t["input"], t["billedElsewhere"], t["unpricedTurns"]) == (2, 10, 0, 1)


def test_a_branch_summary_is_priced_like_a_compaction(prices, tmp_path):
    b = Builder()
    b.user()
    b.assistant(input=1000, output=100)
    b.n += 1
    b.lines.append({"type": "branchSummary", "id": f"{b.n:08x}", "parentId": b.last,
                    "timestamp": "2026-04-25T15:00:00.000Z", "summary": "tried the other way; it failed",
                    "fromId": "00000002", "provider": GPT4O[0], "model": GPT4O[1],
                    "usage": {"input": 300, "output": 30}})
    b.n += 1
    b.lines.append({"type": "branchSummary", "id": f"{b.n:08x}", "parentId": b.last,
                    "timestamp": "2026-04-25T15:00:01.000Z", "summary": "recorded no usage", "fromId": None})
    f = b.write(tmp_path / "s.jsonl")
    doc, _ = cost_json(f)
    m = by_model(doc)
    assert (m[GPT4O]["turns"], m[GPT4O]["compactions"], m[GPT4O]["input"]) == (1, 1, 300)
    assert m[GPT4O]["picoUsd"] == 300 * 2_500_000 + 30 * 10_000_000
    assert (m[(None, None)]["turns"], m[(None, None)]["unpricedTurns"]) == (1, 1)


def test_a_fork_and_its_parent_together_bill_each_response_once(prices):
    """Two files holding the same responses: the fork's copies carry billedIn, so --all counts them once."""
    b = imported(PARENT)
    b.user()
    b.assistant(input=1000, output=100)
    b.user()
    b.assistant(input=2000, output=200)
    in_sessions(b, PARENT)
    f = imported(FORK, parent=PARENT, relation="fork")
    f.lines += [dict(x) for x in b.lines[1:]]
    for e in f.lines[1:]:
        if e["message"]["role"] == "assistant":
            e["message"] = {k: v for k, v in e["message"].items() if k != "usage"}
            e["billedIn"] = PARENT
    f.last = f.lines[-1]["id"]
    f.n = 4
    f.user()
    f.assistant(input=4000, output=400)
    in_sessions(f, FORK)
    doc, _ = cost_json("--all", "--by", "session")
    assert (doc["total"]["input"], doc["total"]["output"], doc["total"]["billedElsewhere"]) == (7000, 700, 2)
    rows = {s["session"]: s for s in doc["sessions"]}
    assert rows[FORK]["relation"] == "fork" and rows[FORK]["parentSession"] == PARENT
    assert (rows[FORK]["input"], rows[FORK]["turns"]) == (4000, 3)     # a fork is its own row
    assert rows[PARENT]["input"] == 3000 and "withSubagents" not in rows[PARENT]
    table = run(["panto-cost", "--all", "--by", "session"]).stdout.decode().splitlines()
    assert [line.split()[0] for line in table[1:-1]] == [PARENT, FORK]


def test_by_agent(prices):
    for sid, agent in ((PARENT, "claude-code"), (CHILD, "codex"), (FORK, None), (LONE, "codex")):
        b = imported(sid, agent=agent)
        b.user()
        b.assistant(input=int(sid[-1], 16), output=1)
        in_sessions(b, sid)
    doc, _ = cost_json("--all", "--by", "agent")
    assert [(a["agent"], a["turns"], a["input"]) for a in doc["agents"]] == [
        ("claude-code", 1, 10), ("codex", 2, 11 + 13), ("panto", 1, 12)]
    table = run(["panto-cost", "--all", "--by", "agent"]).stdout.decode().splitlines()
    assert table[0].split()[:2] == ["AGENT", "TURNS"]
    assert [line.split()[:3] for line in table[1:]] == [
        ["claude-code", "1", "10"], ["codex", "2", "24"], ["panto", "1", "12"], ["TOTAL", "4", "46"]]
    # a stream on stdin: its header names its agent
    b = imported(LONE, agent="pi")
    b.assistant(input=3)
    doc, _ = cost_json("--by", "agent", input=b.bytes())
    assert [(a["agent"], a["input"]) for a in doc["agents"]] == [("pi", 3)]


def test_by_session_puts_a_sub_agent_under_its_parent_and_in_its_total(prices):
    parent = imported(PARENT, agent="claude-code")
    parent.user()
    parent.assistant(input=1000, output=10)
    in_sessions(parent, PARENT)
    child = imported(CHILD, agent="claude-code", parent=PARENT, relation="subagent")
    child.user()
    child.assistant(input=200, output=2)
    in_sessions(child, CHILD)
    grandchild = imported(LONE, agent="claude-code", parent=CHILD, relation="subagent")
    grandchild.assistant(input=30, output=3)
    in_sessions(grandchild, LONE)
    fork = imported(FORK, parent=PARENT, relation="fork")
    fork.assistant(input=4, output=4)
    in_sessions(fork, FORK)
    for extra in ([], ["--no-cache"], []):
        table = run(["panto-cost", "--all", "--by", "session", *extra]).stdout.decode().splitlines()
        names = [line[:len(table[0].split("TURNS")[0])].rstrip() for line in table[1:]]
        assert names == [PARENT, f"↳ {CHILD}", f"  ↳ {LONE}", FORK, "TOTAL"]
        inputs = [line.split()[-6] for line in table[1:]]
        assert inputs == ["1,230", "230", "30", "4", "1,234"]
        doc, _ = cost_json("--all", "--by", "session", *extra)
        rows = {s["session"]: s for s in doc["sessions"]}
        assert [s["session"] for s in doc["sessions"]] == [PARENT, CHILD, LONE, FORK]
        assert (rows[PARENT]["input"], rows[PARENT]["withSubagents"]["input"]) == (1000, 1230)
        assert (rows[CHILD]["input"], rows[CHILD]["withSubagents"]["input"]) == (200, 230)
        assert "withSubagents" not in rows[LONE] and "withSubagents" not in rows[FORK]
        assert (rows[CHILD]["parentSession"], rows[CHILD]["relation"], rows[CHILD]["agent"]) == (
            PARENT, "subagent", "claude-code")
        assert rows[FORK]["agent"] == "panto" and "parentSession" not in rows[PARENT]
        assert sum(s["input"] for s in doc["sessions"]) == doc["total"]["input"] == 1234
    # a sub-agent whose parent is not in the report is a row of its own
    doc, _ = cost_json("--by", "session", os.path.join(paths.sessions_root(), paths.encode_cwd("/w"), CHILD + ".jsonl"))
    assert [(s["session"], s["input"]) for s in doc["sessions"]] == [(CHILD, 200)]


def test_a_fork_of_a_fork_written_as_fork_writes_it_is_billed_once(prices):
    """What /fork writes (slash.forked), put in files by panto-log append: the copies
    of replies and of a compaction lose their usage and name the session that paid
    (a reply of unknown usage too: it is unpriced once, in the session it came from)."""
    from pantolib.slash import forked

    b = imported(PARENT)
    b.user()
    b.assistant(input=1000, output=100)
    compaction_entry(b, {"input": 500, "output": 50})
    b.user()
    b.assistant(no_usage=True)                  # unknown stays unknown, in the original only
    first = b.bytes()
    for data in (first,):
        assert run(["panto-log", "append"], input=data).returncode == 0
    head, fork1 = forked(first)
    assert (head["parentSession"], head["relation"]) == (PARENT, "fork")
    grown = fork1 + orjson.dumps({"type": "message", "id": "f0000001", "parentId": b.last,
                                  "timestamp": "2026-04-25T16:00:00.000Z",
                                  "message": {"role": "assistant", "content": [], "provider": SONNET[0],
                                              "model": SONNET[1], "usage": {"input": 7, "output": 7}}}) + b"\n"
    assert run(["panto-log", "append"], input=grown).returncode == 0
    head2, fork2 = forked(grown)
    assert run(["panto-log", "append"], input=fork2).returncode == 0
    copies = [orjson.loads(x) for x in fork2.splitlines()[1:]]
    assert [e.get("billedIn") for e in copies] == [None, PARENT, PARENT, None, PARENT, head["id"]]
    assert fork2.splitlines()[4] == first.splitlines()[4]       # no turn: the line as it was
    doc, _ = cost_json("--all", "--by", "session")
    t = doc["total"]
    assert (t["input"], t["output"], t["billedElsewhere"], t["unpricedTurns"]) == (1507, 157, 7, 1)
    rows = {s["session"]: s for s in doc["sessions"]}
    assert [rows[s]["input"] for s in (PARENT, head["id"], head2["id"])] == [1500, 7, 0]


def test_a_long_chain_of_sub_agents_and_a_loop_of_parents(prices):
    """Sub-agents 1,100 generations deep (deeper than Python's recursion) and two
    sessions that name each other as parent: every session is one row, each
    total holds its descendants, and nothing is counted twice."""
    ids = [f"0199aaaa-0000-7000-8000-{i:012d}" for i in range(1100)]
    for i, sid in enumerate(ids):
        b = imported(sid, parent=ids[i - 1] if i else None, relation="subagent" if i else None)
        b.assistant(input=1)
        in_sessions(b, sid)
    a, z = "0199ffff-0000-7000-8000-00000000000a", "0199ffff-0000-7000-8000-00000000000b"
    for sid, parent in ((a, z), (z, a)):
        b = imported(sid, parent=parent, relation="subagent")
        b.assistant(input=1000)
        in_sessions(b, sid)
    doc, _ = cost_json("--all", "--by", "session")
    rows = doc["sessions"]
    assert [s["session"] for s in rows[:1100]] == ids and {s["session"] for s in rows[1100:]} == {a, z}
    assert rows[0]["withSubagents"]["input"] == 1100 and rows[1098]["withSubagents"]["input"] == 2
    assert sum(s["input"] for s in rows) == doc["total"]["input"] == 3100
    assert rows[1100]["withSubagents"]["input"] == 2000 and "withSubagents" not in rows[1101]
    table = run(["panto-cost", "--all", "--by", "session"]).stdout.decode().splitlines()
    assert table[1].startswith(ids[0]) and table[2].startswith(f"↳ {ids[1]}")
    assert table[12].startswith(f"{'  ' * 9}↳ [11] {ids[11]}") and table[1100].startswith(f"{'  ' * 9}↳ [1099] ")
    assert len(table) == 1 + 1102 + 1
