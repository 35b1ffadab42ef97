"""pantolib.terminal on its own: neutralizing (visible, visible_line,
visible_json), widths, the colour decision, the key reader on a real pipe
and pty, the line editor's keys on a real pty, and the prompt's layout."""
import fcntl
import os
import struct
import time
import termios
import tty as tty_mod

import orjson
import pytest

from pantolib import editor, terminal
from pantolib.editor import LineEditor, _Line
from pantolib.terminal import Edit, Keys


# -- neutralizing ----------------------------------------------------------------------------

@pytest.mark.parametrize("raw,want", [
    ("plain text\n\tkept", "plain text\n\tkept"),
    ("\x1b[2Jgone", "^[[2Jgone"),
    ("a\rb", "a^Mb"),
    ("\x00\x07", "^@^G"),
    ("del\x7f", "del^?"),
    ("csi\x9b31m", "csi\\x9b31m"),
    ("\x85", "\\x85"),
    ("abc\u202edef", "abc<U+202E>def"),
    ("\u2028\u2066\u200f\u061c", "<U+2028><U+2066><U+200F><U+061C>"),
    ("emoji \U0001F468\u200d\U0001F469 stays", "emoji \U0001F468\u200d\U0001F469 stays"),
])
def test_visible_shows_every_control_and_keeps_newline_and_tab(raw, want):
    assert terminal.visible(raw) == want


def test_every_character_visible_shows_is_one_isprintable_refuses():
    """visible() passes printable text on without its pattern: that is right only
    if no character the pattern shows is printable. Checked over all of Unicode."""
    import re

    unsafe = re.compile(terminal._UNSAFE)
    shown = [c for c in map(chr, range(0x110000)) if unsafe.match(c)]
    assert len(shown) > 60 and not [c for c in shown if c.isprintable()]
    for text in ("plain", "caf\u00e9 \U0001f600", "tab\there", "a\u200db", "x\u202ey"):
        assert terminal.visible(text) == unsafe.sub(terminal._show, text)


def test_visible_line_puts_everything_on_one_line():
    assert terminal.visible_line("a\nb\tc\x1bd") == "a b c^[d"


def test_visible_json_escapes_what_visible_would_show_and_stays_the_same_json():
    obj = {"t": "x\x9b2J\u202e\x1b", "n": [1, "ok"]}
    data = orjson.dumps(obj) + b"\n" + orjson.dumps({"b": "\u2029"}) + b"\n"
    out = terminal.visible_json(data)
    assert b"\\u009b" in out and b"\\u202e" in out and b"\\u2029" in out
    assert terminal.visible(out.decode()) == out.decode()       # nothing left to neutralize
    lines = out.split(b"\n")
    assert [orjson.loads(x) for x in lines[:2]] == [obj, {"b": "\u2029"}] and lines[2] == b""


def test_visible_json_gives_clean_data_back_as_it_was():
    data = orjson.dumps({"a": "é ✓"})
    assert terminal.visible_json(data) is data


# -- colour ---------------------------------------------------------------------------------

@pytest.mark.parametrize("env,want", [({}, False), ({"NO_COLOR": ""}, False), ({"NO_COLOR": "1"}, True),
                                      ({"NO_COLOR": "0"}, True)])
def test_no_color_is_any_non_empty_value(env, want):
    assert terminal.no_color(env) is want


def test_no_color_reads_the_process_environment_by_default(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "yes")
    assert terminal.no_color() is True
    monkeypatch.delenv("NO_COLOR")
    assert terminal.no_color() is False


@pytest.fixture
def tty():
    """A real pty in raw mode: (master fd, slave fd), closed after. Keys
    written to the master before the editor reads are neither echoed nor
    taken by the line discipline (^C, ^D), and output is not translated."""
    master, slave = os.openpty()
    tty_mod.setraw(slave)
    yield master, slave
    for fd in (master, slave):
        try:
            os.close(fd)
        except OSError:
            pass


