"""The interactive agent: a prompt loop whose every turn is a pipeline of the
plumbing commands. It keeps no conversation of its own: the session file is
the state, and each step reads it back from `panto-log append`'s output.

    new session, first step:  panto-send --tools PROMPT </dev/null | panto-log append
    later steps:              panto-log replay FILE | panto-send --tools PROMPT | panto-log append FILE
    tool rounds:              panto-log replay FILE | panto-tool | panto-send --tools | panto-log append FILE
"""
import io
import os
import shutil
import signal
import subprocess
import sys

from pantolib import paths
from pantolib.conversation import Session
from pantolib.errors import PantoError
from pantolib.providers import NAMES as PROVIDERS

HELP = """\
commands:
  /model PROVIDER MODEL   switch model (openai or anthropic) from the next prompt on
  /model                  show the model in use
  /cost                   what this session has cost so far (panto-cost)
  /session                show the session file
  /help                   this help
  /quit                   leave (Ctrl-D does too)
Ctrl-C cancels the running request or tool and returns to the prompt.\
"""
DIM, RED, CYAN, BOLD, RESET = "\033[2m", "\033[31m", "\033[36m", "\033[1m", "\033[0m"


def command_path(name):
    """A plumbing command: next to the running `panto` first, else on PATH."""
    here = os.path.dirname(os.path.abspath(sys.argv[0] or ""))
    candidate = os.path.join(here, name)
    if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
        return candidate
    found = shutil.which(name)
    if not found:
        raise PantoError(f"'{name}' not found next to panto or on PATH (reinstall panto)")
    return found


def read_session(data):
    """A Session from stream bytes (bare lines, which nothing here writes, are skipped)."""
    return Session.read(io.BytesIO(data), skip_bare=True)


class Pipeline:
    """Run commands connected stdout to stdin; Ctrl-C goes to all of them, not to us."""

    def __init__(self, commands, capture=True):
        self.commands = commands
        self.capture = capture
        self.interrupts = 0
        self.procs = []

    def _on_sigint(self, signum, frame):
        # The terminal sent SIGINT to every process of the foreground group:
        # the children stop by themselves (panto-log append finishes writing
        # first). A second Ctrl-C hurries the ones that are still running.
        self.interrupts += 1
        if self.interrupts > 1:
            for p in self.procs[:-1]:
                if p.poll() is None:
                    try:
                        p.terminate()
                    except OSError:
                        pass

    def run(self):
        """(exit statuses, bytes of the last command's stdout)."""
        old = signal.signal(signal.SIGINT, self._on_sigint)
        try:
            prev = subprocess.DEVNULL
            for i, argv in enumerate(self.commands):
                last = i == len(self.commands) - 1
                out = subprocess.PIPE if (not last or self.capture) else None
                p = subprocess.Popen(argv, stdin=prev, stdout=out)
                if prev is not subprocess.DEVNULL:
                    prev.close()
                prev = p.stdout
                self.procs.append(p)
            data = b""
            if self.capture:
                chunks = []
                while True:
                    chunk = self.procs[-1].stdout.read(1 << 16)
                    if not chunk:
                        break
                    chunks.append(chunk)
                data = b"".join(chunks)
                self.procs[-1].stdout.close()
            statuses = [p.wait() for p in self.procs]
            return statuses, data
        finally:
            for p in self.procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            signal.signal(signal.SIGINT, old)


