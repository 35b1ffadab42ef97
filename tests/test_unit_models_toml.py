"""pantolib.models_toml on its own: models.toml read from real files (SPEC
§8), every refusal as the exact one-line error naming the file and, where it
can be found, the line and column; and the notes kept for what is ignored."""
import os
import subprocess
import sys

import pytest

from pantolib import models_toml, persist
from pantolib.errors import PantoError
from pantolib.prices import Price

KNOWN = ("input, output, cache_read, cache_write, cache_write_1h, input_above, output_above, "
         "cache_read_above, cache_write_above, cache_write_1h_above, above_tokens, context, "
         "checked, source, changes")


def _error(text, name="models.toml"):
    with pytest.raises(PantoError) as e:
        models_toml.parse(text, name)
    return str(e.value)


def test_load_reads_the_config_directory_by_default(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "HOME": str(tmp_path / "home")}
    path = tmp_path / "cfg" / "panto" / "models.toml"
    assert models_toml.default_path(env) == str(path)
    assert models_toml.default_path({"HOME": str(tmp_path / "home")}) == str(
        tmp_path / "home" / ".config" / "panto" / "models.toml")
    missing = models_toml.load(env=env)
    assert (missing.missing, missing.path, len(missing), missing.table) == (True, str(path), 0, {})
    path.parent.mkdir(parents=True)
    path.write_text('[openai.m]\ninput = 1\n[openai.n]\noutput = 2\n')
    table = models_toml.load(env=env)
    assert (table.missing, table.path, len(table)) == (False, str(path), 2)
    assert table.get("openai", "n") == Price(output=2_000_000)


def test_load_refuses_a_directory_and_a_huge_file(tmp_path):
    with pytest.raises(PantoError) as e:
        models_toml.load(str(tmp_path))
    assert str(e.value) == f"'{tmp_path}' is a directory, not a models.toml"
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * (16 << 20) + b"\n")
    with pytest.raises(PantoError) as e:
        models_toml.load(str(big))
    assert str(e.value) == f"'{big}' is too large for a price table (over 16 MB)"
    exact = tmp_path / "exact.toml"
    exact.write_bytes(b"#" * ((16 << 20) - 1) + b"\n")  # 16 MB exactly is read
    assert len(models_toml.load(str(exact))) == 0


def test_load_names_the_place_of_bytes_that_are_not_utf8(tmp_path):
    f = tmp_path / "prices.toml"
    f.write_bytes(b'[openai.m]\ninput = 1\n# caf\xc3\xa9 ok\nx = "ab\xffc"\n')
    with pytest.raises(PantoError) as e:
        models_toml.load(str(f))
    assert str(e.value) == f"{f}:4:8: not valid UTF-8"
    assert _error(b"\xfe") == "models.toml:1:1: not valid UTF-8"


def test_parse_takes_text_and_bytes_with_or_without_a_bom():
    text = '\ufeff[openai.m]\ninput = 1.25\n'
    for data in (text, text.encode(), text[1:], text[1:].encode()):
        t = models_toml.parse(data)
        assert t.table == {("openai", "m"): (("", Price(input=1_250_000)),)}
        assert (t.path, t.missing, t.notes) == ("models.toml", False, [])


@pytest.mark.parametrize("text, error", [
    ('[openai.m]\ninput = 1\noutput = = 2\n', "models.toml:3:10: invalid value"),
    ('[openai.m]\ninput = 1\ninput = 2\n', "models.toml:3:10: cannot overwrite a value"),
    ('[openai.m]\ninput = [1, 2', "models.toml:2:14: unclosed array"),        # at the end of the document
    ('[openai.m]\ninput = 1\noutput = [\n1,\n', "models.toml:5:1: invalid value"),
    ('[openai.m', "models.toml:1:10: expected ']' at the end of a table declaration"),
])
def test_malformed_toml_names_line_and_column(text, error):
    assert _error(text) == error


def test_too_deeply_nested_toml():
    assert _error("a = " + "[" * 100_000 + "]" * 100_000 + "\n", "p.toml") == "p.toml: nested too deeply"