def test_styled_only_on_a_terminal_without_no_color(tty, tmp_path):
    with open(tty[1], "w", closefd=False) as term:
        assert terminal.styled(term, {}) is True
        assert terminal.styled(term, {"NO_COLOR": "1"}) is False
    with open(tmp_path / "f", "w") as f:
        assert terminal.styled(f, {}) is False
    f.close()
    assert terminal.styled(f, {}) is False             # closed: ValueError
    assert terminal.styled(object(), {}) is False      # no isatty at all


# -- widths ---------------------------------------------------------------------------------

@pytest.mark.parametrize("ch,w", [("a", 1), ("\u0301", 0), ("\u200d", 0), ("\u20dd", 0), ("漢", 2),
                                  ("\uff21", 2), ("é", 1), ("\u0416", 1)])
def test_cell_width(ch, w):
    assert terminal.cell_width(ch) == w


def test_text_width_counts_columns_not_characters():
    assert terminal.text_width("abc") == 3
    assert terminal.text_width("漢字a") == 5
    assert terminal.text_width("e\u0301") == 1
    assert terminal.styled_width("\x1b[1m\x1b[36mpanto\x1b[0m> ") == 7


def set_size(fd, cols, rows):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def test_size_of_a_terminal_and_its_fallbacks(tty, tmp_path):
    master, slave = tty
    set_size(slave, 100, 40)
    assert terminal.size(slave) == (100, 40)
    set_size(slave, 0, 0)                      # never set: unknown, not tiny
    assert terminal.size(slave) == (80, 24)
    set_size(slave, 3, 1)
    assert terminal.size(slave) == (10, 3)
    with open(tmp_path / "f", "w") as f:
        assert terminal.size(f.fileno()) == (80, 24)


# -- keys -----------------------------------------------------------------------------------

@pytest.fixture
def pipe():
    r, w = os.pipe()
    yield r, w
    for fd in (r, w):
        try:
            os.close(fd)
        except OSError:
            pass


@pytest.mark.parametrize("typed,keys", [
    (b"ab", ["a", "b"]),
    (b"\x1b[A\x1b[B\x1b[C\x1b[D", ["up", "down", "right", "left"]),
    (b"\x1bOA\x1bOH\x1bOF", ["up", "home", "end"]),
    (b"\x1b[1~\x1b[4~\x1b[3~", ["home", "end", "delete"]),
    (b"\x1b[1;5D\x1b[1;3C", ["word-left", "word-right"]),
    (b"\x1bb\x1bf\x1b\x7f\x1bz", ["word-left", "word-right", "word-rubout", "unknown"]),
    (b"\x1b[99Zx", ["unknown", "x"]),
    ("é漢".encode(), ["é", "漢"]),
    (b"\x1b[200~one\r\ntwo\rthree\x1b[201~!", [("paste", "one\ntwo\nthree"), "!"]),
])
def test_keys_of_one_read(pipe, typed, keys):
    r, w = pipe
    os.write(w, typed)
    assert Keys(r).batch() == keys


def test_a_lone_esc_and_a_cut_sequence_are_taken_as_they_came(pipe):
    r, w = pipe
    k = Keys(r)
    os.write(w, b"\x1b")
    assert k.next() == "esc"
    os.write(w, b"\x1b[1;")
    assert k.next() == "unknown" and k.pending == ""


def test_a_paste_is_waited_for_until_its_end_mark(pipe):
    r, w = pipe
    k = Keys(r)
    k.feed(terminal.PASTE_START.encode() + b"half ")
    os.write(w, b"and the rest" + terminal.PASTE_END.encode())
    assert k.next() == ("paste", "half and the rest")


def test_keys_split_utf8_is_joined_and_a_timeout_is_false(pipe):
    r, w = pipe
    k = Keys(r)
    data = "漢".encode()
    k.feed(data[:1])
    assert k.pending == ""
    k.feed(data[1:])
    assert k.pending == "漢"
    assert k.more(0) is False


