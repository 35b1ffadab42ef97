"""What a prompt sets going: a request to the model, then tool rounds while
the model asks for tools, each step one pipeline of the plumbing commands.
The REPL keeps no conversation of its own: the session file is the state,
and each step reads it back from `panto-log append`'s output.

    new session, first step:  panto-send --tools PROMPT </dev/null | panto-log append
    later steps:              panto-log replay --context FILE | panto-send --tools PROMPT | panto-log append FILE
    tool rounds:              panto-log replay --context FILE | panto-tool | panto-send --tools | panto-log append FILE
    after /rewind:            panto-log replay --context --at ID FILE | panto-send --tools PROMPT | panto-log append FILE
    /compact, and by itself:  panto-log replay --context FILE | panto-send --compact | panto-log append FILE
    resuming:                 panto-log replay FILE

(--context: only the path since the last compaction, so that a turn costs
what its request needs, not the size of the file.)

Settings (what the plumbing is told) and SessionState (where the
conversation stands) are the small objects the REPL's parts share.
"""
import io
import os

from pantolib import cli, paths, terminal
from pantolib.errors import PantoError
from pantolib.pipeline import Cmd, EscKey, Interrupts, Pipeline, command_argv, read_session
from pantolib.screen import StepScreen, plural
from pantolib.terminal import DIM, RED, YELLOW

COMPACT_AT = 0.85       # compact before the next request above this share of the context window
SET_ASIDE = ("[the prompt does not fit the context window of {model}: it stays in the session, set aside, "
             "and the next prompt goes without it; type a shorter one, or /model for a model with a larger "
             "context]")


class Settings:
    """What the plumbing is told, as the command line set it: /model changes
    the provider and model, panto-tool's "always" answers add to the rules."""

    def __init__(self, provider=None, model=None, api=None, yes=False, tools=True, context_files=True,
                 max_steps=25, env=None, rules=None):
        self.provider = provider    # /model or -p: passed to panto-send
        self.model = model
        self.api = api              # --api: passed to panto-send while the provider is its own
        self.yes = yes              # --yes: panto-tool runs every call without asking
        self.tools = tools          # False: --no-tools
        self.context_files = context_files     # AGENTS.md / CLAUDE.md into a new session's system prompt
        self.max_steps = max_steps  # requests per prompt, tool rounds included
        self.env = os.environ if env is None else env
        if rules is None:
            from pantolib.permissions import Rules

            rules = Rules()
        self.rules = rules          # the rules files as read at start, and this run's "always"

    def api_for(self, provider):
        """The --api to pass with this provider (None: another provider's API, or none given)."""
        from pantolib.providers import APIS

        return self.api if self.api and (provider is None or APIS.get(self.api) == provider) else None

    def shown(self, session=None):
        """(provider, model, base URL shown) as panto-send will choose them: option,
        then the session's active model, then the environment."""
        from pantolib import providers, secrets

        active = session.active_model() if session is not None else None
        options = {"provider": self.provider, "model": self.model, "api": self.api_for(self.provider)}
        name, options, _ = providers.configure(options, active, self.env)
        return name, options.model, secrets.shown_url(options.base_url)