@pytest.mark.parametrize("text, error", [
    ("openai = 1\n", "models.toml: 'openai' is not a table of models (write prices under [openai.MODEL])"),
    ('"open ai" = "x"\n', """models.toml: 'open ai' is not a table of models (write prices under ["open ai".MODEL])"""),
    ('[openai]\ninput = 1\n', "models.toml: [openai] 'input': prices go in a model table, e.g. [openai.MODEL-ID]"),
    ('[openai.m.input]\nx = 1\n', "models.toml: [openai.m] 'input' is not a number (a table)"),
    ('[[openai.m]]\ninput = 1\n', "models.toml: [[openai.m]] is an array of tables, not a model table"),
    ('[openai.m]\ninput = 1\nfoo = [1, {a = 1}]\n', "models.toml: [[openai.m.foo]] is an array of tables, not a model table"),
    ('[openai]\nsource = 1\n[openai.m]\ninput = 1\n',
     "models.toml: [openai] 'source' must be a string (the page the prices came from), not a number"),
    ('[openai."gpt-4.1"]\ninput = 1\n[openai.gpt-4.1]\noutput = 2\n', 'models.toml: [openai."gpt-4.1"] is defined twice'),
    ('[openai."gpt-4.1"]\nchanges = []\n[[openai.gpt-4.1.changes]]\nsince = 2026-01-01\n',
     'models.toml: [openai."gpt-4.1"] is defined twice'),
])
def test_tables_that_are_not_model_tables(text, error):
    assert _error(text) == error


def test_model_ids_nest_sixteen_parts_deep_and_no_more():
    parts = [f"k{i}" for i in range(16)]
    t = models_toml.parse(f"[a.{'.'.join(parts)}]\ninput = 1\n")
    assert t.table == {("a", ".".join(parts)): (("", Price(input=1_000_000)),)}
    assert _error(f"[a.{'.'.join(parts)}.k16]\ninput = 1\n") == \
        f"models.toml: [a.{'.'.join(parts)}...] is nested too deeply"


def test_a_model_spelt_quoted_and_bare_may_hold_fields_in_one_and_changes_in_the_other():
    for text in ('[openai."gpt-4.1"]\ninput = 1\n[[openai.gpt-4.1.changes]]\nsince = 2026-01-01\ninput = 2\n',
                 '[[openai.gpt-4.1.changes]]\nsince = 2026-01-01\ninput = 2\n[openai."gpt-4.1"]\ninput = 1\n'):
        t = models_toml.parse(text)
        assert t.periods("openai", "gpt-4.1") == (("", Price(input=1_000_000)), ("2026-01-01", Price(input=2_000_000)))
        assert t.get("openai", "gpt-4.1", "2025-12-31") == Price(input=1_000_000)
        assert t.get("openai", "gpt-4.1", "2026-01-01") == Price(input=2_000_000)


def test_a_table_with_only_a_nested_table_is_no_model():
    t = models_toml.parse('[openai.m.n]\ninput = 1\n[openai.e]\n')
    assert t.table == {("openai", "m.n"): (("", Price(input=1_000_000)),), ("openai", "e"): (("", Price()),)}
    assert t.periods("openai", "m") is None and t.get("openai", "m") is None


@pytest.mark.parametrize("text, error", [
    ('[openai.m]\ninput = 1\nchanges = 3\n',
     "models.toml:3:11: [openai.m] 'changes' must be an array of tables ([[openai.m.changes]] with a 'since' date)"),
    ('[openai.m]\ninput = 1\nchanges = [1]\n',
     "models.toml:3:11: [openai.m] 'changes' must be an array of tables ([[openai.m.changes]] with a 'since' date)"),
    ('[openai.m]\ninput = 1\n\n  [[openai.m.changes]]\n  input = 2\n',
     "models.toml:4:3: [[openai.m.changes]] has no 'since' date (write e.g. since = 2026-10-07)"),
    ('[openai.m]\ninput = 1\n[[openai.m.changes]]\nsince = "2026-01-01"\n',
     "models.toml:4:9: [[openai.m.changes]] 'since' must be a TOML date such as 2026-10-07, not a string (2026-01-01)"),
    ('[openai.m]\n[[openai.m.changes]]\n"since" = 2026-01-01T10:00:00Z\n',
     "models.toml:3:11: [[openai.m.changes]] 'since' must be a TOML date such as 2026-10-07, "
     "not a date-time (2026-01-01 10:00:00+00:00)"),
    ('[openai.m]\ninput = 1\n[[openai.m.changes]]\nsince = 2026-01-01\n[[openai.m.changes]]\ninput = 3\n'
     "'since' = 2026-01-01\n",
     "models.toml:7:11: [[openai.m.changes]] has two changes since 2026-01-01: merge them into one"),
    ('[openai.m]\ninput = 1\n[[openai.m.changes]]\nsince = 2026-01-01\nchanges = 1\n',
     "models.toml:5:11: [[openai.m.changes]] since 2026-01-01 'changes' cannot be nested in a change"),
    ('[openai.m]\n[[openai.m.changes]]\nsince = 2026-01-01\nfoo = {a = 1}\n',
     "models.toml:4:7: [[openai.m.changes]] since 2026-01-01 'foo' is not a number (a table)"),
    ('[openai.m]\n[[openai.m.changes]]\nsince = 2026-01-01\nfoo = [2, {a = 1}]\n',
     "models.toml:4:7: [[openai.m.changes]] since 2026-01-01 'foo' is not a number (an array)"),
    # a change written inline has no header to point at: the file and the table only
    ('[openai.m]\nchanges = [{input = 2}]\n', "models.toml: [[openai.m.changes]] has no 'since' date "
     "(write e.g. since = 2026-10-07)"),
])
def test_bad_changes(text, error):
    assert _error(text) == error