def test_end_of_input_is_edit_eof(pipe):
    r, w = pipe
    os.write(w, b"z")
    os.close(w)
    k = Keys(r)
    assert k.next() == "z"
    with pytest.raises(Edit) as e:
        k.next()
    assert e.value.how == "eof" and e.value.text == ""


def test_a_terminal_gone_is_the_end_of_input(tty):
    master, slave = tty
    k = Keys(master)
    os.close(slave)            # hang-up: reading the master gives EIO
    with pytest.raises(Edit) as e:
        k.more()
    assert e.value.how == "eof"


# -- terminal modes ------------------------------------------------------------------------

def test_keys_mode_raw_and_cbreak_and_restore():
    master, slave = os.openpty()
    before = termios.tcgetattr(slave)
    old = terminal.keys_mode(slave, raw=True)
    now = termios.tcgetattr(slave)
    assert old == before
    assert not now[3] & (termios.ECHO | termios.ICANON | termios.ISIG)
    assert not now[0] & termios.ICRNL
    terminal.restore_mode(slave, old)
    assert termios.tcgetattr(slave) == before
    type_keys((master, slave), b"typed before\n")
    old = terminal.keys_mode(slave, flush=True)
    now = termios.tcgetattr(slave)
    assert not now[3] & (termios.ECHO | termios.ICANON) and now[3] & termios.ISIG
    assert Keys(slave).more(0) is False                # what was typed is dropped
    terminal.restore_mode(slave, old, drain=True)
    assert termios.tcgetattr(slave) == before
    os.close(master)
    os.close(slave)


def test_keys_mode_needs_a_terminal_and_restore_mode_forgives(pipe):
    r, w = pipe
    with pytest.raises(termios.error):
        terminal.keys_mode(r)
    terminal.restore_mode(r, [0] * 7)      # not a terminal: nothing happens
    os.close(w)
    terminal.restore_mode(w, [0] * 7)      # closed: nothing happens either


# -- the text being edited -----------------------------------------------------------------

def test_line_moves_and_edits():
    line = _Line("one two\nthree four", [])
    assert line.pos == len(line.text)
    line.home()
    assert line.pos == 8
    line.left()
    line.left()
    assert line.pos == 6
    line.end()
    assert line.pos == 7
    line.right()
    line.right()
    assert line.pos == 9
    line.home()
    line.word_right()
    assert line.pos == 13
    line.word_right()
    assert line.pos == len(line.text)
    line.right()
    assert line.pos == len(line.text)
    line.word_left()
    assert line.pos == 14
    line.rubout_word()
    assert (line.text, line.pos) == ("one two\nfour", 8)
    line.kill_to_end()
    assert (line.text, line.pos) == ("one two\n", 8)
    line.insert("x y")
    line.left()
    line.left()
    line.kill_to_start()
    assert (line.text, line.pos) == ("one two\n y", 8)
    line.home()
    line.left()
    line.left()
    line.left()
    line.kill_to_end()
    assert line.text == "one t\n y"
    line.pos = 0
    line.left()
    line.backspace()
    assert (line.text, line.pos) == ("one t\n y", 0)
    line.delete()
    assert line.text == "ne t\n y"
    line.end()
    line.backspace()
    assert (line.text, line.pos) == ("ne \n y", 3)


def test_line_continued_only_at_the_end_after_a_backslash():
    line = _Line("a\\", [])
    assert line.continued() is True and line.text == "a\n"
    assert line.continued() is False
    line = _Line("a\\b", [])
    line.left()
    assert line.continued() is False and line.text == "a\\b"


def test_line_history_keeps_edits_while_the_prompt_lasts():
    hist = ["first", "second"]
    line = _Line("draft", hist)
    line.newer()
    assert line.text == "draft"
    line.older()
    assert (line.text, line.pos) == ("second", 6)
    line.insert("!")
    line.older()
    line.older()
    assert line.text == "first"
    line.newer()
    assert line.text == "second!"
    line.newer()
    assert line.text == "draft"
    assert hist == ["first", "second"]


# -- the line editor on a real pty --------------------------------------------------------