class SessionState:
    """Where the conversation stands: the session file (once a reply made
    one), the session as the last step read it back, the entry the next
    prompt continues from, the last prompt typed, and how full the context
    window was at the last request."""

    def __init__(self, path=None):
        self.path = path            # the session file, once there is one
        self.session = None         # the session as the last pipeline left it
        self.branch = None          # /rewind: the entry the next prompt continues from
        self.last_prompt = None     # for /retry
        self.fill = None            # the last request's share of the context window
        self._echo = None           # (bytes, Session) of the last echo, to read the next one quickly

    def leaf(self):
        """The entry the next step continues from: the branch point, else the session's leaf."""
        return self.branch or (self.session.leaf if self.session is not None else None)

    def read_back(self, data):
        """The Session of what panto-log append echoed, or None; the session
        file learnt once an echo names one that exists. The echo usually
        begins with the whole of the previous one (replay printed the file
        the last step left): then only the new lines are parsed."""
        session = self._parse(data)
        if session is None or session.header is None:
            return session
        if self.path is None:
            candidate = paths.session_path(session.header)
            if os.path.exists(candidate):
                self.path = candidate
        known = self.session.header if self.session is not None else None
        if self.path is not None and (known is None or known.get("id") == session.header.get("id")):
            self.session = session      # (a first prompt that failed left no file)
        # else: another session's echo (this one's file could not be read and
        # panto-send began anew): the state keeps what the file holds
        return session

    def _parse(self, data):
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

    def forget_echo(self):
        """The session was changed here (an entry added): the next echo is read whole."""
        self._echo = None

    def resend_point(self):
        """Where the reply to a prompt sent again goes: the prompt's id when
        entries follow it (a noReply record), else None (the leaf)."""
        leaf = self.session.leaf_message() if self.session is not None and not self.branch else None
        return leaf["id"] if leaf is not None and self.session.leaf != leaf["id"] else None

    def unanswered_prompt(self):
        """The text of a user prompt at the leaf that got no reply (a failed turn), or None."""
        if self.session is None or self.branch or self.path is None:
            return None
        leaf = self.session.leaf_message()
        if leaf is None or leaf["message"]["role"] != "user":
            return None
        texts = [b.get("text") for b in leaf["message"]["content"] if b.get("type") == "text"]
        return texts[-1] if texts else None


class Plumbing:
    """The commands of a step's pipeline, as the settings and the session state make them.

    err: where panto-tool's pty output is copied to (it gets colour only if that may have it)."""

    def __init__(self, settings, state, err):
        self.settings, self.state, self.err = settings, state, err

    def send(self, prompt_file=None, extra=()):
        s = self.settings
        argv = ["--live"]
        if s.tools and "--compact" not in extra:
            argv.append("--tools")
        if s.api_for(s.provider):
            argv += ["--api", s.api]
        if s.provider:
            argv += ["--provider", s.provider]
        if s.model:
            argv += ["--model", s.model]
        if prompt_file:
            argv += ["--file", prompt_file]
        if not s.context_files:
            argv.append("--no-context-files")
        # its pty is read by LiveReply, never shown as it is: thinking marked dim
        # there even with NO_COLOR, which the REPL's own drawing honours
        env = {k: v for k, v in s.env.items() if k != "NO_COLOR"} if "NO_COLOR" in s.env else None
        return Cmd(command_argv("panto-send", *argv, *extra), stderr="pty", role="send", env=env)

    def source(self, at=None, whole=False):
        """[panto-log replay] of the session file, or [] before there is one."""
        path = self.state.path
        if not path:
            return []
        at = at or self.state.branch
        # a turn reads only what its request needs, not the whole file (replay --context);
        # replay into a pipe ignores every signal (signals.py): a stream cut short would
        # put the prompt on an earlier entry
        return [Cmd(command_argv("panto-log", "replay", *(() if whole else ("--context",)),
                                 *(["--at", at] if at else []), path))]

    def sink(self):
        path = self.state.path
        return Cmd(command_argv("panto-log", "append", *([path] if path else [])))

    def tool(self):
        """panto-tool, handed the rules in effect on its command line (no file
        a command could write) and a socket only this process reads, where it
        reports the rules an "always" answer adds (granted())."""
        import socket

        s = self.settings
        env = None if terminal.styled(self.err, s.env) else dict(s.env, NO_COLOR="1")
        mine, theirs = socket.socketpair()
        argv = ["--live", *(["--yes"] if s.yes else []), "--no-rule-files",
                *(f"--rule={rule.text}" for rule, _ in s.rules), f"--granted-fd={theirs.fileno()}"]
        cmd = Cmd(command_argv("panto-tool", *argv), stderr="pty", role="tool", env=env,
                  pass_fds=(theirs.fileno(),))
        cmd.channel = (mine, theirs)
        return cmd

    def granted(self, cmd):
        """Take the rules panto-tool reported (it has exited) as this run's;
        the keys typed while its calls ran (Esc watched), to be typed ahead."""
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
        keys = b""
        for line in data.decode("utf-8", "replace").split("\n"):
            if line.startswith("keys:"):     # typed while a call ran: for the next prompt
                try:
                    keys += bytes.fromhex(line[len("keys:"):])
                except ValueError:
                    pass
                continue
            try:
                self.settings.rules.add(permissions.parse(line), "this run")
            except ValueError:
                continue
        return keys