@pytest.mark.parametrize("text, error", [
    ('[openai.m]\ninput = "1"\n', "models.toml:2:9: [openai.m] 'input' is not a number (a string)"),
    ('[openai.m]\noutput = 1e10\n',
     "models.toml:2:10: [openai.m] 'output' is too large (at most 1,000,000,000 USD per million tokens)"),
    ('[openai.m]\ncontext = 0\n', "models.toml:2:11: [openai.m] 'context' must be a positive whole number of tokens (a number 0)"),
    ('[openai.m]\nabove_tokens = -1\n', "models.toml:2:16: [openai.m] 'above_tokens' must be a whole number of tokens (a number -1)"),
    ('[openai.m]\nabove_tokens = 1.5\n', "models.toml:2:16: [openai.m] 'above_tokens' must be a whole number of tokens (a number 1.5)"),
    ('[openai.m]\nabove_tokens = true\n', "models.toml:2:16: [openai.m] 'above_tokens' must be a whole number of tokens (a boolean True)"),
    ('[openai.m]\nabove_tokens = inf\n', "models.toml:2:16: [openai.m] 'above_tokens' must be a whole number of tokens (a number Infinity)"),
    ('[openai.m]\ninput = 1\nchecked = "2026-01-01"\n',
     "models.toml:3:11: [openai.m] 'checked' must be a TOML date such as 2026-12-01, not a string"),
    ('[openai.m]\nsource = 3\n', "models.toml:2:10: [openai.m] 'source' must be a string (the page the prices came from), not a number"),
    ('[openai.m]\ninput = 1\n[[openai.m.changes]]\nsince = 2026-01-01\n   cache_read   =   true\n',
     "models.toml:5:21: [[openai.m.changes]] since 2026-01-01 'cache_read' is not a number (a boolean)"),
])
def test_bad_fields_point_at_the_value(text, error):
    assert _error(text) == error


@pytest.mark.parametrize("text", [
    'openai = { m = { input = "x" } }\n',           # an inline table: no header line
    '[openai]\nm.input = "x"\n',                      # a dotted key: no [openai.m] header
    'openai.m.input = "x"\n',
])
def test_a_table_with_no_header_line_is_named_without_a_place(text):
    assert _error(text) == "models.toml: [openai.m] 'input' is not a number (a string)"


@pytest.mark.parametrize("text, error", [
    # a key spelt with an escape is not found in its table: the error points at the table's header
    ('# prices\n[openai.m]\n"\\u0069nput" = "x"\n[openai.n]\ninput = 1\n',
     "models.toml:2:1: [openai.m] 'input' is not a number (a string)"),
    ('[openai.n]\ninput = 1\n  [ openai . "m" ]\n"\\u0069nput" = "x"\n',
     "models.toml:3:3: [openai.m] 'input' is not a number (a string)"),
])
def test_a_key_not_found_points_at_its_table_header(text, error):
    assert _error(text) == error


def test_lines_in_a_multiline_string_that_start_like_headers_are_passed_over():
    text = ('[openai.x]\nnote = \'\'\'\n[nope\n[a b\n["\\q"]\n[=\n\'\'\'\n'
            '[openai.m]\ninput = "x"\n')
    assert _error(text) == "models.toml:9:9: [openai.m] 'input' is not a number (a string)"