def queued(fd):
    """Bytes waiting to be read on a terminal fd."""
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def type_keys(tty, data):
    """Keys typed on the pty, once all of them wait on its slave (the kernel
    hands them over asynchronously): one read then takes them all."""
    master, slave = tty
    os.write(master, data)
    deadline = time.monotonic() + 10
    while queued(slave) < len(data):
        assert time.monotonic() < deadline, "the keys never reached the terminal"
        time.sleep(0.001)


def read_until(fd, done):
    """What the pty master reads until done(text) is true (or 10 s pass)."""
    import select

    out = b""
    deadline = time.monotonic() + 10
    while not done(out.decode("utf-8", "replace")):
        left = deadline - time.monotonic()
        assert left > 0, f"waited for more than {out!r}"
        if select.select([fd], [], [], left)[0]:
            out += os.read(fd, 65536)
    return out.decode("utf-8", "replace")


def drain(fd):
    """All a pipe holds now (what was written to it is all there)."""
    import select

    out = b""
    while select.select([fd], [], [], 0)[0]:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        out += data
    return out.decode("utf-8", "replace")


@pytest.fixture
def out():
    """A pipe the editor draws on: (read end, write end)."""
    r, w = os.pipe()
    yield r, w
    os.close(r)
    os.close(w)


def edit(tty, out, typed, prompt="> ", **kw):
    """What LineEditor.read on the pty gives for the keys typed (and the
    editor, and what it drew on the pipe out)."""
    master, slave = tty
    ed = LineEditor(slave, out[1], **kw)
    type_keys(tty, typed)
    try:
        got = ed.read(prompt)
    except Edit as e:
        got = e
    return got, ed, drain(out[0])


@pytest.mark.parametrize("typed,want", [
    (b"hello\r", "hello"),
    (b"hello\n", "hello"),
    (b"helo\x1b[D\x02\x06l\r", "hello"),
    (b"world\x01hello \x05!\r", "hello world!"),
    (b"abc\x08\x7fX\r", "aX"),
    (b"abc\x01\x1b[3~\x04\r", "c"),
    (b"one two\x17\x17zero\r", "zero"),
    (b"one two\x1b\x7fthree\r", "one three"),
    (b"keep cut\x1b[1;5D\x0b\x15gone\r", "gone"),
    (b"ab\x1bbX\x1bfY\r", "XabY"),
    (b"line one\\\rline two\r", "line one\nline two"),
    (b"a\x1b[200~pasted\rtext\r\x1b[201~b\r", "apasted\ntext\nb"),
    (b"\x07\x1b[99Zx\r", "x"),
    (b"\tx\r", "\tx"),
])
def test_editor_keys(tty, out, typed, want):
    got, ed, drawn = edit(tty, out, typed)
    assert got == want
    assert drawn.startswith("\r> ") and drawn.endswith("\r\n")


def test_editor_history_up_and_down(tty, out):
    got, ed, _ = edit(tty, out, b"\x1b[A\x1b[A!\x0e\x10\r", history=["old", "newest"])
    assert got == "old!"
    got, ed, _ = edit(tty, out, b"\x1b[A\x1b[B\x1b[Bx\r", history=["old"])
    assert got == "x"


def test_editor_without_history_ignores_up(tty, out):
    master, slave = tty
    ed = LineEditor(slave, out[1], history=["old"])
    type_keys(tty, b"\x1b[Anew\r")
    assert ed.read("> ", history=False) == "new"


def test_editor_initial_text_and_the_terminal_mode_given_back(tty, out):
    master, slave = tty
    before = termios.tcgetattr(slave)
    ed = LineEditor(slave, out[1])
    type_keys(tty, b" more\r")
    assert ed.read("> ", initial="some") == "some more"
    assert termios.tcgetattr(slave) == before


def test_ctrl_c_abandons_the_text(tty, out):
    got, ed, drawn = edit(tty, out, b"half\x03")
    assert isinstance(got, Edit) and (got.how, got.text) == ("interrupt", "half")
    assert "half^C\r\n" in drawn
    got, ed, drawn = edit(tty, out, b"\x03")
    assert (got.how, got.text) == ("interrupt", "")
    assert "^C" not in drawn