class Outcome:
    """What one step brought: statuses, the session read back, whether it was
    cancelled, its time, whether any of the reply was shown, and the leaf
    the session had before it (a leaf the step did not write is not its own)."""

    def __init__(self, statuses, session, cancelled, seconds, shown, before=None):
        self.statuses, self.session, self.cancelled = statuses, session, cancelled
        self.seconds, self.shown, self.before = seconds, shown, before

    @property
    def ok(self):
        return all(s == cli.OK for s in self.statuses)


class Agent:
    """Runs what a prompt asks (turn): the request, the tool rounds, and a
    compaction when the context is nearly full (then the request) or full
    (then the request again); every step drawn on the screen and read back
    into the state.

    irq: a turn's Ctrl-C presses (pipeline.Interrupts: the prompt loop
    installs it, and what counts is from Enter on)."""

    def __init__(self, screen, settings, state):
        self.screen, self.settings, self.state = screen, settings, state
        self.say = screen.say
        self.plumbing = Plumbing(settings, state, screen.err)
        self.irq = Interrupts(0 if screen.interactive else None)

    def attachments(self, prompt):
        """The stream panto-send is to read for a prompt that mentions files
        (@PATH): the conversation so far and the prompt as a bare user entry,
        the files' blocks before its text; None when it mentions none."""
        import orjson

        from pantolib import mentions

        found, said = mentions.blocks(prompt, os.getcwd())
        for line in said:
            self.say(terminal.visible_line(line), DIM)
        if not found:
            return None
        data = b""
        if self.plumbing.source():
            statuses, data = Pipeline(self.plumbing.source()).run()
            if any(statuses):
                raise PantoError("cannot read the session to attach the files to")
        entry = {"type": "message", "message": {"role": "user", "content": found + [{"type": "text", "text": prompt}]}}
        return data + orjson.dumps(entry) + b"\n"

    def step(self, commands, label="waiting ", stdin_data=None):
        """Run one pipeline, drawing what panto-send and panto-tool show;
        learn the session file from its output."""
        before = self.state.session.leaf if self.state.session is not None else None
        path = self.state.path
        if path and not os.path.exists(path) and any(c.role == "send" for c in commands):
            # replay would fail and panto-send begin a conversation of the prompt alone (paid
            # for, and written as a new session under this one's name): nothing is sent
            self.say(f"[the session file is gone: {terminal.visible_line(path)}; nothing was sent "
                     "(put it back, then /retry)]", RED)
            return Outcome([cli.FAIL], None, False, 0.0, False, before)
        pipe = Pipeline(commands, interrupts=self.irq, stdin_data=stdin_data)
        drawn = StepScreen(self.screen, pipe, label, self.settings.yes)
        esc = None
        if self.screen.editor is not None and any(c.role == "send" for c in pipe.commands):
            esc = EscKey(0, self.screen.type_ahead)
        try:
            statuses, data = pipe.run(drawn.output, drawn.tick, esc)
            drawn.show_held()
        finally:
            if esc is not None:
                esc.close()
            drawn.end()
        seconds = drawn.seconds()
        session = self.state.read_back(data)
        return Outcome(statuses, session, pipe.interrupts > 0, seconds, drawn.live.seen, before)

    def turn(self, prompt):
        """A prompt (None: send the conversation as it is, e.g. /retry), then
        tool rounds while the model asks for tools (at most max_steps)."""
        state = self.state
        if prompt is not None:
            state.last_prompt = prompt
            if state.unanswered_prompt() == prompt:
                prompt = None   # the same prompt again after a failure: no second user entry
                state.branch = state.resend_point()
        if self.irq.count and state.path is None:
            self.say("[cancelled]", RED)    # nothing sent, no file yet: kept here for /retry
            return
        if state.path and state.fill is not None and state.fill > COMPACT_AT and not self.irq.count:
            self.say(f"[the context is {state.fill:.0%} full: compacting first]", DIM)
            self.compact(keep=1)
        t = self.request(prompt)
        if not t.cancelled and _context_full(t):
            self.say("[the context window is full: compacting, then sending again]", YELLOW)
            at = last_prompt_entry(t.session) if t.ok else None
            if self.compact(at=at["id"] if at else None, keep=1):
                t = self.request(None)
            if not t.cancelled and not self.irq.count and _context_full(t):
                # still refused (or nothing could be compacted): the prompt alone does not fit.
                # Set aside, it cannot block the session (SPEC 5.1); /retry sends it again.
                self.set_aside(t)
                return
        self.tool_rounds(t)

    def set_aside(self, t):
        """The prompt alone does not fit the context window (compacting did not
        help, or there was nothing to compact): one line says so; in a session with a file the prompt stays there on a
        branch of its own, marked (mark_set_aside), and the next prompt continues
        from the entry before it. A first prompt (no file yet) leaves nothing to mark."""
        state = self.state
        session = t.session if t.session is not None else state.session
        prompt = last_prompt_entry(session) if session is not None and state.path else None
        model = (prompt or {}).get("model") or self.settings.shown(session)[1]
        self.say(SET_ASIDE.format(model=terminal.visible_line(model)), RED)
        if prompt is None:
            return
        if mark_set_aside(state.path, session, prompt):
            state.branch = prompt["parentId"]

    def request(self, prompt):
        """One request to the model (prompt None: the conversation as it is); its Outcome."""
        attached = self.attachments(prompt) if prompt is not None else None
        if attached is not None:       # @PATH mentions: the prompt goes in as an entry of its own
            t = self.step([self.plumbing.send(), self.plumbing.sink()], stdin_data=attached)
        else:
            prompt_file = _write_prompt(prompt) if prompt is not None else None
            try:
                t = self.step(self.plumbing.source() + [self.plumbing.send(prompt_file), self.plumbing.sink()])
            finally:
                if prompt_file:
                    os.unlink(prompt_file)
        if self.state.branch and (t.session is None or t.session.leaf != self.state.branch):
            self.state.branch = None    # the branch is made: it is the active path now
        if (t.cancelled or not t.ok) and not _context_full(t):
            self.no_reply(t)
        self.report(t)
        return t

    def no_reply(self, t):
        """A prompt left with no reply (cancelled, failed) is recorded as such
        (a noReply entry after it): when another prompt follows, the model is
        told (conversation.no_reply_notes), and the prompt stays as typed."""
        import orjson

        from pantolib.conversation import NO_REPLY

        from pantolib import compaction, stream

        leaf = t.session.leaf_message() if t.session is not None and self.state.path else None
        if leaf is None or t.session.leaf != leaf["id"] or not compaction.is_prompt(leaf):
            return
        record = {"type": NO_REPLY, "reason": "cancelled" if t.cancelled or self.irq.count else "failed"}
        statuses, data = Pipeline([self.plumbing.sink()], stdin_data=orjson.dumps(record) + b"\n").run()
        if statuses == [cli.OK] and self.state.session is t.session:
            try:
                for line in stream.read(io.BytesIO(data)):
                    if line.kind == stream.ENTRY:
                        t.session.add(line)
            except PantoError:
                pass
            self.state.forget_echo()

    def tool_rounds(self, t):
        """The agent loop after a request: tool rounds while the model asks for
        tools, at most max_steps requests in all."""
        steps = 1
        while (t.ok and not t.cancelled and not self.irq.count and t.session is not None
               and _wants_tools(t.session)):
            if steps >= self.settings.max_steps:
                n = len(t.session.unanswered_tool_uses())
                self.say(f"[stopped after {plural(steps, 'step')} (--max-steps): {plural(n, 'tool call')} "
                         "left unanswered; type a prompt to go on]", RED)
                return
            if self.state.path is None:     # cannot happen after a reply, but never lose the stream
                self.say("[the session was not saved; stopping]", RED)
                return
            queued = self.screen.queued_line()     # steering: a prompt entered while the turn runs
            if queued:
                self.say("queued: " + terminal.visible_line(queued)[:200] + " (sent with the tool results)", DIM)
            prompt_file = _write_prompt(queued) if queued else None
            tool = self.plumbing.tool()
            try:
                t = self.step(self.plumbing.source() + [tool, self.plumbing.send(prompt_file), self.plumbing.sink()])
            finally:
                keys = self.plumbing.granted(tool)
                if keys and self.screen.editor is not None:
                    self.screen.type_ahead(keys)
                if prompt_file:
                    os.unlink(prompt_file)
            if queued:
                self.state.last_prompt = queued
                if t.cancelled or not t.ok:     # it got no reply: recorded, and back at the prompt
                    self.no_reply(t)
                    if t.cancelled and self.screen.editor is not None:
                        self.screen.prefill = queued
            self.report(t)
            steps += 1
        if (t.cancelled or self.irq.count) and not _aborted_shown(t):
            self.say("[cancelled]", RED)    # one line: a partial reply's usage line says "aborted"

    def compact(self, instructions=None, at=None, keep=None):
        """Compact the session (panto-send --compact); True when it worked.
        By itself panto keeps only the last prompt (keep=1): the context is full."""
        state = self.state
        if not self._compactable(at, keep):
            self.say("nothing to compact yet", DIM)
            return False
        extra = ["--compact"] + (["--keep", str(keep)] if keep else []) + ([instructions] if instructions else [])
        before = state.session.leaf if state.session is not None else None
        t = self.step(self.plumbing.source(at=at) + [self.plumbing.send(extra=extra), self.plumbing.sink()],
                      "compacting ")
        if t.cancelled:
            self.say("[cancelled]", RED)
            return False
        if not t.ok:
            self.say("[compaction failed]", RED)
            return False
        state.branch = None
        if t.session is None or t.session.leaf == before or \
                t.session.by_id.get(t.session.leaf, {}).get("type") != "compaction":
            self.say("nothing to compact yet", DIM)      # no request was made: no usage line
            return False
        state.fill = None
        self.report(t)
        return True

    def _compactable(self, at, keep):
        """Whether the conversation has a part before the kept prompts to summarize (compaction.py's rule);
        True when it cannot be told here (the send decides then)."""
        from pantolib import compaction

        if self.state.path is None:
            return False    # no file yet: a first prompt, nothing before it
        if self.state.session is None or (at or self.state.branch):
            return True
        try:
            _, _, kept = self.state.session.context()
        except (KeyError, TypeError, ValueError):
            return True
        return compaction.cut(kept, keep or compaction.DEFAULT_KEEP) > 0

    def report(self, t):
        """After each reply (or compaction): one dim line of its usage. A step
        that wrote no entry (a resend refused again) has no line: the leaf it
        left is an earlier step's, whose line was shown then."""
        if t.session is None or t.cancelled and not t.shown or t.session.leaf == t.before:
            return
        leaf = t.session.by_id.get(t.session.leaf) if t.session.leaf else None
        if leaf is None or leaf.get("type") not in ("message", "compaction"):
            return
        msg = leaf.get("message", leaf)
        if leaf.get("type") == "message" and msg.get("role") != "assistant":
            return
        line, fill = usage_line(msg, t.seconds, self.settings.env)
        if fill is not None:
            self.state.fill = fill
        self.say(line, DIM)


