"""The interactive agent: a prompt loop (Repl) wired from small parts, each
handed what it needs:

    screen.Screen          what is shown and typed: the lines, the prompt, the keys held during a turn
    agent.Settings         what the plumbing is told: provider, model, API, --yes, the permission rules
    agent.SessionState     where the conversation stands: the file, the session, the branch, the last prompt
    agent.Agent            what a prompt sets going: the request, the tool rounds, compaction
    slash.Commands         the /commands, handed the four above

The REPL keeps no conversation of its own: the session file is the state
(agent.py shows the pipelines each step runs).
"""
import os

from pantolib import signals, terminal
from pantolib.agent import Agent, SessionState, Settings, context_fill, load_prices, set_aside_from
from pantolib.errors import PantoError
from pantolib.screen import Screen, plural
from pantolib.slash import Commands, names
from pantolib.terminal import BOLD, CYAN, DIM, RED, YELLOW


class Repl:
    """Prompts until Ctrl-D or /quit (loop): a /command goes to the Commands,
    anything else to the Agent as a turn; and what is shown before the first
    prompt (banner, load, start_notes, show_last_exchange)."""

    def __init__(self, path=None, provider=None, model=None, api=None, yes=False, max_steps=25, tools=True,
                 out=None, err=None, history=None, env=None, context_files=True, rules=None):
        self.settings = Settings(provider=provider, model=model, api=api, yes=yes, tools=tools,
                                 context_files=context_files, max_steps=max_steps, env=env, rules=rules)
        self.state = SessionState(path)
        self.screen = Screen(self.settings.env, out, err, history, names())
        self.agent = Agent(self.screen, self.settings, self.state)
        self.commands = Commands(self.screen, self.settings, self.state, self.agent)
        self.say = self.screen.say

    def banner(self, session=None):
        provider, model, base = self.settings.shown(session)
        return f"panto — {provider}: {model} @ {base}"

    # -- resuming ------------------------------------------------------------------------
    def load(self):
        """Replay the session file (repairing a torn tail): the Session (PantoError when it cannot be read)."""
        t = self.agent.step(self.agent.plumbing.source(whole=True))
        if not t.ok or t.session is None:
            raise PantoError(f"cannot read the session '{self.state.path}'")
        self.state.branch = set_aside_from(t.session)   # a prompt too long for the context stays aside
        from pantolib.prices import prompt_tokens

        for e in reversed(t.session.message_entries()):    # how full the context was last
            m = e["message"]
            if m["role"] == "assistant" and type(m.get("usage")) is dict:
                self.state.fill = context_fill(load_prices(self.settings.env), m.get("provider"), m.get("model"),
                                               prompt_tokens(m["usage"]))
                break
        return t.session

    def show_last_exchange(self, session):
        from pantolib import compaction

        entries = session.message_entries()
        start = 0
        for i in range(len(entries) - 1, -1, -1):
            if compaction.is_prompt(entries[i]):
                start = i
                break
        for e in entries[start:]:
            m = e["message"]
            for b in m["content"]:
                t = b.get("type")
                if t == "text" and m["role"] == "user":
                    self.say("> " + terminal.visible(b["text"]), BOLD)
                elif t == "text" and m["role"] == "assistant":
                    md = self.screen.markdown()
                    md.text(b["text"])
                    md.end()
                elif t == "toolUse":
                    from pantolib.tools import runner

                    first = terminal.visible_line(runner.describe(b, 200).split("\n")[0])
                    self.say(f"⏺ {b['name']} {first}", CYAN)
                elif t == "toolResult":
                    lines = str(b.get("content", "")).rstrip("\n").split("\n")
                    more = f" … ({plural(len(lines), 'line')})" if len(lines) > 1 else ""
                    self.say("  " + terminal.visible_line(lines[0][:200]) + more, RED if b.get("isError") else DIM)
                elif t == "image":      # an imported session's (SPEC 12): its type and size, not its data
                    from pantolib.entries import image_text

                    self.say("  " + terminal.visible_line(image_text(b)), DIM)
        waiting = session.unanswered_tool_uses()
        if waiting:
            self.say(f"[the last turn was interrupted: {plural(len(waiting), 'tool call')} "
                     f"{'was' if len(waiting) == 1 else 'were'} never run and will "
                     "not be run now; type a prompt to go on]", RED)

    def start_notes(self, session):
        """After the banner: the instruction files a new session will read, and a missing API key."""
        env = self.settings.env
        if session is None and self.settings.context_files:
            from pantolib import instructions

            found = instructions.find(env=env)
            if found.files:
                shown = ", ".join(terminal.visible_line(shown_path(p, env)) for p, _ in found.files)
                self.say(f"instructions: {shown}", DIM)
            for note in found.notes:
                self.say(terminal.visible_line(note), YELLOW)
        from pantolib import providers, turn

        try:
            _, options, key_var = providers.configure({"provider": self.settings.provider,
                                                       "model": self.settings.model},
                                                      session.active_model() if session is not None else None, env)
            turn.need_key(options, key_var)
        except PantoError as e:
            self.say(f"{e}: every request will fail until it is", RED)

    # -- the loop ------------------------------------------------------------------------
    def loop(self, first=None):
        """Prompts until Ctrl-D or /quit; first: a prompt given on the command line, sent at once."""
        interrupts = 0      # Ctrl-C at an empty prompt, in a row
        try:
            while True:
                with self.agent.irq:      # from here on a Ctrl-C is counted for the turn, never raised
                    try:
                        if first is not None:
                            line, first = first, None
                            self.say("> " + terminal.visible(line), BOLD)
                        else:
                            line = self.screen.read_line(entered=self.agent.irq.reset)
                    except (terminal.Edit, KeyboardInterrupt) as e:
                        # Ctrl-C at the prompt, or just before it (then a signal)
                        how, text = (e.how, e.text) if isinstance(e, terminal.Edit) else ("interrupt", "")
                        if how == "eof" or signals.ending():     # Ctrl-D, a closed terminal, SIGTERM
                            return
                        if isinstance(e, KeyboardInterrupt):
                            self.screen.out.write("\n")
                        interrupts = interrupts + 1 if not text else 0
                        if interrupts >= 2:
                            self.say("(to quit, press Ctrl-D or type /quit)", DIM)
                        continue
                    interrupts = 0
                    if line.strip() and not self.take(line) or signals.ending():
                        return
        finally:
            self.screen.close()

    def take(self, line):
        """A line entered at the prompt: a /command, else a prompt for the agent
        (// at the start: a prompt starting with /); False to quit."""
        text = line.strip()
        if self.screen.editor is not None:
            if self.screen.editor.interrupted_ahead():     # Enter, then at once Ctrl-C
                self.agent.irq()
            self.screen.history.add(line)
        self.screen.hold_keys()
        try:
            if text.startswith("/") and not text.startswith("//"):
                return self.commands.run(text)
            if text.startswith("//"):
                line = line.replace("/", "", 1)
            self.agent.turn(line)
        except KeyboardInterrupt:  # between two pipelines: the session is whole
            self.say("[cancelled]", RED)
        finally:
            self.screen.release_keys()
        if self.screen.tty:
            self.screen.out.write("\n")
        return True


def shown_path(path, env=None):
    """A path for a person: relative below the working directory, ~ for the home directory."""
    env = os.environ if env is None else env
    cwd, home = os.getcwd(), env.get("HOME") or ""
    if path.startswith(cwd + os.sep):
        return os.path.relpath(path, cwd)
    if home and path.startswith(home.rstrip(os.sep) + os.sep):
        return "~" + path[len(home.rstrip(os.sep)):]
    return path