def test_ctrl_d_is_eof_at_an_empty_prompt_only(tty, out):
    got, ed, _ = edit(tty, out, b"\x04")
    assert isinstance(got, Edit) and got.how == "eof"
    got, ed, _ = edit(tty, out, b"ab\x01\x04\r")
    assert got == "b"


def test_the_end_of_input_at_a_prompt_is_eof(tty, out):
    master, slave = tty
    ed = LineEditor(master, out[1])
    os.close(slave)
    with pytest.raises(Edit) as e:
        ed.read("> ")
    assert e.value.how == "eof"


def test_no_terminal_is_eof(pipe):
    r, w = pipe
    ed = LineEditor(r, w)
    with pytest.raises(Edit) as e:
        ed.read("> ")
    assert e.value.how == "eof"


def test_ctrl_l_clears_the_screen_and_redraws(tty, out):
    got, ed, drawn = edit(tty, out, b"ab\x0c\r")
    assert got == "ab"
    assert "\x1b[H\x1b[2J\r> ab" in drawn


def test_keys_after_enter_wait_for_the_next_prompt_and_a_ctrl_c_among_them_is_found(tty, out):
    master, slave = tty
    ed = LineEditor(slave, out[1])
    type_keys(tty, b"first\rsecond\x03third\r")
    assert ed.read("> ") == "first"
    assert ed.pending == "second\x03third\r"
    assert ed.interrupted_ahead() is True
    assert ed.pending == "third\r"
    assert ed.interrupted_ahead() is False
    assert ed.read("> ") == "third"
    ed.pending = "typed ahead\r"
    assert ed.read("> ") == "typed ahead"
    assert ed.decoder is ed.keys.decoder


def test_tab_completes_a_command(tty, out):
    words = ["/model", "/models", "/quit", "/retry"]
    got, ed, _ = edit(tty, out, b"/q\t\r", words=words)
    assert got == "/quit "
    got, ed, _ = edit(tty, out, b"/r\tx\r", words=words)
    assert got == "/retry x"
    got, ed, drawn = edit(tty, out, b"/mo\t\r", words=words)        # common prefix: /model
    assert got == "/model"
    got, ed, drawn = edit(tty, out, b"/model\t\r", words=words)     # two choices: shown
    assert got == "/model" and "/model  /models\r\n" in drawn
    got, ed, _ = edit(tty, out, b"/zz\t\r", words=words)
    assert got == "/zz"
    got, ed, _ = edit(tty, out, b"/q x\t\r", words=words)          # not a command: a tab
    assert got == "/q x\t"


def test_a_paste_without_brackets_is_drawn_once(tty, out):
    master, slave = tty
    ed = LineEditor(slave, out[1])
    type_keys(tty, b"abcdefgh\r")
    assert ed.read("> ") == "abcdefgh"
    drawn = drain(out[0])
    assert drawn.count("> ") == 2           # the first draw, and the last (the whole text)


# -- layout ---------------------------------------------------------------------------------

def test_layout_of_a_short_prompt():
    parts, rows, cursor = editor._layout("> ", "hi\nthere", 8, 40, 10)
    assert parts == ["> hi", "  there"] and rows == 2 and cursor == (1, 7)


def test_layout_wraps_and_counts_rows():
    parts, rows, cursor = editor._layout("> ", "x" * 25, 25, 10, 10)
    assert parts == ["> " + "x" * 25] and rows == 3 and cursor == (2, 7)


def test_layout_leaves_out_lines_that_do_not_fit():
    text = "\n".join(f"l{i}" for i in range(10))
    pos = text.index("l5")
    parts, rows, cursor = editor._layout("> ", text, pos, 40, 3)
    assert parts[0] == "  … 4 more lines above"
    assert parts[1:4] == ["  l4", "  l5", "  l6"]
    assert parts[4] == "  … 3 more lines below"
    assert rows == 5 and cursor == (2, 2)
    parts, rows, cursor = editor._layout("> ", "a\nb", 0, 40, 1)
    assert parts == ["> a", "  … 1 more line below"]


