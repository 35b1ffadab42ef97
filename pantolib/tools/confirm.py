"""Whether a call may run: --yes, an "always" allowance, or one key on the terminal.

The question is asked on /dev/tty (stdin is the stream). It cannot be
answered by accident: keys typed before it appears are discarded, it reads
one key in cbreak mode (no Enter), and text that arrives as a paste
(bracketed paste, or several keys in one read) never answers it. The
terminal's mode is restored however the question ends, Ctrl-C included.

Allowances ("always") are kept in the file named by PANTO_ALLOW_FILE, one
a line: `bash:NAME` (a bash command name), `write`, `edit`. Without that
variable they last for this run only.
"""
import os
import re
import signal

from pantolib.tools import show
from pantolib.tools.common import outside, redact, resolve, secrets

# a bash command line holding one of these is more than one simple command
SEPARATORS = (";", "&", "|", "`", "$(", ">", "<", "\n")
# commands whose job is to run another command: "always" for them would allow anything
WRAPPERS = frozenset(
    "sh bash zsh dash ksh fish env sudo doas su eval exec command builtin xargs nohup nice ionice "
    "timeout time watch setsid stdbuf chroot unshare nsenter strace ltrace . source".split())
_NAME = re.compile(r"[A-Za-z0-9_./+:@%-]+")
_CSI = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]")
PASTE_ON, PASTE_OFF = "\033[?2004h", "\033[?2004l"
PASTE_START, PASTE_END = b"\x1b[200~", b"\x1b[201~"
YES, NO, ALWAYS, INTERRUPT = "y", "n", "a", "\x03"


def command_name(command):
    """The command name "always" may allow for a bash command line, or None
    when the line is not one simple command (then it is asked every time)."""
    if any(s in command for s in SEPARATORS):
        return None
    words = re.split(r"[ \t]+", command.strip(" \t"))
    first = words[0] if words else ""
    if not _NAME.fullmatch(first) or os.path.basename(first) in WRAPPERS or first in WRAPPERS:
        return None
    return first


class Allowances:
    """What "always" allowed: in PANTO_ALLOW_FILE when it is set, else in memory."""

    KEYS = re.compile(r"bash:[^\s]+|write|edit")

    def __init__(self, path=None):
        self.path = path or None
        self.keys = set()
        self.problem = None
        if self.path:
            try:
                with open(self.path, encoding="utf-8", errors="replace") as f:
                    self.keys = {k for k in (line.strip() for line in f) if self.KEYS.fullmatch(k)}
            except FileNotFoundError:
                pass
            except OSError as e:
                self.problem = f"cannot read the allowance file '{self.path}' ({e.strerror})"

    def __contains__(self, key):
        return key in self.keys

    def add(self, key):
        self.keys.add(key)
        if not self.path:
            return
        try:
            parent = os.path.dirname(self.path)
            if parent and not os.path.isdir(parent):
                os.makedirs(parent, mode=0o700, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, (key + "\n").encode())
            finally:
                os.close(fd)
        except OSError as e:
            self.problem = (f"cannot write the allowance file '{self.path}' ({e.strerror}): "
                            f"'{key}' is allowed for this run only")


def split_keys(data, in_paste):
    """(keys, rest, in_paste, pasted, ended): the key presses in bytes from
    the terminal. Text inside a bracketed paste is dropped (pasted: some was
    seen, ended: pastes that ended); escape sequences are dropped, a lone ESC
    is the key "esc"; rest is a sequence still arriving."""
    keys, i, pasted, ended = [], 0, in_paste, 0
    while i < len(data):
        if in_paste:
            j = data.find(PASTE_END, i)
            if j < 0:
                tail = data[i:]
                keep = next((n for n in range(min(len(tail), len(PASTE_END) - 1), 0, -1)
                             if PASTE_END.startswith(tail[-n:])), 0)
                return keys, tail[len(tail) - keep:] if keep else b"", True, True, ended
            i, in_paste, ended = j + len(PASTE_END), False, ended + 1
            continue
        if data[i] == 0x1b:
            m = _CSI.match(data, i)
            if m:
                if m.group() == PASTE_START:
                    in_paste = pasted = True
                i = m.end()
            elif i + 1 == len(data):
                keys.append("esc")
                i += 1
            elif data[i + 1:i + 2] == b"[":
                return keys, data[i:], False, pasted, ended    # a sequence still arriving
            else:
                i += 2 if data[i + 1:i + 2] != b"O" else 3   # Alt+key, SS3 keys
            continue
        b = data[i]
        if b < 0x80:
            keys.append(chr(b))
            i += 1
        else:   # one UTF-8 character: a key, but never an answer
            keys.append("other")
            i += 2 if b < 0xe0 else 3 if b < 0xf0 else 4
    return keys, b"", in_paste, pasted, ended