def test_a_header_spelt_inside_a_multiline_string_is_not_the_header():
    text = '[openai.x]\nnote = \'\'\'\n[openai.m]\n\'\'\'\n[openai.m]\ninput = "x"\n'
    assert _error(text) == "models.toml:6:9: [openai.m] 'input' is not a number (a string)"
    # in a basic one, past an escaped delimiter, ended by more quote marks; in an array
    text = ('[openai.x]\nnote = """\n[openai.m]\n\\""" [openai.m]\n[openai.m]\n"""""\n'
            'list = [\n  [1],\n  "]",\n  [2]]\n[openai.m] # """ a comment\ninput = "x"\n')
    assert _error(text) == "models.toml:12:9: [openai.m] 'input' is not a number (a string)"


def test_a_key_spelt_inside_a_multiline_value_is_not_the_key():
    text = ('[openai.m]\nnote = \'\'\'\ninput = 1\n[x]\n\'\'\'\nother = [\n"a",\n]\n'
            'input = "x"\n')
    assert _error(text) == "models.toml:9:9: [openai.m] 'input' is not a number (a string)"


def test_in_value_marks_the_lines_inside_multiline_strings_and_arrays():
    lines = ['[a]', 'x = """', '[b]', 'q \\""" still', '"""', "y = [", " [1],", ' "]",', "]",
             "z = 'a' # [", "w = '''one'''''", "[[c]]", "v = '''", "\\", "'''"]
    assert models_toml._in_value(lines) == [False, False, True, True, True, False, True, True, True,
                                            False, False, False, False, True, True]


def test_header_keys_in_every_spelling():
    assert models_toml._header_keys(' a . "b.c" . \'d\\e\' ]  # x', "]") == ["a", "b.c", "d\\e"]
    assert models_toml._header_keys('a."\\u0062"]]', "]]") == ["a", "b"]
    assert models_toml._header_keys('a."\\q"]', "]") == ["a", "\\q"]  # left as written when it does not read
    assert models_toml._header_keys('a b]', "]") is None
    assert models_toml._header_keys('=]', "]") is None
    assert models_toml._header_keys('a.]', "]") is None


def test_where_finds_headers_once_and_counts_changes():
    text = '[p.m]\ninput = 1\n[[p.m.changes]]\nsince = 2026-01-01\n[[p.m.changes]]\nsince = 2026-02-01\n[[p.changes]]\n'
    where = models_toml._Where(text, "f.toml")
    assert where.model("p", "m") == 0
    headers = where._index()
    assert where.model("p", "m") == 0 and where._index() is headers
    assert [where.change("p", "m", i) for i in range(3)] == [2, 4, None]
    assert where.change("p", "", 0) == 6
    assert where.model("p", "x") is None
    assert where.key(lambda: 4, "since") == (5, 8)
    assert where.key(lambda: None, "since") is None
    assert where.error(2, "m") == "f.toml:3:1: m"
    assert where.error((5, 8), "m") == "f.toml:6:9: m"
    assert where.error(None, "m") == "f.toml: m"


def test_changes_apply_cumulatively_in_date_order_whatever_the_file_order():
    t = models_toml.parse('[anthropic."claude-x"]\ninput = 3\noutput = 15\ncontext = 200000\n'
                          '[[anthropic."claude-x".changes]]\nsince = 2026-10-07\ncache_read = 0.1\n'
                          '[[anthropic."claude-x".changes]]\nsince = 2026-03-01\ninput = 2\n')
    assert t.periods("anthropic", "claude-x") == (
        ("", Price(input=3_000_000, output=15_000_000, context=200000)),
        ("2026-03-01", Price(input=2_000_000, output=15_000_000, context=200000)),
        ("2026-10-07", Price(input=2_000_000, output=15_000_000, cache_read=100_000, context=200000)))
    assert t.get("anthropic", "claude-x", "2026-02-28").input == 3_000_000
    assert t.get("anthropic", "claude-x", "2026-10-06").cache_read is None
    assert t.get("anthropic", "claude-x", "2027-01-01").cache_read == 100_000
    assert t.get("anthropic", "claude-x").input == 2_000_000  # today is after both changes
    assert t.get("openai", "claude-x") is None
    assert t.notes == []


