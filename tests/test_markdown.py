"""The Markdown renderer of replies: layout, styling, NO_COLOR, streaming in any pieces."""
import io
import random
import re

import pytest

from pantolib.markdown import Renderer

REPLY = ("# Title\nSome **bold**, *italic* and `code`.\n> quoted **text**\n>> nested\n- item one\n"
         "  * item two\n+ three\n---\n```python\nx = 1  # *not* styled\n> not a quote\n```\n"
         "1. first\nplain end")
SGR = re.compile(r"\x1b\[[0-9;]*m")


def render(text, tty=True, color=True, pieces=None, width=80):
    out = io.StringIO()
    r = Renderer(out, tty=tty, color=color, width=lambda: width)
    for p in pieces or [text]:
        r.text(p)
    r.end()
    return out.getvalue()


def screen(raw):
    """What a terminal shows at the end: each line's text after its last carriage return, colour codes dropped."""
    raw = SGR.sub("", raw).replace("\x1b[J", "")
    raw = re.sub(r"\x1b\[\d+A", "", raw)
    return [line.split("\r")[-1] for line in raw.split("\n")]


def test_layout_without_colour_has_no_escape_at_all():
    out = render(REPLY, color=False)
    assert "\x1b" not in out
    lines = screen(out)
    assert lines[:8] == ["# Title", "Some **bold**, *italic* and `code`.", "│ quoted **text**", "││ nested",
                         "• item one", "  • item two", "• three", "─" * 40]
    assert "x = 1  # *not* styled" in lines and "> not a quote" in lines   # code is left alone
    assert "1. first" in lines and "plain end" in lines


def test_colour_styles_each_line_and_keeps_the_same_characters():
    out = render(REPLY)
    assert screen(out) == screen(render(REPLY, color=False))
    assert "\x1b[1mbold\x1b[0m" in out and "\x1b[3mitalic\x1b[0m" in out and "\x1b[36mcode\x1b[0m" in out
    assert "\x1b[1m\x1b[35m# Title" in out
    assert "\x1b[32mx = 1  # *not* styled" in out        # fenced code in colour, not emphasis


@pytest.mark.parametrize("seed", range(5))
def test_any_split_of_the_stream_draws_the_same(seed):
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(REPLY)), 25))
    pieces = [REPLY[a:b] for a, b in zip([0] + cuts, cuts + [len(REPLY)])]
    assert screen(render(REPLY, pieces=pieces)) == screen(render(REPLY))
    assert screen(render(REPLY, color=False, pieces=pieces)) == screen(render(REPLY, color=False))


def test_text_appears_before_its_line_ends():
    out = io.StringIO()
    r = Renderer(out, tty=True, color=True)
    r.text("A sentence still being wri")
    assert out.getvalue() == "A sentence still being wri"
    r.text("- ")
    r.end()


def test_only_a_leading_marker_is_held_back():
    out = io.StringIO()
    r = Renderer(out, tty=True, color=False)
    r.text("-")
    assert out.getvalue() == ""          # a bullet, a rule or text: not known yet
    r.text("- x")
    assert out.getvalue() == "-- x"
    r.end()


def test_not_a_terminal_gets_the_text_as_written():
    assert render(REPLY, tty=False, color=True) == REPLY + "\n"
    assert render(REPLY + "\n", tty=False) == REPLY + "\n"


def test_escape_sequences_in_the_text_are_made_visible():
    out = render("a \x1b]52;c;aGk=\x07 b\n> \x1b[2J", color=False)
    assert "\x1b" not in out and "^[]52;c;aGk=^G" in out and "│ ^[[2J" in out
    out = render("x\x1b[31my", tty=True, color=True)
    assert "\x1b[31m" not in out


def test_thinking_is_dimmed_and_apart():
    out = io.StringIO()
    r = Renderer(out, tty=True, color=True)
    r.thinking("let me see")
    r.text("# Answer")
    r.end()
    assert out.getvalue().startswith("\x1b[2mlet me see\x1b[0m\n")
    plain = io.StringIO()
    r = Renderer(plain, tty=True, color=False)
    r.thinking("let me see")
    r.text("answer")
    r.end()
    assert plain.getvalue() == "thinking: let me see\n\nanswer\n"   # marked, and a blank line after