class Terminal:
    """The person's terminal, for questions: /dev/tty, read one key at a time."""

    def __init__(self, fd):
        self.fd = fd
        self.styled = self._styled()

    @classmethod
    def open(cls):
        import termios

        try:
            fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            termios.tcgetattr(fd)
        except (termios.error, OSError):
            os.close(fd)
            return None
        return cls(fd)

    def _styled(self):
        from pantolib import terminal

        return not terminal.no_color() and os.isatty(self.fd)

    def write(self, text):
        view = memoryview(text.encode("utf-8", "replace"))
        while view:
            view = view[os.write(self.fd, view):]

    def ask(self, question, choices):
        """One key among choices (or NO), pressed after the question appeared.
        Ctrl-C (or SIGTERM/SIGHUP) raises KeyboardInterrupt, the mode restored."""
        import termios

        old = termios.tcgetattr(self.fd)
        new = termios.tcgetattr(self.fd)
        new[3] &= ~(termios.ICANON | termios.ECHO)
        new[6][termios.VMIN], new[6][termios.VTIME] = 1, 0
        handlers = {}

        def stop(signum, frame):
            raise KeyboardInterrupt

        try:
            for sig in (signal.SIGTERM, signal.SIGHUP):
                handlers[sig] = signal.signal(sig, stop)
            termios.tcsetattr(self.fd, termios.TCSAFLUSH, new)
            termios.tcflush(self.fd, termios.TCIFLUSH)    # type-ahead never answers
            self.write(PASTE_ON + question)
            return self._key(choices)
        finally:
            try:
                self.write(PASTE_OFF)
            except OSError:
                pass
            try:
                termios.tcsetattr(self.fd, termios.TCSADRAIN, old)
            except (termios.error, OSError):
                pass
            for sig, handler in handlers.items():
                signal.signal(sig, handler)

    def _key(self, choices):
        rest, in_paste, told = b"", False, set()
        hint = "/".join(choices)

        def tell(why, text):
            if why not in told:
                told.add(why)
                self.write(f"\n{text} ")

        while True:
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:
                chunk = b""
            if not chunk:     # the terminal went away
                return None
            keys, rest, in_paste, pasted, ended = split_keys(rest + chunk, in_paste)
            if ended:     # said after every paste, so each attempt is seen to fail
                self.write(f"\n(pasted text does not answer: press one key, {hint}) ")
            if pasted:
                continue
            if len(keys) > 1:
                tell("many", f"(several keys at once do not answer: press one key, {hint})")
                continue
            if not keys:
                continue
            key = keys[0].lower()
            if key == INTERRUPT:
                raise KeyboardInterrupt
            if key in choices:
                return key
            if key in ("\r", "\n", "esc", "\x04"):
                return NO
            tell("other", f"(press {hint})")

    def close(self):
        try:
            os.close(self.fd)
        except OSError:
            pass


class Approver:
    """Decides whether a call may run: --yes, an allowance, or the person."""

    def __init__(self, yes=False, allow_file=None):
        self.yes = yes
        self.allowed = Allowances(allow_file)
        self.tty = None
        self.no_tty = False

    def _terminal(self):
        if self.tty is None and not self.no_tty:
            self.tty = Terminal.open()
            self.no_tty = self.tty is None
        return self.tty

    def _question(self, name, args, cwd):
        """(ask, key, where): whether to ask, what "always" would allow (None:
        not offered) and, for a path outside the working directory, where it is."""
        if name == "bash":
            cmd = command_name(str(args.get("command", "")))
            key = f"bash:{cmd}" if cmd else None
            return key is None or key not in self.allowed, key, None
        if name not in ("read", "write", "edit"):
            return False, None, None
        try:
            path = resolve(args.get("path") or "", cwd)
            out = outside(path, cwd)
        except (ValueError, OSError):
            return name != "read", None, None
        where = os.path.realpath(path) if out else None
        if name == "read":
            return out, None, where
        if out:
            return True, None, where
        return name not in self.allowed, name, None

    def decide(self, use, args, cwd):
        """(allowed, why not, asked): asked says the question showed the call."""
        name = use["name"]
        ask, key, where = self._question(name, args, cwd)
        if self.yes or not ask:
            return True, None, False
        tty = self._terminal()
        if tty is None:
            why = f"'{name}' needs confirmation" if where is None else \
                f"reading '{args.get('path')}' outside the working directory needs confirmation"
            return False, (f"not run: {why} and there is no terminal to ask "
                           "(the user can allow tools with panto-tool --yes)"), False
        question = redact(self._text(use, args, cwd, key, where, tty.styled), secrets())
        answer = tty.ask(question, (YES, NO, ALWAYS) if key else (YES, NO))
        if answer == YES:
            tty.write("yes\n")
            return True, None, True
        if answer == ALWAYS:
            tty.write("always\n")
            self.allowed.add(key)
            return True, None, True
        tty.write("no\n")
        if answer is None:
            return False, f"not run: the user did not answer the confirmation for '{name}'", True
        return False, f"not run: the user declined this '{name}' call", True

    @staticmethod
    def _text(use, args, cwd, key, where, styled):
        style = show.Style(styled)
        name = use["name"]
        rows = show.call(use, args, style, cwd=cwd, whole=True)
        if where is not None:
            rows.append(f"  {style(show.RED, 'outside the working directory:')} {show.visible_line(where)}")
            prompt = f"allow {name} outside the working directory? [y]es [n]o "
        elif key is None:
            prompt = f"allow {name}? [y]es [n]o (not one simple command: asked every time) "
        elif name == "bash":
            prompt = f"allow {name}? [y]es [n]o [a]lways for '{show.visible_line(key[5:])}' commands in this session "
        else:
            prompt = f"allow {name}? [y]es [n]o [a]lways allow {name} in this session "
        return "\n".join(rows) + "\n" + style(show.BOLD, prompt)

    def close(self):
        if self.tty is not None:
            self.tty.close()
