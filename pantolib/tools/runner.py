"""Answer the tool calls of a stream's leaf: confirm, run, and build the result entry."""
import os
import sys

from pantolib import entries, paths, tools

YES, NO, ALWAYS = "y", "n", "a"
PREVIEW_LINES = 12


def _args(use):
    try:
        return tools.parse_args(use.get("input"))
    except ValueError:
        return {}


def describe(use, width=2000):
    """What a call will do, for the person asked to allow it."""
    name, args = use["name"], _args(use)
    if name == "bash":
        body = str(args.get("command", use.get("input", "")))
    elif name == "write":
        content = str(args.get("content", ""))
        body = f"{args.get('path')} ({len(content.encode('utf-8', 'replace'))} bytes)\n" + _first_lines(content, 8)
    elif name == "edit":
        body = (f"{args.get('path')}\n" + _prefixed(str(args.get("old_text", "")), "- ")
                + "\n" + _prefixed(str(args.get("new_text", "")), "+ "))
    elif name == "read":
        body = str(args.get("path", use.get("input", "")))
    else:
        body = str(use.get("input", ""))
    return body if len(body) <= width else body[:width] + " …"


def _first_lines(text, n):
    lines = text.split("\n")
    more = f"\n… ({len(lines) - n} more lines)" if len(lines) > n else ""
    return "\n".join(lines[:n]) + more


def _prefixed(text, mark):
    return "\n".join(mark + line for line in _first_lines(text, 8).split("\n"))


class Approver:
    """Decides whether a mutating call may run: --yes, remembered 'always', or the terminal."""

    def __init__(self, yes=False, session_id=None, env=None):
        self.yes = yes
        self.session_id = session_id
        self.allowed = set()
        self.tty = None
        self.no_tty = False
        self.state_file = None
        if session_id and "/" not in session_id and not session_id.startswith("."):
            self.state_file = os.path.join(paths.state_dir(env), "allow", session_id)
            try:
                with open(self.state_file, encoding="utf-8") as f:
                    self.allowed = {line.strip() for line in f if line.strip()}
            except OSError:
                pass

    def _terminal(self):
        if self.tty is None and not self.no_tty:
            try:
                fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
            except OSError:
                self.no_tty = True
                return None
            try:   # a terminal cannot be opened "r+" (that needs seeking): two ends
                self.tty = _Terminal(os.fdopen(fd, "r", encoding="utf-8", errors="replace"),
                                     os.fdopen(os.dup(fd), "w", encoding="utf-8", errors="replace"))
            except OSError:
                self.no_tty = True
        return self.tty

    def remember(self, name):
        self.allowed.add(name)
        if not self.state_file:
            return
        os.makedirs(os.path.dirname(self.state_file), mode=0o700, exist_ok=True)
        fd = os.open(self.state_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(name + "\n")

    def decide(self, use):
        """(allowed, reason when not)."""
        name = use["name"]
        if name not in tools.MUTATING or self.yes or name in self.allowed:
            return True, None
        tty = self._terminal()
        if tty is None:
            return False, (f"not run: '{name}' needs confirmation and there is no terminal to ask "
                           "(the user can allow tools with panto-tool --yes)")
        tty.write(f"\n\033[1mallow {name}?\033[0m\n{_indent(describe(use))}\n")
        while True:
            tty.write("[y]es / [n]o / [a]lways allow " + name + " in this session: ")
            tty.flush()
            answer = tty.readline()
            if not answer:   # the terminal went away
                return False, f"not run: the user did not answer the confirmation for '{name}'"
            a = answer.strip().lower()
            if a in ("y", "yes"):
                return True, None
            if a in ("a", "always"):
                self.remember(name)
                return True, None
            if a in ("n", "no", ""):
                return False, f"not run: the user declined this '{name}' call"

    def close(self):
        if self.tty is not None:
            self.tty.close()


class _Terminal:
    def __init__(self, r, w):
        self.r, self.w = r, w

    def write(self, s):
        self.w.write(s)

    def flush(self):
        self.w.flush()

    def readline(self):
        self.w.flush()
        return self.r.readline()

    def close(self):
        for f in (self.w, self.r):
            try:
                f.close()
            except OSError:
                pass


def _indent(text, pad="  "):
    return "\n".join(pad + line for line in text.split("\n"))


class Display:
    """A short live account of each call on stderr, for people (not for scripts)."""

    def __init__(self, on):
        self.on = on
        self.color = on and sys.stderr.isatty() and not os.environ.get("NO_COLOR")

    def _c(self, code, text):
        return f"{code}{text}\033[0m" if self.color else text

    def start(self, use):
        if self.on:
            first = describe(use, 200).split("\n")[0]
            sys.stderr.write(self._c("\033[36m", f"⏺ {use['name']}") + f" {first}\n")
            sys.stderr.flush()

    def done(self, content, is_error):
        if not self.on:
            return
        lines = content.rstrip("\n").split("\n")
        shown = lines[:PREVIEW_LINES]
        if len(lines) > PREVIEW_LINES:
            shown.append(f"… ({len(lines) - PREVIEW_LINES} more lines)")
        color = "\033[31m" if is_error else "\033[2m"
        sys.stderr.write(self._c(color, _indent("\n".join(shown))) + "\n")
        sys.stderr.flush()


def answer(session, approver, display, cwd=None, timeout=None):
    """The user entry answering the leaf's tool uses, or None when nothing waits.

    Ctrl-C while a call runs (or is being confirmed) still returns the entry:
    the interrupted call and the ones after it are answered as not run, and
    `interrupted` is set on the result so the caller can stop there.
    """
    uses = session.unanswered_tool_uses()
    if not uses:
        return None, False
    blocks, interrupted = [], False
    for use in uses:
        if interrupted:
            content, err = "not run: the user interrupted the previous tool call (Ctrl-C)", True
        else:
            try:
                ok, why = approver.decide(use)
                if ok:
                    display.start(use)
                    content, err = tools.run(use["name"], use.get("input"), cwd=cwd, timeout=timeout)
                    display.done(content, err)
                else:
                    content, err = why, True
                    display.done(why, True)
            except KeyboardInterrupt:
                interrupted = True
                content, err = "interrupted by the user (Ctrl-C); the call was stopped", True
        block = {"type": "toolResult", "toolUseId": use["id"], "content": content}
        if err:
            block["isError"] = True
        blocks.append(block)
    stamp = session.active_model()
    if stamp is None:
        msg = session.leaf_message()["message"]
        stamp = (msg.get("provider"), msg.get("model"))
    entry = entries.make_message("user", blocks, session.leaf, set(session.ids),
                                 provider=stamp[0], model=stamp[1])
    return entry, interrupted
