"""panto-ls's cells on their own: a title as one field."""
import random

from pantolib.cmd.ls import one_line
from pantolib.terminal import visible_line


def _slow(text, width=80):
    """The rule as written first: every cell through visible_line, then split and joined."""
    if not text:
        return ""
    flat = " ".join(visible_line(text[: 2 * width]).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def test_one_line_keeps_a_plain_title_and_flattens_the_rest():
    assert one_line("fix the failing test") == "fix the failing test"
    assert one_line("  two  spaces\tand\na line ") == "two spaces and a line"
    assert one_line("esc \x1b[31m red") == "esc ^[[31m red"
    assert one_line("rtl \u202e txt") == "rtl <U+202E> txt"
    assert one_line("nbsp\u00a0here") == "nbsp here"
    assert one_line("x" * 100) == "x" * 79 + "…"
    assert one_line("") == "" and one_line(None) == ""


def test_one_line_agrees_with_the_rule_on_random_text():
    rng = random.Random(7)
    alphabet = ("ab cd  é漢→\t\n\r\x00\x1b\x7f\x85\x9b\u00a0\u2028\u2029\u202e\u2066\u200f\u061c"
                "\u3000\u1680\u200b\ufeff\ud800\U0001f600 ")
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))
        assert one_line(text) == _slow(text), repr(text)
        assert one_line(text, 10) == _slow(text, 10), repr(text)
