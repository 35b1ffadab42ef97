"""Whether a call may run: --yes, a rule (pantolib.permissions), or one key on the terminal.

The question is asked on /dev/tty (stdin is the stream). It cannot be
answered by accident: keys typed before it appears are discarded, it reads
one key in cbreak mode (no Enter), and text that arrives as a paste
(bracketed paste, or several keys in one read) never answers it. The
terminal's mode is restored however the question ends, Ctrl-C included.

The question is written where the calls are shown (stderr) when that is a
terminal, so it never comes before the output of the call before it; a
key that answers nothing is ignored and the answers are shown again.
"Always" takes a second step (`a`, then Enter; a capital `A` at once), so
a person typing a new prompt at a question never grants a rule.

"Always" adds this run's rule the question names (`[a]lways for 'git
status' in this run`), kept in memory and, when panto started this
panto-tool, reported to it on the channel it passed (--granted-fd), never in
a file. Nothing is approved blind: when a write's content or an edit's diff
is cut in the question, `v` shows all of it (a pager, or printed in full)
and the question is asked again.
"""
import os
import signal

from pantolib import files, permissions, terminal
from pantolib.terminal import PASTE_OFF, PASTE_ON
from pantolib.tools import show
from pantolib.secrets import env_keys
from pantolib.tools.common import outside, redact, resolve

YES, NO, ALWAYS, VIEW, INTERRUPT = "y", "n", "a", "v", "\x03"
DECLINE = "decline"     # Enter, Esc or Ctrl-D at the question: no, with no line for a reason


class Terminal:
    """The person's terminal, for questions: /dev/tty, read one key at a time.

    out: where the questions are written. The calls' display (stderr) when it
    is a terminal (in panto: a pseudo-terminal panto draws), so that a
    question can never be drawn before the output of the call before it;
    else /dev/tty itself."""

    def __init__(self, fd, out=None):
        self.fd = fd
        self.out = fd if out is None else out
        self.styled = self._styled()

    @classmethod
    def open(cls, out=None):
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
        return cls(fd, out)

    def _styled(self):
        return not terminal.no_color() and os.isatty(self.fd)

    def write(self, text):
        files.write_all(self.out, text.encode("utf-8", "replace"))

    def ask(self, question, choices, again, always=None):
        """One key among choices (or NO), pressed after the question appeared.
        again: the answers, written again after a key that answers nothing.
        always: the second step of ALWAYS (`a`, then Enter; a capital `A` at
        once), shown after `a`. Ctrl-C (or SIGTERM/SIGHUP: pantolib/signals.py)
        raises KeyboardInterrupt, the mode restored."""
        old, end = None, ""
        try:
            old = terminal.keys_mode(self.fd, flush=True)     # type-ahead never answers
            self.write(PASTE_ON + question)
            return self._key(terminal.Keys(self.fd), choices, again, always)
        except KeyboardInterrupt:
            end = "\n"     # the question's line ended: what comes next starts a line
            raise
        finally:
            try:
                self.write(PASTE_OFF + end)
            except OSError:
                pass
            if old is not None:
                terminal.restore_mode(self.fd, old, drain=True)

    def _press(self, keys):
        """One key pressed alone; else why nothing was: "paste" (a paste),
        "many" (several keys in one read: a paste without brackets), "" (no
        key press here: cursor keys and the like)."""
        got = keys.batch()
        if any(isinstance(k, tuple) for k in got):
            return "paste"
        got = [k for k in got if len(k) == 1 or k == "esc"]
        if len(got) != 1:
            return "many" if got else ""
        if got[0] == INTERRUPT:
            raise KeyboardInterrupt
        return got[0]

    def _key(self, keys, choices, again, always):
        hint = "/".join(choices)
        notes = {"paste": f"(pasted text does not answer: press one key, {hint})",
                 "many": f"(several keys at once do not answer: press one key, {hint})"}
        while True:
            try:
                pressed = self._press(keys)
                if pressed == "":
                    continue
                if pressed == "A" and ALWAYS in choices:
                    return ALWAYS
                key = pressed.lower() if len(pressed) == 1 and pressed.isascii() else pressed
                if key == ALWAYS and pressed == "a" and ALWAYS in choices:
                    self.write("\n" + always)
                    second = self._press(keys)
                    if second in ("\r", "\n"):
                        return ALWAYS
                    pressed = None      # anything else: back to the question
                elif key in choices:
                    return key
                elif key in ("\r", "\n", "esc", "\x04"):
                    return DECLINE
            except terminal.Edit:     # the terminal went away
                return None
            # a key that answers nothing: ignored, the answers shown again
            self.write("\n" + notes.get(pressed, f"(press {hint})") + " " + again)

    def line(self, prompt):
        """A line typed after prompt (Enter ends it; "" for Enter alone, Esc or
        Ctrl-D), echoed where the question is written so that it follows it on
        the screen; Backspace and Ctrl-U edit it, a paste is part of it (its
        line ends made spaces). Ctrl-C raises KeyboardInterrupt."""
        old, text, end = None, [], ""
        try:
            old = terminal.keys_mode(self.fd)       # no flush: what is typed after `n` is the line
            self.write(prompt)
            keys = terminal.Keys(self.fd)
            while True:
                try:
                    got = keys.batch()
                except terminal.Edit:
                    return ""
                for k in got:
                    if isinstance(k, tuple):
                        k = " ".join(k[1].split("\n"))
                    elif k == INTERRUPT:
                        end = "\n"
                        raise KeyboardInterrupt
                    elif k in ("\r", "\n"):
                        self.write("\n")
                        return "".join(text)
                    elif k in ("esc", "\x04"):
                        self.write("\n")
                        return ""
                    elif k in ("\x7f", "\b"):
                        if text:
                            self.write("\b \b" * terminal.text_width(terminal.visible(text.pop())))
                        continue
                    elif k == "\x15":
                        self.write("\b \b" * terminal.text_width(terminal.visible("".join(text))))
                        text.clear()
                        continue
                    elif len(k) != 1 or k < " ":
                        continue
                    text.extend(k)
                    self.write(terminal.visible(k))
        finally:
            if old is not None:
                terminal.restore_mode(self.fd, old, drain=True)
            if end:
                self.write(end)

    def page(self, plain, styled):
        """Show a whole text: through $PAGER (plain text), else `less -R`, else
        printed in full. Ctrl-C belongs to the pager while it runs."""
        import shlex
        import shutil
        import subprocess

        pager = os.environ.get("PAGER", "").strip()
        try:
            argv = shlex.split(pager) if pager else (["less", "-R"] if shutil.which("less") else None)
        except ValueError:
            argv = None
        text = plain if pager or not self.styled else styled
        if argv:
            old = signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=self.fd, stderr=self.fd,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
                try:
                    p.communicate(text.encode("utf-8", "replace"))
                except BrokenPipeError:     # the pager quit before reading it all
                    p.wait()
                return
            except OSError:
                pass                        # no such pager: printed in full below
            finally:
                signal.signal(signal.SIGINT, old)
        self.write(text)

    def close(self):
        try:
            os.close(self.fd)
        except OSError:
            pass