class Repl:
    def __init__(self, path=None, provider=None, model=None, yes=False, max_steps=25, tools=True,
                 out=None, err=None, history=(None, None)):
        self.path = path            # the session file, once there is one
        self.provider = provider    # /model or -p: passed to panto-send
        self.model = model
        self.yes = yes
        self.max_steps = max_steps
        self.tools = tools
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.color = self.out.isatty()
        self.echo = not sys.stdin.isatty()   # a transcript reads better with the prompts in it
        self.history = history

    # -- output ------------------------------------------------------------------------
    def say(self, text="", style=""):
        if style and self.color:
            text = style + text + RESET
        self.out.write(text + "\n")
        self.out.flush()

    # -- the pipelines -------------------------------------------------------------------
    def _send(self, prompt_file=None):
        argv = [command_path("panto-send"), "--live"]
        if self.tools:
            argv.append("--tools")
        if self.provider:
            argv += ["--provider", self.provider]
        if self.model:
            argv += ["--model", self.model]
        if prompt_file:
            argv += ["--file", prompt_file]
        return argv

    def _source(self):
        return [[command_path("panto-log"), "replay", self.path]] if self.path else []

    def _sink(self):
        return [command_path("panto-log"), "append"] + ([self.path] if self.path else [])

    def step(self, commands):
        """Run one pipeline; learn the session file from its output. (ok, session, cancelled)."""
        pipe = Pipeline(commands)
        statuses, data = pipe.run()
        session = None
        try:
            session = read_session(data)
        except PantoError:
            pass
        if self.path is None and session is not None and session.header is not None:
            candidate = paths.session_path(session.header)
            if os.path.exists(candidate):
                self.path = candidate
        return all(s == 0 for s in statuses), session, pipe.interrupts > 0

    def turn(self, prompt):
        """A prompt, then tool rounds while the model asks for tools (at most max_steps)."""
        prompt_file = self._write_prompt(prompt)
        try:
            ok, session, cancelled = self.step(self._source() + [self._send(prompt_file), self._sink()])
        finally:
            os.unlink(prompt_file)
        steps = 1
        while ok and not cancelled and session is not None and self._wants_tools(session):
            if steps >= self.max_steps:
                n = len(session.unanswered_tool_uses())
                self.say(f"[stopped after {steps} steps (--max-steps): {n} tool call(s) left unanswered; "
                         "type a prompt to go on]", RED)
                return
            if self.path is None:   # cannot happen after a reply, but never lose the stream
                self.say("[the session was not saved; stopping]", RED)
                return
            tool = [command_path("panto-tool"), "--live"] + (["--yes"] if self.yes else [])
            ok, session, cancelled = self.step(self._source() + [tool, self._send(), self._sink()])
            steps += 1
        if cancelled:
            self.say("[cancelled]", RED)

    @staticmethod
    def _wants_tools(session):
        leaf = session.leaf_message()
        return (leaf is not None and leaf["message"]["role"] == "assistant"
                and leaf["message"].get("stopReason") == "toolUse" and bool(session.unanswered_tool_uses()))

    def _write_prompt(self, prompt):
        import tempfile

        fd, name = tempfile.mkstemp(prefix="panto-prompt-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(prompt)
        return name

    # -- resuming ------------------------------------------------------------------------
    def load(self):
        """Replay the session file (repairing a torn tail): the Session, or None."""
        ok, session, _ = self.step(self._source())
        if not ok or session is None:
            raise PantoError(f"cannot read the session '{self.path}'")
        return session

    def show_last_exchange(self, session):
        entries = session.message_entries()
        start = 0
        for i in range(len(entries) - 1, -1, -1):
            m = entries[i]["message"]
            if m["role"] == "user" and any(b.get("type") == "text" for b in m["content"]):
                start = i
                break
        for e in entries[start:]:
            m = e["message"]
            for b in m["content"]:
                t = b.get("type")
                if t == "text" and m["role"] == "user":
                    self.say("> " + b["text"], BOLD)
                elif t == "text" and m["role"] == "assistant":
                    self.say(b["text"])
                elif t == "toolUse":
                    from pantolib.tools import runner

                    first = runner.describe(b, 200).split("\n")[0]
                    self.say(f"⏺ {b['name']} {first}", CYAN)
                elif t == "toolResult":
                    lines = b.get("content", "").rstrip("\n").split("\n")
                    more = f" … ({len(lines)} lines)" if len(lines) > 1 else ""
                    self.say("  " + lines[0][:200] + more, RED if b.get("isError") else DIM)
        waiting = session.unanswered_tool_uses()
        if waiting:
            self.say(f"[the last turn was interrupted: {len(waiting)} tool call(s) were never run and will "
                     "not be run now; type a prompt to go on]", RED)

    # -- the loop ------------------------------------------------------------------------
    def command(self, line):
        """A /command: False to quit."""
        parts = line.split()
        name, args = parts[0], parts[1:]
        if name in ("/quit", "/exit", "/q"):
            return False
        if name == "/help":
            self.say(HELP)
        elif name == "/model":
            if not args:
                self.say(f"model: {self.provider or '(default)'}: {self.model or '(default)'}")
            elif len(args) != 2 or args[0] not in PROVIDERS:
                self.say("usage: /model PROVIDER MODEL (PROVIDER is openai or anthropic)", RED)
            else:
                self.provider, self.model = args
                self.say(f"model: {self.provider}: {self.model} (from the next prompt on)")
        elif name == "/cost":
            if self.path is None:
                self.say("nothing spent yet: no session file")
            else:
                Pipeline([[command_path("panto-cost"), self.path]], capture=False).run()
        elif name == "/session":
            self.say(self.path or "no session file yet (it is created by the first reply)")
        else:
            self.say(f"unknown command '{name}' (try /help)", RED)
        return True

    def read_line(self):
        line = _input("> ")
        if self.echo:
            self.out.write(line + "\n")
            self.out.flush()
        elif line.strip():
            save_history_line(*self.history)
        return line

    def loop(self):
        while True:
            try:
                line = self.read_line()
            except KeyboardInterrupt:
                self.out.write("\n")
                continue
            except EOFError:
                self.out.write("\n")
                return
            text = line.strip()
            if not text:
                continue
            if text.startswith("/") and not text.startswith("//"):
                if not self.command(text):
                    return
                continue
            if text.startswith("//"):
                line = line.replace("/", "", 1)
            try:
                self.turn(line)
            except KeyboardInterrupt:  # between two pipelines: the session is whole
                self.say("[cancelled]", RED)
            self.out.write("\n")


def _input(prompt):
    """input(), with Ctrl-C always honoured at once.

    CPython's readline waits in select() for the next key; a SIGINT that
    lands just before that select (while a typed key is being echoed) would
    only be seen at the following key press. A timer wakes the select ten
    times a second so a pending Ctrl-C is raised without delay."""
    if not sys.stdin.isatty():
        return input(prompt)
    old = signal.signal(signal.SIGALRM, lambda signum, frame: None)
    signal.setitimer(signal.ITIMER_REAL, 0.1, 0.1)
    try:
        return input(prompt)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def setup_history(env=None):
    """Line editing and a persistent history: (readline module or None, history path)."""
    try:
        import readline
    except ImportError:
        return None, None
    path = os.path.join(paths.state_dir(env), "history")
    try:
        paths.make_dirs(os.path.dirname(path))   # 0700 whatever the umask
        if not os.path.exists(path):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        readline.read_history_file(path)
    except OSError:
        return readline, None
    return readline, path


def save_history_line(readline, path):
    if readline is not None and path is not None:
        try:
            readline.append_history_file(1, path)
        except OSError:
            pass


def settings(provider=None, model=None, session=None, env=None):
    """(provider, model, base URL) as panto-send will choose them: option, then
    the session's active model, then the environment."""
    from pantolib import providers

    env = os.environ if env is None else env
    active = session.active_model() if session is not None else None
    name, options, _ = providers.configure({"provider": provider, "model": model}, active, env)
    return name, options.model, options.base_url


def banner(r, session=None):
    provider, model, base = settings(r.provider, r.model, session)
    return f"panto — {provider}: {model} @ {base}"