def draw(text, cols=40, rows=24, color=True, pieces=None):
    """The reply rendered character by character (or in pieces) on a small terminal: its Screen."""
    from vt import Screen

    out = io.StringIO()
    r = Renderer(out, tty=True, color=color, width=lambda: cols, height=lambda: rows)
    for p in pieces if pieces is not None else text:
        r.text(p)
    r.end()
    return Screen(cols, rows).feed(out.getvalue()), out.getvalue()


WORDS = ("A reply that talks for a while about nothing much, with words of many lengths such as "
         "internationalization and a, so that rows break in different places.")


@pytest.mark.parametrize("color", [True, False])
@pytest.mark.parametrize("cols", [25, 33, 41])
def test_long_lines_wrap_at_word_boundaries(color, cols):
    s, raw = draw(WORDS + "\n", cols=cols, color=color)
    rows = [r for r in s.text() if r]
    assert " ".join(rows) == WORDS                   # every word once, none cut in two
    assert all(len(r) <= cols - 1 for r in rows)
    for a, b in zip(rows, rows[1:]):
        assert len(a) + 1 + len(b.split(" ")[0]) > cols - 1   # the next word did not fit
    if not color:
        assert "\x1b" not in raw


@pytest.mark.parametrize("seed", range(5))
def test_a_paragraph_taller_than_the_screen_is_drawn_once(seed):
    rng = random.Random(seed)
    words = [rng.choice(["alpha", "be", "gamma", "**bold**", "`code`", "delta-epsilon"]) + str(i) for i in range(300)]
    para = " ".join(words)
    cuts = sorted(rng.sample(range(1, len(para)), 60))
    pieces = [para[a:b] for a, b in zip([0] + cuts, cuts + [len(para)])] + ["\nnext\n"]
    s, raw = draw(para, cols=50, rows=10, pieces=pieces)
    assert s.clamped == 0                           # never up past the top of the screen
    assert " ".join(r for r in s.text() if r).split(" ") == words + ["next"]   # each word once, in order
    assert s.text()[-2:] == ["next", ""]


def test_tables_are_aligned_columns():
    table = "| name | size |\n|:-----|-----:|\n| a | 1 |\n| longer name | 12345 |\n\nafter\n"
    for color in (True, False):
        s, raw = draw(table, color=color)
        rows = [r for r in s.text() if r]
        assert rows[:4] == ["name        │  size", "────────────┼──────", "a           │     1",
                            "longer name │ 12345"], rows
        assert rows[4] == "after"
        if not color:
            assert "\x1b" not in raw


def test_a_table_wider_than_the_screen_stays_as_written():
    table = "| " + " | ".join("column%d" % i for i in range(9)) + " |\n|" + "---|" * 9 + "\n"
    s, _ = draw(table, cols=40, color=False)
    assert "".join(s.text()).replace(" ", "") == table.replace("\n", "").replace(" ", "")


def test_code_fences_keep_their_text_as_written_in_one_style():
    code = "```python\ndef f(x):\n    # **not bold** and *not italic*\n    return x  - 1\n> not a quote\n---\n```\n"
    s, raw = draw(code, cols=60)
    assert [r for r in s.text() if r] == code.rstrip("\n").split("\n")
    body = [x for x in raw.split("\n") if "not bold" in x][0]
    assert "\x1b[32m" in body and "\x1b[1m" not in body and "\x1b[3m" not in body


def test_no_color_thinking_is_marked_and_apart():
    out = io.StringIO()
    r = Renderer(out, tty=True, color=False, width=lambda: 30)
    r.thinking("first I will look at the files, then at the tests\nand then decide")
    r.text("The answer.")
    r.end()
    from vt import Screen

    rows = Screen(30).feed(out.getvalue()).text()
    assert rows[0].startswith("thinking: first I will")
    assert "" in rows[1:rows.index("The answer.")]      # a blank line between thinking and answer
    assert "\x1b" not in out.getvalue()


@pytest.mark.parametrize("color", [True, False])
def test_a_table_ended_by_a_line_that_starts_like_a_row(color):
    text = "| a | b |\n|---|---|\n| 1 | 2 |\n| not a row, a long line that wraps over more than one row of the screen\nend\n"
    s, _ = draw(text, cols=30, color=color)
    rows = [r for r in s.text() if r]
    assert rows[:3] == ["a │ b", "──┼──", "1 │ 2"], rows
    assert " ".join(rows[3:-1]) == "| not a row, a long line that wraps over more than one row of the screen"
    assert rows[-1] == "end"