def test_layout_shows_tabs_and_controls_while_editing():
    parts, rows, cursor = editor._layout("> ", "\tx\x1b", 3, 40, 10)
    assert parts == ["> " + "    x^["] and cursor == (0, 9)


def test_back_to_cursor():
    assert editor._back_to_cursor("> abc", 1, 40, 0, 5) == ""
    assert editor._back_to_cursor("> abc", 1, 40, 0, 2) == "\r\x1b[2C"
    assert editor._back_to_cursor("  x", 3, 40, 0, 0) == "\r\x1b[2A"
    assert editor._back_to_cursor("x" * 10, 1, 10, 1, 0) == " \r"     # the pending wrap


# -- spinner --------------------------------------------------------------------------------

def test_spinner_on_a_terminal_draws_and_erases(tty):
    master, slave = tty
    with open(slave, "w", closefd=False) as term:
        sp = terminal.Spinner(term, "thinking ")
        sp.tick()
        assert sp.shown > 0
        drawn = read_until(master, lambda t: t.endswith("s"))
        assert drawn.startswith("\r⠋ thinking ") and drawn.endswith("s")
        sp.restart("working ")
        assert sp.label == "working "
        sp.restart()
        assert sp.label == "working "
        sp.stop()
        assert sp.shown == 0
        erased = "\r" + " " * len(drawn[1:]) + "\r"
        assert read_until(master, lambda t: len(t) >= len(erased)) == erased
        sp.stop()                   # nothing drawn: nothing to erase
        term.write("|")
        term.flush()
        assert read_until(master, lambda t: "|" in t) == "|"
        sp.tick()
        sp.forget()
        assert sp.shown == 0


def test_spinner_elsewhere_draws_nothing(tmp_path):
    with open(tmp_path / "out", "w") as f:
        sp = terminal.Spinner(f)
        sp.tick()
        assert sp.shown == 0
    assert (tmp_path / "out").read_text() == ""
    assert terminal.Spinner(object()).on is False


def test_spinner_stops_drawing_when_the_stream_fails(tty):
    master, slave = tty
    term = open(slave, "w", closefd=False)
    sp = terminal.Spinner(term)
    term.close()
    sp.tick()
    assert sp.on is False


def test_the_rest_of_a_sequence_is_waited_for_briefly(pipe):
    r, w = pipe
    k = Keys(r)
    k.feed(b"\x1b[")
    os.write(w, b"Ax")
    assert k.next() == "up" and k.next() == "x"
    k.feed(b"\x1b[")
    assert k.next() == "unknown" and k.pending == ""


def test_enter_reads_the_keys_already_typed_after_it(tty, pipe, out):
    master, slave = tty
    ed = LineEditor(slave, out[1])
    ed.prompt, ed.line = "> ", _Line("done", [])
    type_keys(tty, b"\x03next")
    assert ed._enter() is True
    assert ed.pending == "\x03next"
    assert drain(out[0]) == "\r\x1b[J> done\r\n"
    r, w = pipe
    os.close(w)
    ed = LineEditor(r, out[1])                  # the end of input after Enter: left for the next prompt
    ed.prompt, ed.line = "> ", _Line("done", [])
    assert ed._enter() is True and ed.pending == ""
    ed.write("text\n")
    assert drain(out[0]).endswith("text\n")


def test_a_long_paste_without_brackets_is_drawn_while_more_than_4096_keys_wait(tty, tmp_path):
    master, slave = tty
    with open(tmp_path / "screen", "wb") as out:
        ed = LineEditor(slave, out.fileno())
        ed.pending = "y" * 4200 + "\r"
        assert ed.read("> ") == "y" * 4200
    drawn = (tmp_path / "screen").read_text()
    assert drawn.count("\x1b[J") == 104 + 1       # while 4200..4097 keys wait, then the last
