"""panto-log import --all on a terminal says how far it is on stderr (a
line redrawn in place), erased before any other line and at the end; on
anything but a terminal, stderr holds the run's lines alone."""
import os
import pty
import shutil
import signal
import subprocess

from conftest import log
from fixtures.records import B_SID, CC_SID, cc_path, cc_session, write
from on_terminal import drain


def _sources(home):
    """Two transcripts, and a FIFO where a sub-agent's would be (a warning during the run)."""
    write(cc_path(home), cc_session(n=3))
    write(cc_path(home, B_SID, "-home-u-other"), cc_session(B_SID, n=2, cwd="/home/u/other"))
    sub = os.path.join(os.path.dirname(cc_path(home)), CC_SID, "subagents")
    os.makedirs(sub)
    fifo = os.path.join(sub, "agent-a1b2c3.jsonl")
    os.mkfifo(fifo, 0o600)
    return fifo


def _stderr_on_a_terminal(*args, interrupt_at=None):
    """(exit status, what the terminal got) of panto-log with its stderr on a
    pseudo-terminal; interrupt_at: SIGINT it once the terminal got these bytes."""
    leader, follower = pty.openpty()
    try:
        p = subprocess.Popen([shutil.which("panto-log"), *args], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=follower)
        os.close(follower)
        out = b""
        if interrupt_at is not None:
            while interrupt_at not in out:
                chunk = os.read(leader, 65536)
                assert chunk, out
                out += chunk
            p.send_signal(signal.SIGINT)
        out = drain(leader, out)
        return p.wait(60), out.decode()
    finally:
        os.close(leader)


def _shown(text):
    """The lines a terminal shows for text (a carriage return goes back to the
    first column, a backspace one column, each character replaces what was
    there), and the last row, not ended yet."""
    lines, row, col = [], [], 0
    for ch in text:
        if ch == "\n":
            lines.append("".join(row).rstrip())
            row, col = [], 0
        elif ch == "\r":
            col = 0
        elif ch == "\b":
            col = max(0, col - 1)
        else:
            row[col:col + 1] = [ch]
            col += 1
    return lines, "".join(row).rstrip()


def test_how_far_it_is_is_drawn_then_erased_before_every_line(agents_home):
    fifo = _sources(agents_home)
    status, out = _stderr_on_a_terminal("import", "--all")
    assert status == 1, out         # the FIFO is a source that failed
    # drawn at the start, and again once the warning has taken the line (no wait between)
    assert "looking for sessions " in out and "importing 0/2 sessions " in out, out
    lines, last = _shown(out)
    assert lines == [f"panto-log: {fifo}: not a regular file (a FIFO's open would wait for a writer); left out",
                     "panto-log: 2 sessions (2 new, 0 grown, 0 unchanged), added 10 entries; skipped: split line 5; "
                     "1 source failed"], lines
    assert last == ""               # nothing left drawn after the summary


def test_nothing_of_it_where_stderr_is_not_a_terminal(agents_home):
    fifo = _sources(agents_home)
    p = log("import", "--all")
    assert p.returncode == 1
    assert p.stderr.decode().splitlines() == [
        f"panto-log: {fifo}: not a regular file (a FIFO's open would wait for a writer); left out",
        "panto-log: 2 sessions (2 new, 0 grown, 0 unchanged), added 10 entries; skipped: split line 5; "
        "1 source failed"]


def test_ctrl_c_leaves_the_terminal_clean(agents_home):
    """Ctrl-C while a large source is read (or just after the run ended):
    the line of how far it is is erased before the last line, whichever it is."""
    write(cc_path(agents_home), cc_session(n=40000))       # ~70 MB: read here, ticking, for a second or two
    status, out = _stderr_on_a_terminal("import", "--all", interrupt_at=b"importing 0/1 sessions")
    lines, last = _shown(out)
    assert last == "" and len(lines) == 1, (lines, last)
    if status == 130:
        assert lines == ["panto-log: interrupted"]
    else:                           # (the run had ended as the signal came)
        assert status == 0 and lines[0].startswith("panto-log: 1 session (1 new, "), lines
