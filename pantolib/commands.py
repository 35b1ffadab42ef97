"""The REPL's /commands: each runs the plumbing (panto-log tree, name,
replay --at, panto-send --compact, panto-cost) or edits the REPL's own state
(the branch point, the model, the allowance file)."""
import os
import signal
import subprocess

from pantolib import paths, terminal
from pantolib.errors import PantoError
from pantolib.pipeline import Cmd, Pipeline, command_argv, read_session
from pantolib.providers import NAMES as PROVIDERS

HELP = """\
commands:
  /model PROVIDER MODEL   switch model (openai or anthropic) from the next prompt on
  /model                  show the model in use
  /edit                   write the prompt in $EDITOR
  /retry                  send the last prompt again (after a reply: a new reply beside it)
  /rewind [N | ID]        list the earlier prompts; take back prompt N (or entry ID)
  /tree                   the session's entries as a tree, branches included
  /fork                   go on in a new session file holding this conversation
  /name TITLE             give the session a title
  /compact [TEXT]         summarize the older part of the conversation (TEXT: what to keep)
  /allowed [clear]        what "always" allowed in this run; clear forgets it
  /cost                   what this session has cost so far (panto-cost)
  /session                show the session file
  /help                   this help
  /quit                   leave (Ctrl-D does too)
keys: Enter sends; a line ending in \\ goes on on the next line; a paste is one prompt;
Up/Down history; Ctrl-A/E start/end; Ctrl-U/K kill to start/end; Ctrl-W word back;
Ctrl-C cancels the running request or tool (at the prompt: clears the line).\
"""
DIM, RED, BOLD = "\033[2m", "\033[31m", "\033[1m"


def plural(n, word, many=None):
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def settings(provider=None, model=None, session=None, env=None):
    """(provider, model, base URL shown) as panto-send will choose them: option,
    then the session's active model, then the environment."""
    from pantolib import providers, secrets

    env = os.environ if env is None else env
    active = session.active_model() if session is not None else None
    name, options, _ = providers.configure({"provider": provider, "model": model}, active, env)
    return name, options.model, secrets.shown_url(options.base_url)


