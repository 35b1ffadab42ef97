"""The interactive agent: a prompt loop whose every turn is a pipeline of the
plumbing commands. It keeps no conversation of its own: the session file is
the state, and each step reads it back from `panto-log append`'s output.

    new session, first step:  panto-send --tools PROMPT </dev/null | panto-log append
    later steps:              panto-log replay --context FILE | panto-send --tools PROMPT | panto-log append FILE
    tool rounds:              panto-log replay --context FILE | panto-tool | panto-send --tools | panto-log append FILE
    after /rewind:            panto-log replay --context --at ID FILE | panto-send --tools PROMPT | panto-log append FILE
    /compact, and by itself:  panto-log replay --context FILE | panto-send --compact | panto-log append FILE
    resuming:                 panto-log replay FILE

(--context: only the path since the last compaction, so that a turn costs
what its request needs, not the size of the file.)

What the terminal shows and how the prompt is read is screen.py's; the
/commands are slash.py's.
"""
import io
import os

from pantolib import cli, paths, terminal
from pantolib.errors import PantoError
from pantolib.pipeline import Cmd, EscKey, Interrupts, Pipeline, command_argv, read_session
from pantolib.screen import Screen, StepScreen, plural
from pantolib.slash import Commands, names, settings
from pantolib.terminal import BOLD, CYAN, DIM, RED, YELLOW

COMPACT_AT = 0.85       # compact before the next request above this share of the context window


class Turn:
    """What one step of a turn brought: statuses, the session read back, and whether it was cancelled."""

    def __init__(self, statuses, session, cancelled, seconds, shown):
        self.statuses, self.session, self.cancelled = statuses, session, cancelled
        self.seconds, self.shown = seconds, shown

    @property
    def ok(self):
        return all(s == cli.OK for s in self.statuses)