class Approver:
    """Decides whether a call may run: --yes, a rule, or the person.
    `report(rule)` is told of each rule an "always" answer adds."""

    def __init__(self, yes=False, rules=None, report=None, out=None):
        self.yes = yes
        self.out = out          # where questions are written (Terminal), None: /dev/tty
        self.rules = rules if rules is not None else permissions.Rules()
        self.report = report
        self.tty = None
        self.no_tty = False

    def _terminal(self):
        if self.tty is None and not self.no_tty:
            self.tty = Terminal.open(self.out)
            self.no_tty = self.tty is None
        return self.tty

    def _question(self, name, args, cwd):
        """(ask, offer, why, where): whether to ask, the rule "always" would
        add (None: not offered), why it is not offered, and, for a path
        outside the working directory, where it is."""
        if name == "bash":
            verdict = permissions.check(str(args.get("command", "")), self.rules)
            return not verdict.allowed, verdict.offer, verdict.note, None
        if name not in ("read", "write", "edit"):
            return False, None, None, None
        try:
            path = resolve(args.get("path") or "", cwd)
            out = outside(path, cwd)
        except (ValueError, OSError):
            return name != "read", None, None, None
        where = os.path.realpath(path) if out else None
        if name == "read":
            return out, None, None, where
        if out:
            return True, None, None, where
        why = permissions.protected(path)
        if why:
            return True, None, why, None
        return self.rules.tool_rule(name) is None, permissions.Rule(name), None, None

    def decide(self, use, args, cwd):
        """(allowed, why not, asked): asked says the question showed the call."""
        name = use["name"]
        ask, offer, why, where = self._question(name, args, cwd)
        if self.yes or not ask:
            return True, None, False
        tty = self._terminal()
        if tty is None:
            what = f"'{name}' needs confirmation" if where is None else \
                f"reading '{args.get('path')}' outside the working directory needs confirmation"
            hint = f"a rule such as '{offer.text}' in the user's allow file, or" if offer else "only"
            return False, (f"not run: {what} and there is no terminal to ask "
                           f"(the user can allow it with {hint} panto-tool --yes)"), False
        keys = env_keys()
        rows, whole, hidden, replaces = self._shown(use, args, cwd, tty.styled)
        shown, again = self._text(name, rows, offer, why, where, hidden, tty.styled, replaces)
        question, again = redact(shown + again, keys), redact(again, keys)
        style = show.Style(tty.styled)
        always = offer and style(show.BOLD, f"always for '{show.visible_line(offer.shown)}' in this run? "
                                 "Enter confirms, another key goes back ")
        choices = (YES, NO) + ((ALWAYS,) if offer else ()) + ((VIEW,) if hidden else ())
        while True:
            answer = tty.ask(question, choices, again, always)
            if answer != VIEW:
                break
            tty.write("view\n")
            tty.page(redact("\n".join(whole(False)) + "\n", keys), redact("\n".join(whole(True)) + "\n", keys))
        if answer == YES:
            tty.write("yes\n")
            return True, None, True
        if answer == ALWAYS:
            tty.write("always\n")
            self.rules.add(offer, "this run")
            if self.report is not None:
                self.report(offer)
            return True, None, True
        tty.write("no\n")
        if answer is None:
            return False, f"not run: the user did not answer the confirmation for '{name}'", True
        reason = tty.line(show.Style(tty.styled)(show.BOLD, "  instead (Enter: just decline): ")) \
            if answer == NO else ""
        if reason.strip():
            return False, f"declined by the user: {reason}", True
        return False, f"not run: the user declined this '{name}' call", True

    @staticmethod
    def _shown(use, args, cwd, styled):
        """(rows of the question, whole(styled) -> every row, what the rows
        leave out: None when nothing is cut, whether a write replaces an
        existing file)."""
        style = show.Style(styled)
        name = use["name"]
        rows = show.call(use, args, style, cwd=cwd, whole=True)
        before = show.existing(args, cwd) if name == "write" else None
        if before is not None or name == "edit":   # a diff: of a write against the file it replaces, or of an edit
            if before is not None:
                new = str(args.get("content", ""))

                def diff(s, **cut):
                    return show.write_diff(before, new, s, **cut)

                def head(s):
                    return show.call(use, args, s, cwd=cwd)[0]
            else:
                def diff(s, **cut):
                    return show.diff(args, cwd, s, **cut)

                def head(s):
                    return show.header(name, show.summary(name, args), s)
            full = diff(style, limit=None, width=None)
            cut = diff(style)
            more = max(0, len(full) - show.DIFF)
            long = sum(1 for a, b in zip(cut[:show.DIFF], full) if a != b)

            def whole(on):
                s = show.Style(on)
                return [head(s)] + diff(s, limit=None, width=None)
        elif name == "write":
            content = show.lines_of(str(args.get("content", "")))
            shown = content[:show.PREVIEW]
            more = len(content) - len(shown)
            long = sum(1 for r in shown if len(show.visible(r)) > show.LINE)

            def whole(on):
                s = show.Style(on)
                return [show.header(name, show.summary(name, args), s)] + ["  " + show.visible(r) for r in content]
        else:
            return rows, None, None, False
        hidden = []
        if more:
            diffed = name == "edit" or before is not None
            hidden.append(f"{more} more line{'s' * (more != 1)}{' of the diff' * diffed} hidden")
        if long:
            hidden.append(f"{long} long line{'s' * (long != 1)} cut")
        return rows, whole, ", ".join(hidden) or None, before is not None

    @staticmethod
    def _text(name, rows, offer, why, where, hidden, styled, replaces=False):
        """(the call's rows, the answers line that ends the question)"""
        style = show.Style(styled)
        rows = list(rows)
        if replaces:
            name += " over an existing file"
        if where is not None:
            rows.append(f"  {style(show.RED, 'outside the working directory:')} {show.visible_line(where)}")
            prompt = f"allow {name} outside the working directory? [y]es [n]o"
        elif offer is None:
            prompt = f"allow {name}? [y]es [n]o ({show.visible_line(why or 'asked every time')})"
        else:
            prompt = f"allow {name}? [y]es [n]o [a]lways for '{show.visible_line(offer.shown)}' in this run"
        if hidden:
            prompt += f" [v]iew all ({hidden})"
        return "\n".join(rows) + "\n", style(show.BOLD, prompt + " ")

    def close(self):
        if self.tty is not None:
            self.tty.close()
