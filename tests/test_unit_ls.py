"""panto-ls's cells on their own: a title as one field."""
import random

from pantolib.cmd.ls import title_field
from pantolib.terminal import visible_line


def _slow(text, width=80):
    """The rule as written first: every cell through visible_line, then split and joined."""
    if not text:
        return ""
    flat = " ".join(visible_line(text[: 2 * width]).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def test_one_line_keeps_a_plain_title_and_flattens_the_rest():
    assert title_field("fix the failing test") == "fix the failing test"
    assert title_field("  two  spaces\tand\na line ") == "two spaces and a line"
    assert title_field("esc \x1b[31m red") == "esc ^[[31m red"
    assert title_field("rtl \u202e txt") == "rtl <U+202E> txt"
    assert title_field("nbsp\u00a0here") == "nbsp here"
    assert title_field("x" * 100) == "x" * 79 + "…"
    assert title_field("") == "" and title_field(None) == ""


def test_one_line_agrees_with_the_rule_on_random_text():
    rng = random.Random(7)
    alphabet = ("ab cd  é漢→\t\n\r\x00\x1b\x7f\x85\x9b\u00a0\u2028\u2029\u202e\u2066\u200f\u061c"
                "\u3000\u1680\u200b\ufeff\ud800\U0001f600 ")
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))
        assert title_field(text) == _slow(text), repr(text)
        assert title_field(text, 10) == _slow(text, 10), repr(text)