def usage_line(msg, seconds, env):
    """The line shown after a reply (tokens, cost, share of the context, time),
    and that share of the context window (None when models.toml does not tell)."""
    from pantolib import entries
    from pantolib.prices import format_usd, prompt_tokens, turn_cost

    usage = entries.usage_of(msg)
    provider, model = msg.get("provider"), msg.get("model")
    parts, fill = [], None
    if usage is not None:
        tokens_in = prompt_tokens(msg.get("usage"))
        cached = f" ({usage['cacheRead'] / tokens_in:.0%} cached)" if tokens_in and usage["cacheRead"] else ""
        parts += [f"{tokens_in:,} in{cached}", f"{usage['output']:,} out"]
        table = load_prices(env)
        if table is not None:
            cost = turn_cost(usage, table.get(provider, model))
            if cost is not None:
                parts.append(format_usd(cost))
            fill = context_fill(table, provider, model, tokens_in)
            if fill is not None:
                parts.append(f"{fill:.0%} of the context")
    if msg.get("stopReason") == "aborted":
        parts.append("aborted")
    elif msg.get("stopReason") == "length":
        parts.append("cut at the token limit")
    parts.append(f"{seconds:.1f}s")
    return "  " + " · ".join(parts), fill


def context_fill(table, provider, model, tokens_in):
    """The share of the model's context window (models.toml) that tokens_in take, or None."""
    from pantolib.prices import context_window

    size = context_window(table, provider, model) if table is not None else None
    return tokens_in / size if size else None


