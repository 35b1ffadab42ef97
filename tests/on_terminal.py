"""A command's stdout on a real pseudo-terminal, and text that must never
act on one (C1 controls, bidi overrides and isolates, escape sequences)."""
import os
import pty
import subprocess


EVIL = "8-bit CSI \x9b2J, bidi \u202eexe.txt\u202c, isolate \u2066x\u2069, ESC \x1b]0;title\x07, DEL \x7f"


def on_a_terminal(argv):
    """Run argv with its stdout on a pseudo-terminal; what the terminal got."""
    leader, follower = pty.openpty()
    try:
        p = subprocess.Popen(argv, stdout=follower, stderr=subprocess.PIPE)
        os.close(follower)
        out = drain(leader)
        assert p.wait(30) == 0, p.stderr.read()
    finally:
        os.close(leader)
    return out


def drain(leader, out=b""):
    """out and what the terminal of `leader` gets until its last writer closes it."""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:                              # EIO: the writer closed the terminal
            return out
        if not chunk:
            return out
        out += chunk


RAW = [c.encode() for c in "\x9b\u202e\u202c\u2066\u2069\x1b\x07\x7f"]