def test_tiers_and_whole_token_counts():
    t = models_toml.parse('[openai.b]\nabove_tokens = 272000.0\ninput_above = 4\ncontext = 1e6\n'
                          '[[openai.b.changes]]\nsince = 2026-05-01\nabove_tokens = 0\n'
                          '[openai.a]\nabove_tokens = 200000\n[openai.c]\ninput = 1\n')
    assert t.tiers() == [["openai", "a", "", 200000], ["openai", "b", "", 272000], ["openai", "b", "2026-05-01", 0]]
    assert t.get("openai", "b", "2026-01-01") == Price(above_tokens=272000, input_above=4_000_000, context=1_000_000)
    assert type(t.get("openai", "b", "2026-01-01").above_tokens) is int


def test_notes_for_what_is_ignored():
    t = models_toml.parse('[openai]\nsource = "https://example.com/pricing"\n'
                          '[openai.m]\ninput = 1\ninput_above = 2\nfoo = [1, 2]\nchecked = 2026-12-01\nsource = "x"\n'
                          '[[openai.m.changes]]\nsince = 2026-01-01\nbar = "y"\nchecked = 2026-01-02\n'
                          '[openai.n]\ninput = 1\n[[openai.n.changes]]\nsince = 2026-01-01\noutput_above = 1\n')
    assert t.notes == [
        f"models.toml: [openai.m] unknown key 'foo' ignored (known: {KNOWN})",
        f"models.toml: [[openai.m.changes]] since 2026-01-01 unknown key 'bar' ignored (known: {KNOWN})",
        "models.toml: [openai.m] '_above' rates are unused without 'above_tokens'",
        "models.toml: [openai.n] '_above' rates are unused without 'above_tokens'",
    ]
    assert t.get("openai", "m", "2026-06-01") == Price(input=1_000_000, input_above=2_000_000)


def test_a_toml_error_without_a_place_names_the_file_only():
    import tomllib

    assert models_toml._toml_error(tomllib.TOMLDecodeError("Bad thing"), "a = 1\n", "f.toml") == "f.toml: Bad thing"
    assert models_toml._toml_error(tomllib.TOMLDecodeError("Bad (at line 2, column 3)"), "", "f.toml") == "f.toml:2:3: bad"


MEMO_TABLE = ('[openai.m]\ninput = 1\ninput_above = 2\nabove_tokens = 1000\ncontext = 4000\nfoo = 1\n'
              '[[openai.m.changes]]\nsince = 2026-01-01\noutput = 3\n[anthropic."claude-x"]\noutput = 15\n')


def test_a_table_through_its_memo_is_the_table_parsed_from_those_very_bytes(tmp_path):
    """load(cache=True): the table parsed from the same text comes back from the
    memo, notes and all, without a parse; a text of the same size put back at
    the same time is parsed anew, and so is one whose memo holds no table;
    load() without cache writes nothing."""
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "HOME": str(tmp_path)}
    path = tmp_path / "cfg" / "panto" / "models.toml"
    path.parent.mkdir(parents=True)
    path.write_text(MEMO_TABLE)
    memo = tmp_path / "cache" / "panto" / models_toml.MEMO
    plain = models_toml.load(env=env)
    assert not memo.exists() and plain.notes and plain.tiers()
    first = models_toml.load(env=env, cache=True)
    assert memo.exists() and os.stat(memo).st_mode & 0o777 == 0o600
    probe = ("from pantolib import models_toml; models_toml.parse = None; "     # a parse would fail
             "t = models_toml.load(env=%r, cache=True); print(t.get('openai', 'm', '2026-02-01'), t.notes)" % env)
    got = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert got == f"{plain.get('openai', 'm', '2026-02-01')!r} {plain.notes!r}\n"
    again = models_toml.load(env=env, cache=True)
    for t in (first, again):
        assert (t.table, t.notes, t.path, t.missing) == (plain.table, plain.notes, plain.path, False)
    st = os.stat(path)
    path.write_text(MEMO_TABLE.replace("input = 1", "input = 7"))     # the same size, put back at the same time
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert models_toml.load(env=env, cache=True).get("openai", "m", "2025-01-01").input == 7_000_000
    text = path.read_bytes()
    key = persist.key(models_toml.MEMO, str(path), text)
    assert persist.remember(models_toml.MEMO, key, 0, b"A LIE\n", [], 0, env=env)   # holding no table
    assert persist.recall(models_toml.MEMO, key, env=env)[0] == b"A LIE\n"     # the very key load asks with
    assert models_toml.load(env=env, cache=True).table == models_toml.parse(text, str(path)).table
