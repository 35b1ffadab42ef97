"""The one rule for secrets and the one neutralizer for terminal text."""
import re
import subprocess
import sys

import pytest

from pantolib import secrets, terminal

KEY = "sk-proj-abcdefghijklmnopqrstuvwx"


def test_short_values_are_not_secrets():
    keys = secrets.env_keys({"OPENAI_API_KEY": "none", "ANTHROPIC_API_KEY": "x"})
    assert keys == []
    assert secrets.redact("none of the x", keys) == "none of the x"


def test_a_key_and_its_unprefixed_echo_are_hidden():
    keys = secrets.env_keys({"OPENAI_API_KEY": KEY, "HOME": "/home/someone/long/enough"})
    text = f"bad key {KEY} or abcdefghijklmnopqrstuvwx"
    assert secrets.redact(text, keys) == "bad key [redacted] or [redacted]"


def test_keylike_text_only_on_request():
    text = "Incorrect API key provided: sk-abcd****************wxyz"
    assert secrets.redact(text, []) == text
    assert "sk-abcd" not in secrets.redact(text, [], keylike=True)


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "MY_API_KEY", "X_AUTH_TOKEN", "A_API_KEY\n", "B_AUTH_TOKEN\n",
                                  "API_KEY", "MY_API_KEYS", "MY_API_KEY\n\n", "_API_KEY_", "HOME", "", "\n"])
def test_a_key_variable_is_what_the_rule_says_without_a_regex(name):
    """is_key_var ends with a suffix where the rule was the regex (_API_KEY|_AUTH_TOKEN)$,
    whose $ also takes a last newline: the two agree."""
    want = name in secrets.KNOWN_VARS or bool(re.search(r"(_API_KEY|_AUTH_TOKEN)$", name))
    assert secrets.is_key_var(name) is want


@pytest.mark.parametrize("text", ["plain words", "a rk-0123456789abcdef0123 key", "pk-0123456789abcdef*.-_x",
                                  "ask-0123456789abcdef0123", "sk-short", "k-0123456789abcdef0123", ""])
def test_keylike_text_is_found_only_where_the_pattern_is(text):
    """Text without "k-" is passed on without the regex: the regex finds nothing there either."""
    want = re.sub(r"\b(?:sk|rk|pk)-[A-Za-z0-9_\-*.]{16,}", secrets.MARK, text)
    assert secrets.redact(text, [], keylike=True) == want


def test_plain_text_reaches_the_terminal_without_importing_re():
    """The common case (printable text, a note with no key-like text) costs no
    `import re`: a fresh interpreter shows it and redacts it, and re is not loaded."""
    code = ("import sys\nfrom pantolib import secrets, terminal\n"
            "t = terminal.visible_line(secrets.redact('panto-log: 3 sessions, caf\u00e9', ['x' * 16], keylike=True))\n"
            "assert t == 'panto-log: 3 sessions, caf\u00e9', t\nprint('re' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "False\n"


def test_url_credentials():
    url = "https://user:p4ssw0rdp4ssw0rd12@api.example.com/v1?key=0123456789abcdef0123"
    assert secrets.shown_url(url) == "https://api.example.com/v1"
    assert set(secrets.url_keys(url)) == {"p4ssw0rdp4ssw0rd12", "0123456789abcdef0123"}


def test_holdback_never_releases_a_piece_of_a_key():
    h = secrets.Holdback([KEY])
    out = ""
    for i in range(0, len("say " + KEY + " done"), 3):
        out += h.feed(("say " + KEY + " done")[i:i + 3])
        assert "sk-proj-abc" not in out
    out += h.flush()
    assert out == "say [redacted] done"


def test_edges_of_a_cut():
    before, after = secrets.redact_edges("out: sk-proj-abcdef", "stuvwx rest", [KEY])
    assert before == "out: [redacted]" and after == "[redacted] rest"


@pytest.mark.parametrize("raw, shown", [
    ("rm -rf ~ # \r\x1b[2K  echo hi", "rm -rf ~ # ^M^[[2K  echo hi"),
    ("\x1b]52;c;ZXZpbA==\x07", "^[]52;c;ZXZpbA==^G"),
    ("\x9b2J", "\\x9b2J"),
    ("abc\u202edcba", "abc<U+202E>dcba"),
    ("line\n\ttab", "line\n\ttab"),
    ("café 🙂", "café 🙂"),
])
def test_visible(raw, shown):
    assert terminal.visible(raw) == shown


def test_visible_line_is_one_line():
    assert terminal.visible_line("a\tb\nc\x1b") == "a b c^["


def test_no_color():
    assert terminal.no_color({"NO_COLOR": "1"})
    assert not terminal.no_color({"NO_COLOR": ""})
    assert not terminal.no_color({})