def load_prices(env):
    """The price table (models.toml), or None when it cannot be read."""
    from pantolib import models_toml

    try:
        return models_toml.load(env=env)
    except PantoError:
        return None


def mark_set_aside(path, session, prompt):
    """Mark a prompt set aside: an empty assistant entry with stopReason
    "contextFull" and usage 0 (the server refused: nothing was billed) after
    the leaf of its branch (the prompt, or the compaction tried after it),
    appended to the session file; True when it is written."""
    from pantolib import entries, stream

    mark = entries.make_message("assistant", [], session.leaf, set(session.by_id))
    mark["message"].update({k: prompt[k] for k in ("provider", "model", "api") if prompt.get(k)})
    mark["message"]["stopReason"] = "contextFull"
    mark["message"]["usage"] = {"input": 0, "output": 0}   # a refused request is not billed: priced, at 0
    statuses, data = Pipeline([Cmd(command_argv("panto-log", "replay", "--at", session.leaf, path))]).run()
    if statuses != [cli.OK]:
        return False
    statuses, _ = Pipeline([Cmd(command_argv("panto-log", "append", path))],
                           stdin_data=data + stream.dumps(mark)).run()
    return statuses == [cli.OK]


def set_aside_from(session):
    """The entry the next prompt continues from when the session's leaf marks a
    prompt set aside (mark_set_aside: an empty "contextFull" reply), else None."""
    leaf = session.leaf_message() if session is not None else None
    if leaf is None or leaf["id"] != session.leaf:
        return None
    m = leaf["message"]
    if m["role"] != "assistant" or m.get("stopReason") != "contextFull" or m["content"]:
        return None
    prompt = last_prompt_entry(session)
    return prompt["parentId"] if prompt is not None else None


def last_prompt_entry(session):
    """The last user entry with text on the session's path, or None."""
    from pantolib import compaction

    for e in reversed(session.message_entries()):
        if compaction.is_prompt(e):
            return e
    return None


def _context_full(t):
    if cli.CONTEXT_FULL in t.statuses:
        return True
    leaf = t.session.leaf_message() if t.session is not None else None
    return (t.ok and leaf is not None and leaf["message"]["role"] == "assistant"
            and leaf["message"].get("stopReason") == "contextFull")


def _wants_tools(session):
    leaf = session.leaf_message()
    return (leaf is not None and leaf["message"]["role"] == "assistant"
            and leaf["message"].get("stopReason") == "toolUse" and bool(session.unanswered_tool_uses()))


def _aborted_shown(t):
    """Whether a partial reply was shown and kept (its usage line says so)."""
    leaf = t.session.leaf_message() if t.session is not None and t.shown else None
    return (leaf is not None and leaf["message"]["role"] == "assistant"
            and leaf["message"].get("stopReason") == "aborted")


def _write_prompt(prompt):
    import tempfile

    fd, name = tempfile.mkstemp(prefix="panto-prompt-", suffix=".txt")
    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(prompt)
    return name