class Commands:
    """The /commands of Repl (which supplies say, turn, step, the pipelines and the state)."""

    def command(self, line):
        """A /command: False to quit."""
        name, _, rest = line.strip().partition(" ")
        rest = rest.strip()
        args = rest.split()
        if name in ("/quit", "/exit", "/q"):
            return False
        if name == "/help":
            self.say(HELP)
        elif name == "/model":
            if not args:
                provider, model, base = settings(self.provider, self.model, self.session, self.env)
                self.say(f"model: {provider}: {model} @ {base}")
            elif len(args) != 2 or args[0] not in PROVIDERS:
                self.say("usage: /model PROVIDER MODEL (PROVIDER is openai or anthropic)", RED)
            else:
                self.provider, self.model = args
                self.fill = None
                self.say(f"model: {self.provider}: {self.model} (from the next prompt on)")
        elif name == "/cost":
            if self.path is None:
                self.say("nothing spent yet: no session file")
            else:
                self._show(command_argv("panto-cost", self.path))
        elif name == "/session":
            self.say(self.path or "no session file yet (it is created by the first reply)")
        elif name == "/edit":
            text = self.edit_prompt(rest)
            if text:
                self.turn(text)
        elif name == "/retry":
            self.retry()
        elif name == "/rewind":
            self.rewind(rest)
        elif name == "/tree":
            if self._need_file():
                self._show(command_argv("panto-log", "tree", self.path))
        elif name == "/fork":
            self.fork()
        elif name == "/name":
            if not rest:
                self.say("usage: /name TITLE", RED)
            elif self._need_file():
                if self._show(command_argv("panto-log", "name", rest, self.path)):
                    self.say(f"named: {terminal.visible_line(rest)}")
        elif name == "/compact":
            if self._need_file():
                self.compact(instructions=rest or None)
        elif name == "/allowed":
            self.allowed(rest)
        else:
            self.say(f"unknown command '{terminal.visible_line(name)}' (try /help)", RED)
        return True

    def _need_file(self):
        if self.path is None:
            self.say("no session file yet (it is created by the first reply)")
            return False
        return True

    def _show(self, argv):
        """Run one command and show its output (neutralized); True when it succeeded."""
        pipe = Pipeline([Cmd(argv)])
        statuses, data = pipe.run()
        if data:
            self.out.write(terminal.visible(data.decode("utf-8", "replace")))
            self.out.flush()
        return statuses == [0]

    def retry(self):
        if self.path is None:
            if self.last_prompt is None:
                self.say("nothing to retry yet")
            else:
                self.turn(self.last_prompt)
            return
        session = self.session
        if session is None:
            self.say("nothing to retry yet")
            return
        leaf = session.leaf_message()
        prompt = self._last_prompt_entry(session)
        text = prompt and next(b["text"] for b in reversed(prompt["message"]["content"]) if b.get("type") == "text")
        if self.last_prompt is not None and text != self.last_prompt and not self.branch:
            # the last prompt typed never reached the file: send that one, never an earlier one
            self.say("retrying: " + terminal.visible_line(self.last_prompt)[:200], DIM)
            self.turn(self.last_prompt)
            return
        if prompt is None:
            self.say("nothing to retry yet")
            return
        self.say("retrying: " + terminal.visible_line(text)[:200], DIM)
        # after a failed turn the prompt is the leaf: send it as it is; after a
        # reply: a new reply to the same prompt, beside the old one (a branch)
        self.branch = None if leaf is not None and leaf["id"] == prompt["id"] else prompt["id"]
        self._agent(self._request(None))

    def prompts(self):
        """The user prompts on the active path: [(entry, text)]."""
        out = []
        for e in (self.session.message_entries() if self.session else []):
            m = e["message"]
            texts = [b["text"] for b in m["content"] if b.get("type") == "text"]
            if m["role"] == "user" and texts:
                out.append((e, texts[-1]))
        return out

    def rewind(self, arg):
        found = self.prompts()
        if not found:
            self.say("no prompts to go back to")
            return
        if not arg:
            for i, (e, text) in enumerate(found, 1):
                first = terminal.visible_line(text.strip().split("\n")[0])[:100]
                self.say(f"{i:3}  {e['id'][:8]}  {first}")
            self.say("/rewind N (or an id) takes that prompt back: the next prompt replaces it", DIM)
            return
        chosen = None
        if arg.isdigit() and 1 <= int(arg) <= len(found):
            chosen = found[int(arg) - 1]
        else:
            matches = [f for f in found if f[0]["id"].startswith(arg)]
            if len(matches) == 1:
                chosen = matches[0]
        if chosen is None:
            self.say(f"no prompt '{terminal.visible_line(arg)}' (see /rewind)", RED)
            return
        entry, text = chosen
        parent = entry.get("parentId")
        if parent is None:
            self.say("that prompt has nothing before it to continue from", RED)
            return
        self.branch = parent
        self.prefill = text
        self.say(f"taken back: {terminal.visible_line(text)[:100]}", DIM)
        self.say("the next prompt continues from before it (a branch; nothing is removed)", DIM)

    def fork(self):
        if not self._need_file():
            return
        from pantolib import entries, stream

        leaf = self.branch or (self.session.leaf if self.session else None)
        src = Pipeline([Cmd(command_argv("panto-log", "replay", *(["--at", leaf] if leaf else []), self.path))])
        statuses, data = src.run()
        if statuses != [0] or not data:
            self.say("cannot fork: the session could not be read", RED)
            return
        first, _, rest = data.partition(b"\n")
        import orjson

        old = orjson.loads(first)
        header = entries.make_header()
        header["parentSession"] = old.get("id")
        sink = Pipeline([self._sink_new()], stdin_data=stream.dumps(header) + rest)
        statuses, echoed = sink.run()
        try:
            session = read_session(echoed)
        except PantoError:
            session = None
        if statuses != [0] or session is None or session.header is None:
            self.say("cannot fork: the new session could not be written", RED)
            return
        self.path = paths.session_path(session.header)
        self.session, self.branch = session, None
        self.say(f"forked: now in session {header['id']} (from {old.get('id')})")

    def _sink_new(self):
        return Cmd(command_argv("panto-log", "append", sigint=False))

    def compact(self, instructions=None, at=None, keep=None):
        """Compact the session (panto-send --compact); True when it worked.
        By itself panto keeps only the last prompt (keep=1): the context is full."""
        extra = ["--compact"] + (["--keep", str(keep)] if keep else []) + ([instructions] if instructions else [])
        t = self.step(self._source(at=at) + [self._send(extra=extra), self._sink()], "compacting ")
        if t.cancelled:
            self.say("[cancelled]", RED)
            return False
        if not t.ok:
            self.say("[compaction failed]", RED)
            return False
        self.branch = None
        self.fill = None
        self._report(t)
        return True

    def allowed(self, arg):
        if self.allow_file is None:
            self.say("nothing is allowed (no allowance file in this run)")
            return
        if arg == "clear":
            with open(self.allow_file, "w"):
                pass
            self.say("allowances cleared: every call asks again")
            return
        if arg:
            self.say("usage: /allowed [clear]", RED)
            return
        try:
            with open(self.allow_file, encoding="utf-8", errors="replace") as f:
                lines = [x.strip() for x in f if x.strip()]
        except OSError:
            lines = []
        if not lines:
            self.say("nothing allowed yet: every bash, write and edit call asks")
        for x in lines:
            kind, _, what = x.partition(":")
            self.say(f"  {terminal.visible_line(kind)} {terminal.visible_line(what)}".rstrip())

    def edit_prompt(self, initial=""):
        """Write a prompt in $VISUAL or $EDITOR (vi): its text, or None when left empty."""
        import shlex
        import tempfile

        editor = self.env.get("VISUAL") or self.env.get("EDITOR") or "vi"
        fd, name = tempfile.mkstemp(prefix="panto-prompt-", suffix=".md")   # 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(initial)
            # Ctrl-C belongs to the editor while it runs, not to panto
            old = signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                status = subprocess.call(shlex.split(editor) + [name],
                                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
            except (OSError, ValueError, subprocess.SubprocessError) as e:
                self.say(f"cannot start the editor '{terminal.visible_line(editor)}': {e}", RED)
                return None
            finally:
                signal.signal(signal.SIGINT, old)
            if status != 0:
                self.say(f"the editor exited with status {status}: nothing sent", RED)
                return None
            with open(name, encoding="utf-8", errors="surrogateescape") as f:
                text = f.read()
        finally:
            try:
                os.unlink(name)
            except OSError:
                pass
        text = text.rstrip("\n")
        if not text.strip():
            self.say("empty prompt: nothing sent", DIM)
            return None
        lines = text.split("\n")
        self.say("> " + terminal.visible(lines[0]) + (f"  … ({plural(len(lines), 'line')})" if len(lines) > 1 else ""),
                 BOLD)
        return text