class Repl:
    def __init__(self, path=None, provider=None, model=None, yes=False, max_steps=25, tools=True,
                 out=None, err=None, history=None, env=None, context_files=True):
        self.path = path            # the session file, once there is one
        self.provider = provider    # /model or -p: passed to panto-send
        self.model = model
        self.api = None             # --api: passed to panto-send while the provider is its own
        self.yes = yes
        self.max_steps = max_steps
        self.tools = tools
        self.context_files = context_files     # AGENTS.md / CLAUDE.md into a new session's system prompt
        self.env = os.environ if env is None else env
        self.screen = Screen(self.env, out, err, history, names())   # what is shown and typed
        self.session = None         # the session as the last pipeline left it
        self._echo = None           # (bytes, Session) of the last echo, to read the next one quickly
        self.branch = None          # /rewind: the entry the next prompt continues from
        self.last_prompt = None     # for /retry
        self.fill = None            # the last request's share of the context window
        from pantolib.permissions import Rules

        self.rules = Rules()        # the rules files as read at start, and this run's "always"
        self.irq = Interrupts(0 if self.screen.interactive else None)   # a turn's Ctrl-C presses
        self.commands = Commands(self)   # the /commands (slash.py)

    def api_for(self, provider):
        """The --api to pass with this provider (None: another provider's API, or none given)."""
        from pantolib.providers import APIS

        return self.api if self.api and (provider is None or APIS.get(self.api) == provider) else None

    # -- the pipelines -------------------------------------------------------------------
    def send_cmd(self, prompt_file=None, extra=()):
        argv = ["--live"]
        if self.tools and "--compact" not in extra:
            argv.append("--tools")
        if self.api_for(self.provider):
            argv += ["--api", self.api]
        if self.provider:
            argv += ["--provider", self.provider]
        if self.model:
            argv += ["--model", self.model]
        if prompt_file:
            argv += ["--file", prompt_file]
        if not self.context_files:
            argv.append("--no-context-files")
        # its pty is read by LiveReply, never shown as it is: thinking marked dim
        # there even with NO_COLOR, which the REPL's own drawing honours
        env = {k: v for k, v in self.env.items() if k != "NO_COLOR"} if "NO_COLOR" in self.env else None
        return Cmd(command_argv("panto-send", *argv, *extra), stderr="pty", role="send", env=env)

    def source_cmd(self, at=None, whole=False):
        if not self.path:
            return []
        at = at or self.branch
        # a turn reads only what its request needs, not the whole file (replay --context);
        # SIGINT ignored: a stream cut short would put the prompt on an earlier entry
        return [Cmd(command_argv("panto-log", "replay", *(() if whole else ("--context",)),
                                 *(["--at", at] if at else []), self.path, sigint=False))]

    def sink_cmd(self):
        return Cmd(command_argv("panto-log", "append", *([self.path] if self.path else []), sigint=False))

    def _tool(self):
        """panto-tool, handed the rules in effect on its command line (no file
        a command could write) and a socket only this process reads, where it
        reports the rules an "always" answer adds."""
        import socket

        # it draws on a pty, copied to our stderr: colour only if that may have it
        env = None if terminal.styled(self.screen.err, self.env) else dict(self.env, NO_COLOR="1")
        mine, theirs = socket.socketpair()
        argv = ["--live", *(["--yes"] if self.yes else []), "--no-rule-files",
                *(f"--rule={rule.text}" for rule, _ in self.rules), f"--granted-fd={theirs.fileno()}"]
        cmd = Cmd(command_argv("panto-tool", *argv), stderr="pty", role="tool", env=env,
                  pass_fds=(theirs.fileno(),))
        cmd.channel = (mine, theirs)
        return cmd

    def _granted(self, cmd):
        """Take the rules panto-tool reported (it has exited) as this run's."""
        from pantolib import permissions

        mine, theirs = cmd.channel
        theirs.close()
        data = b""
        try:
            mine.setblocking(False)
            while True:
                chunk = mine.recv(1 << 16)
                if not chunk:
                    break
                data += chunk
        except OSError:     # nothing more (BlockingIOError) or a broken channel
            pass
        finally:
            mine.close()
        for line in data.decode("utf-8", "replace").split("\n"):
            try:
                self.rules.add(permissions.parse(line), "this run")
            except ValueError:
                continue

    def step(self, commands, label="waiting "):
        """Run one pipeline, drawing what panto-send and panto-tool show;
        learn the session file from its output."""
        pipe = Pipeline(commands, interrupts=self.irq)
        screen = StepScreen(self.screen, pipe, label, self.yes)
        esc = None
        if self.screen.editor is not None and any(c.role == "send" for c in pipe.commands):
            esc = EscKey(0, self.screen.type_ahead)
        try:
            statuses, data = pipe.run(screen.output, screen.tick, esc)
            screen.show_held()
        finally:
            if esc is not None:
                esc.close()
            screen.end()
        seconds = screen.seconds()
        session = self._read_back(data)
        self._learn_file(session)
        return Turn(statuses, session, pipe.interrupts > 0, seconds, screen.live.seen)

    def _learn_file(self, session):
        """The session file, once a step's echo names one that exists, and the
        session as it holds it (a first prompt that failed left none)."""
        if self.path is None and session is not None and session.header is not None:
            candidate = paths.session_path(session.header)
            if os.path.exists(candidate):
                self.path = candidate
        if session is not None and session.header is not None and self.path is not None:
            self.session = session

    def _read_back(self, data):
        """The Session of what panto-log append echoed, or None. The echo
        usually begins with the whole of the previous one (replay printed
        the file the last step left): then only the new lines are parsed."""
        from pantolib import stream

        prev, self._echo = self._echo, None
        session = None
        if prev is not None and len(data) >= len(prev[0]) and data.startswith(prev[0]):
            session = prev[1]
            try:
                for line in stream.read(io.BytesIO(data[len(prev[0]):])):
                    if line.kind == stream.ENTRY:
                        session.add(line)
                    elif line.kind == stream.HEADER:
                        raise PantoError("a second header")
            except PantoError:
                session = None
        if session is None:
            try:
                session = read_session(data)
            except PantoError:
                return None
        if session.header is not None:
            self._echo = (data, session)
        return session

    def turn(self, prompt):
        """A prompt (None: send the conversation as it is, e.g. /retry), then
        tool rounds while the model asks for tools (at most max_steps)."""
        if prompt is not None:
            self.last_prompt = prompt
            if self._unanswered_prompt() == prompt:
                prompt = None   # the same prompt again after a failure: no second user entry
        if self.irq.count and self.path is None:
            self.screen.say("[cancelled]", RED)    # nothing sent, no file yet: kept here for /retry
            return
        if self.path and self.fill is not None and self.fill > COMPACT_AT and not self.irq.count:
            self.screen.say(f"[the context is {self.fill:.0%} full: compacting first]", DIM)
            self.commands.compact(keep=1)
        t = self.request(prompt)
        if not t.cancelled and self._context_full(t):
            self.screen.say("[the context window is full: compacting, then sending again]", YELLOW)
            at = self.last_prompt_entry(t.session) if t.ok else None
            if self.commands.compact(at=at["id"] if at else None, keep=1):
                t = self.request(None)
        self.agent(t)

    def agent(self, t):
        """The agent loop after a request: tool rounds while the model asks for
        tools, at most max_steps requests in all."""
        steps = 1
        while (t.ok and not t.cancelled and not self.irq.count and t.session is not None
               and self._wants_tools(t.session)):
            if steps >= self.max_steps:
                n = len(t.session.unanswered_tool_uses())
                self.screen.say(f"[stopped after {plural(steps, 'step')} (--max-steps): {plural(n, 'tool call')} "
                         "left unanswered; type a prompt to go on]", RED)
                return
            if self.path is None:   # cannot happen after a reply, but never lose the stream
                self.screen.say("[the session was not saved; stopping]", RED)
                return
            tool = self._tool()
            try:
                t = self.step(self.source_cmd() + [tool, self.send_cmd(), self.sink_cmd()])
            finally:
                self._granted(tool)
            self.report(t)
            steps += 1
        if (t.cancelled or self.irq.count) and not self._aborted_shown(t):
            self.screen.say("[cancelled]", RED)    # one line: a partial reply's usage line says "aborted"

    @staticmethod
    def _aborted_shown(t):
        """Whether a partial reply was shown and kept (its usage line says so)."""
        leaf = t.session.leaf_message() if t.session is not None and t.shown else None
        return (leaf is not None and leaf["message"]["role"] == "assistant"
                and leaf["message"].get("stopReason") == "aborted")

    def request(self, prompt):
        prompt_file = self._write_prompt(prompt) if prompt is not None else None
        try:
            t = self.step(self.source_cmd() + [self.send_cmd(prompt_file), self.sink_cmd()])
        finally:
            if prompt_file:
                os.unlink(prompt_file)
        if self.branch and (t.session is None or t.session.leaf != self.branch):
            self.branch = None      # the branch is made: it is the active path now
        self.report(t)
        return t

    def _context_full(self, t):
        if cli.CONTEXT_FULL in t.statuses:
            return True
        leaf = t.session.leaf_message() if t.session is not None else None
        return (t.ok and leaf is not None and leaf["message"]["role"] == "assistant"
                and leaf["message"].get("stopReason") == "contextFull")

    def _unanswered_prompt(self):
        """The text of a user prompt at the leaf that got no reply (a failed turn), or None."""
        if self.session is None or self.branch or self.path is None:
            return None
        leaf = self.session.leaf_message()
        if leaf is None or leaf["message"]["role"] != "user":
            return None
        texts = [b.get("text") for b in leaf["message"]["content"] if b.get("type") == "text"]
        return texts[-1] if texts else None

    @staticmethod
    def last_prompt_entry(session):
        for e in reversed(session.message_entries()):
            m = e["message"]
            if m["role"] == "user" and any(b.get("type") == "text" for b in m["content"]):
                return e
        return None

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

    # -- after each reply: one dim line ----------------------------------------------------
    def report(self, t):
        if t.session is None or t.cancelled and not t.shown:
            return
        leaf = t.session.by_id.get(t.session.leaf) if t.session.leaf else None
        if leaf is None or leaf.get("type") not in ("message", "compaction"):
            return
        msg = leaf.get("message", leaf)
        if leaf.get("type") == "message" and msg.get("role") != "assistant":
            return
        line = self.usage_line(msg, t.seconds)
        if line:
            self.screen.say(line, DIM)

    def usage_line(self, msg, seconds):
        from pantolib import entries
        from pantolib.prices import format_usd, prompt_tokens, turn_cost

        usage = entries.usage_of(msg)
        provider, model = msg.get("provider"), msg.get("model")
        parts = []
        if usage is not None:
            tokens_in = prompt_tokens(msg.get("usage"))
            cached = f" ({usage['cacheRead'] / tokens_in:.0%} cached)" if tokens_in and usage["cacheRead"] else ""
            parts += [f"{tokens_in:,} in{cached}", f"{usage['output']:,} out"]
            table = self._prices()
            if table is not None:
                cost = turn_cost(usage, table.get(provider, model))
                if cost is not None:
                    parts.append(format_usd(cost))
                fill = self._fill(table, provider, model, tokens_in)
                if fill is not None:
                    self.fill = fill
                    parts.append(f"{fill:.0%} of the context")
        if msg.get("stopReason") == "aborted":
            parts.append("aborted")
        parts.append(f"{seconds:.1f}s")
        return "  " + " · ".join(parts)

    @staticmethod
    def _fill(table, provider, model, tokens_in):
        """The share of the model's context window (models.toml) that tokens_in take, or None."""
        from pantolib.prices import context_window

        size = context_window(table, provider, model) if table is not None else None
        return tokens_in / size if size else None

    def _prices(self):
        from pantolib import models_toml

        try:
            return models_toml.load(env=self.env)
        except PantoError:
            return None

    # -- resuming ------------------------------------------------------------------------
    def load(self):
        """Replay the session file (repairing a torn tail): the Session, or None."""
        t = self.step(self.source_cmd(whole=True))
        if not t.ok or t.session is None:
            raise PantoError(f"cannot read the session '{self.path}'")
        from pantolib import entries

        for e in reversed(t.session.message_entries()):    # how full the context was last
            m = e["message"]
            usage = entries.usage_of(m) if m["role"] == "assistant" else None
            if usage is not None:
                tokens = usage["input"] + usage["cacheRead"] + usage["cacheWrite"]
                self.fill = self._fill(self._prices(), m.get("provider"), m.get("model"), tokens)
                break
        return t.session

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
                    self.screen.say("> " + terminal.visible(b["text"]), BOLD)
                elif t == "text" and m["role"] == "assistant":
                    md = self.screen.markdown()
                    md.text(b["text"])
                    md.end()
                elif t == "toolUse":
                    from pantolib.tools import runner

                    first = terminal.visible_line(runner.describe(b, 200).split("\n")[0])
                    self.screen.say(f"⏺ {b['name']} {first}", CYAN)
                elif t == "toolResult":
                    lines = str(b.get("content", "")).rstrip("\n").split("\n")
                    more = f" … ({plural(len(lines), 'line')})" if len(lines) > 1 else ""
                    self.screen.say("  " + terminal.visible_line(lines[0][:200]) + more, RED if b.get("isError") else DIM)
        waiting = session.unanswered_tool_uses()
        if waiting:
            self.screen.say(f"[the last turn was interrupted: {plural(len(waiting), 'tool call')} "
                     f"{'was' if len(waiting) == 1 else 'were'} never run and will "
                     "not be run now; type a prompt to go on]", RED)

    def start_notes(self, session):
        """After the banner: the instruction files a new session will read, and a missing API key."""
        if session is None and self.context_files:
            from pantolib import instructions

            found = instructions.find(env=self.env)
            if found.files:
                names = ", ".join(terminal.visible_line(shown_path(p, self.env)) for p, _ in found.files)
                self.screen.say(f"instructions: {names}", DIM)
            for note in found.notes:
                self.screen.say(terminal.visible_line(note), YELLOW)
        from pantolib import providers, turn

        try:
            _, options, key_var = providers.configure({"provider": self.provider, "model": self.model},
                                                      session.active_model() if session is not None else None,
                                                      self.env)
            turn.need_key(options, key_var)
        except PantoError as e:
            self.screen.say(f"{e}: every request will fail until it is", RED)

    # -- the loop ------------------------------------------------------------------------
    def loop(self, first=None):
        """Prompts until Ctrl-D or /quit; first: a prompt given on the command line, sent at once."""
        interrupts = 0
        try:
            while True:
                with self.irq:      # from here on a Ctrl-C is counted for the turn, never raised
                    try:
                        if first is not None:
                            line, first = first, None
                            self.screen.say("> " + terminal.visible(line), BOLD)
                        else:
                            line = self.screen.read_line()
                    except (terminal.Edit, KeyboardInterrupt) as e:
                        # Ctrl-C at the prompt, or just before it (then a signal)
                        how, text = (e.how, e.text) if isinstance(e, terminal.Edit) else ("interrupt", "")
                        if how == "eof":
                            return
                        if isinstance(e, KeyboardInterrupt):
                            self.screen.out.write("\n")
                        interrupts = interrupts + 1 if not text else 0
                        if interrupts >= 2:
                            self.screen.say("(to quit, press Ctrl-D or type /quit)", DIM)
                        continue
                    self.irq.count = 0      # Enter: what counts is from now on
                    interrupts = 0
                    text = line.strip()
                    if not text:
                        continue
                    if self.screen.editor is not None:
                        if self.screen.editor.interrupted_ahead():     # Enter, then at once Ctrl-C
                            self.irq()
                        self.screen.history.add(line)
                    self.screen.hold_keys()
                    try:
                        if text.startswith("/") and not text.startswith("//"):
                            if not self.commands.run(text):
                                return
                            continue
                        if text.startswith("//"):
                            line = line.replace("/", "", 1)
                        self.turn(line)
                    except KeyboardInterrupt:  # between two pipelines: the session is whole
                        self.screen.say("[cancelled]", RED)
                    finally:
                        self.screen.release_keys()
                    if self.screen.tty:
                        self.screen.out.write("\n")
        finally:
            self.screen.close()


def banner(r, session=None):
    provider, model, base = settings(r.provider, r.model, session, r.env, r.api_for(r.provider))
    return f"panto — {provider}: {model} @ {base}"


def shown_path(path, env=None):
    """A path for a person: relative below the working directory, ~ for the home directory."""
    env = os.environ if env is None else env
    cwd, home = os.getcwd(), env.get("HOME") or ""
    if path.startswith(cwd + os.sep):
        return os.path.relpath(path, cwd)
    if home and path.startswith(home.rstrip(os.sep) + os.sep):
        return "~" + path[len(home.rstrip(os.sep)):]
    return path
