"""terminal.Keys, the one reader of the person's keys, on a real pseudo-terminal."""
import os
import pty
import termios
import threading

import pytest

from pantolib import terminal
from pantolib.terminal import PASTE_END, PASTE_START


@pytest.fixture
def tty():
    """(master, slave) of a pty whose slave is in the prompt's raw mode."""
    master, slave = pty.openpty()
    old = terminal.keys_mode(slave, raw=True)
    yield master, slave
    terminal.restore_mode(slave, old)
    for fd in (master, slave):
        try:
            os.close(fd)
        except OSError:
            pass


def keys_of(tty, data, n):
    master, slave = tty
    keys = terminal.Keys(slave)
    os.write(master, data)
    got = [keys.next() for _ in range(n)]
    assert keys.pending == ""
    return got


def test_characters_and_named_keys(tty):
    data = "a\x1b[A\x1bOB\x1b[1;5C\x1b[1;3D\x1bOH\x1b[4~\x1b[3~é中\r\x03".encode()
    assert keys_of(tty, data, 12) == ["a", "up", "down", "word-right", "word-left", "home", "end", "delete",
                                      "é", "中", "\r", "\x03"]


def test_alt_keys_and_sequences_without_a_name(tty):
    data = b"\x1bb\x1bf\x1b\x7f\x1bx\x1b[15~\x1bOP"
    assert keys_of(tty, data, 6) == ["word-left", "word-right", "word-rubout", "unknown", "unknown", "unknown"]


def test_esc_alone_is_esc(tty):
    assert keys_of(tty, b"\x1b", 1) == ["esc"]


def test_a_bracketed_paste_is_one_key_whatever_it_holds(tty):
    data = (PASTE_START + "one\r\ntwo\rthree\x1b[A\x03" + PASTE_END + "z").encode()
    assert keys_of(tty, data, 2) == [("paste", "one\ntwo\nthree\x1b[A\x03"), "z"]


def test_a_paste_arriving_in_pieces_waits_for_its_end(tty):
    master, slave = tty
    keys = terminal.Keys(slave)
    os.write(master, (PASTE_START + "ab").encode())
    got = []
    reader = threading.Thread(target=lambda: got.append(keys.next()))
    reader.start()
    os.write(master, b"c\x1b[20")        # the end mark itself cut in two
    os.write(master, b"1~d")
    reader.join(30)
    assert got == [("paste", "abc")]
    assert keys.next() == "d"


def test_a_batch_is_what_one_read_brought(tty):
    master, slave = tty
    keys = terminal.Keys(slave)
    for data, want in [(b"y", ["y"]), (b"yy", ["y", "y"]), (b"\x1b[A", ["up"]),
                       ((PASTE_START + "x" + PASTE_END + "n").encode(), [("paste", "x"), "n"])]:
        os.write(master, data)
        assert keys.batch() == want


def test_the_end_of_input_is_eof(tty):
    master, slave = tty
    keys = terminal.Keys(slave)
    os.close(master)
    with pytest.raises(terminal.Edit) as e:
        keys.next()
    assert e.value.how == "eof"


def test_keys_mode_raw_cbreak_and_back():
    master, slave = pty.openpty()
    try:
        before = termios.tcgetattr(slave)
        old = terminal.keys_mode(slave, raw=True)
        lflag = termios.tcgetattr(slave)[3]
        assert not lflag & (termios.ICANON | termios.ECHO | termios.ISIG)
        terminal.restore_mode(slave, old)
        assert termios.tcgetattr(slave) == before
        old = terminal.keys_mode(slave)          # cbreak: Ctrl-C stays a signal
        lflag = termios.tcgetattr(slave)[3]
        assert not lflag & (termios.ICANON | termios.ECHO) and lflag & termios.ISIG
        terminal.restore_mode(slave, old, drain=True)
        assert termios.tcgetattr(slave) == before
    finally:
        os.close(master)
        os.close(slave)
    fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    try:
        with pytest.raises(termios.error):      # not a terminal
            terminal.keys_mode(fd)
    finally:
        os.close(fd)


def _readable(fd):
    import select

    return bool(select.select([fd], [], [], 2)[0])


def test_drain_takes_what_waits_and_never_blocks(tty):
    master, slave = tty
    keys = terminal.Keys(slave)
    keys.drain()
    assert keys.pending == ""               # nothing typed: back at once
    os.write(master, b"ab\x03")
    assert _readable(slave)
    keys.drain()
    assert keys.pending == "ab\x03"


def test_a_ctrl_c_typed_while_raw_is_found_after_the_line_mode_is_back(tty):
    """Enter, then Ctrl-C before the prompt gives the terminal its line mode
    back: raw, it is a key that nobody read. The editor finds it afterwards
    (interrupted_ahead) and the turn is cancelled; the keys typed after it
    still wait for the next prompt."""
    from pantolib.editor import LineEditor

    master, slave = tty
    editor = LineEditor(fd_in=slave, fd_out=os.open(os.devnull, os.O_WRONLY))
    os.write(master, b"\x03next")           # in raw mode: bytes in the queue, no signal
    assert _readable(slave)
    cooked = termios.tcgetattr(slave)
    cooked[3] |= termios.ICANON | termios.ISIG | termios.ECHO
    termios.tcsetattr(slave, termios.TCSANOW, cooked)   # the turn's mode, as restore_mode gives it
    assert editor.interrupted_ahead() is True
    assert editor.pending == "next"
    assert editor.interrupted_ahead() is False
