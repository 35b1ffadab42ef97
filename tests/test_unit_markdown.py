"""pantolib.markdown's parts on their own: wrap, split_styled, table_rows,
and the renderer's less common paths (switching between thinking and text,
a line whose rows change at its end, tables that are not tables), each
checked on the screen a small terminal model (tests/vt.py) shows."""
import io

import pytest

from pantolib.markdown import Renderer, split_styled, table_rows, wrap
from pantolib.terminal import BOLD, CYAN, RESET
from vt import Screen


def draw(pieces, cols=20, rows=24, color=True, tty=True):
    """The pieces (text, or ("thinking", text)) rendered one character at a
    time: (what was written, the Screen it leaves)."""
    out = io.StringIO()
    r = Renderer(out, tty=tty, color=color, width=lambda: cols + 1, height=lambda: rows)
    for p in pieces:
        kind, text = p if isinstance(p, tuple) else ("text", p)
        for ch in text:
            getattr(r, kind)(ch)
    r.end()
    raw = out.getvalue()
    return raw, Screen(cols + 1, rows).feed(raw)


def shown(screen):
    return [line for line in screen.text() if line]


# -- wrap -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text,cols,spans", [
    ("", 5, [(0, 0)]),
    ("short", 10, [(0, 5)]),
    ("aa bb cc", 5, [(0, 5), (6, 8)]),          # the space that overflows is where it breaks
    ("aaa bbbb", 5, [(0, 4), (4, 8)]),          # broken after the last space that fits
    ("abcdefghij", 4, [(0, 4), (4, 8), (8, 10)]),   # a word longer than a row is cut
    ("漢漢漢", 4, [(0, 2), (2, 3)]),
    ("ab cdefghijk", 4, [(0, 3), (3, 7), (7, 11), (11, 12)]),
])
def test_wrap(text, cols, spans):
    assert wrap(text, cols) == spans


def test_split_styled_starts_each_row_with_the_styles_in_force():
    plain = "aaa bbb ccc"
    styled = "aaa " + BOLD + "bbb ccc" + RESET
    spans = wrap(plain, 4)
    assert spans == [(0, 4), (4, 8), (8, 11)]
    assert split_styled(styled, spans) == ["aaa " + BOLD + RESET, BOLD + "bbb " + RESET, BOLD + "ccc" + RESET]
    assert split_styled("", [(0, 0)]) == [""]


# -- tables -------------------------------------------------------------------------------

def test_table_rows_aligns_columns_as_the_delimiter_says():
    rows = table_rows(["| a | bb | c |", "|:--|:-:|--:|", "| xxx | y | zz |"], 40)
    assert rows == ["a   │ bb │  c", "────┼────┼───", "xxx │ y  │ zz"]


def test_table_rows_without_outer_pipes_and_an_escaped_pipe():
    assert table_rows(["a | b", "--|--", "x\\| | y \\|"], 40) == ["a   │ b", "────┼─────", "x\\| │ y \\|"]


def test_table_rows_styles_cells_and_bolds_the_header():
    rows = table_rows(["| h |", "|---|", "| `c` |"], 40, style=lambda t: CYAN + t + RESET)
    assert rows[0] == BOLD + "h" + RESET
    assert rows[2] == CYAN + "`c`" + RESET


@pytest.mark.parametrize("lines", [
    ["| a | b |"],                                  # no delimiter row
    ["| a | b |", "| x | y |"],                     # the second row is not a delimiter
    ["| a | b |", "|---|---|---|", "| x | y |"],    # delimiter cells do not match the header
    ["| " + "w" * 30 + " | " + "v" * 30 + " |", "|---|---|"],   # too wide
])
def test_not_a_table_or_not_fitting_is_none(lines):
    assert table_rows(lines, 40) is None


@pytest.mark.parametrize("color", [True, False])
def test_rows_that_are_not_a_table_stay_as_written(color):
    raw, s = draw(["| a |\n| b |\nend\n"], color=color)
    assert shown(s) == ["| a |", "| b |", "end"]
    assert ("\x1b" in raw) is color


def test_a_table_taller_than_the_screen_is_left_as_drawn():
    lines = ["| h |", "|---|"] + [f"| {i} |" for i in range(6)]
    raw, s = draw(["\n".join(lines) + "\nafter\n"], rows=5)
    assert "│" not in raw and s.text()[-2:] == ["after", ""]


# -- the renderer ----------------------------------------------------------------------------

def test_a_quote_without_a_space_is_drawn_with_one():
    raw, s = draw([">quoted\n>\n"], color=False)
    assert raw == "│ quoted\n\r│\n"        # the lone ">" was held, then drawn
    assert shown(s) == ["│ quoted", "│"]


def test_a_bullet_that_turns_into_a_rule_is_drawn_as_a_rule():
    # "- " is a bullet (•) until the third dash makes the line a rule: the
    # first row would change mid-line, so it waits for the line's end
    raw, s = draw(["-" + " " * 25 + "- -\nnext\n"])
    assert "•" in raw
    assert shown(s) == ["─" * 20, "next"]


def test_without_colour_a_rule_streamed_over_two_rows_is_left_as_drawn():
    # a carriage return reaches back over one row only
    raw, s = draw(["-" + " " * 25 + "- -\nnext\n"], color=False)
    assert raw == "•" + " " * 19 + "\n     - \nnext\n"


@pytest.mark.parametrize("color", [True, False])
def test_a_rule_streamed_taller_than_it_ends_and_than_the_screen_is_left_as_drawn(color):
    # streamed as plain dashes over 3 rows; at its end a one-row rule, but
    # the screen (3 rows) is too short to reach back over what was drawn
    line = "- " * 25
    raw, s = draw([line.rstrip() + "\n"], rows=3, color=color)
    assert "─" not in raw
    assert raw.endswith("-\n")


def test_thinking_then_text_and_back_on_a_terminal():
    raw, s = draw([("thinking", "hmm\n"), "answer\n", ("thinking", "more")], color=False)
    assert shown(s) == ["thinking: hmm", "answer", "thinking: more"]
    assert s.text()[1] == ""            # a blank line after the thinking


def test_switching_without_a_terminal_starts_the_other_on_a_new_line():
    out = io.StringIO()
    r = Renderer(out, tty=False, color=True)
    r.thinking("hmm")
    r.text("answer\n")
    r.thinking("x\n")
    r.end()
    r.end()
    assert out.getvalue() == "hmm\nanswer\nx\n"


def test_end_of_a_reply_not_on_a_terminal_adds_only_a_missing_newline():
    out = io.StringIO()
    r = Renderer(out, tty=False, color=False)
    r.end()
    r.text("")
    r.end()
    assert out.getvalue() == ""                 # nothing said: nothing added
    r.text("no newline")
    r.end()
    assert out.getvalue() == "no newline\n"


def test_a_closed_stream_is_not_an_error_at_the_end(tmp_path):
    out = open(tmp_path / "out", "w")
    r = Renderer(out, tty=False, color=False)
    r.text("said\n")
    out.close()
    r.end()
    assert r.mode is None and (tmp_path / "out").read_text() == "said\n"
