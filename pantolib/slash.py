"""The REPL's /commands: each runs the plumbing (panto-log tree, name,
replay --at, panto-send --compact, panto-cost) or edits the REPL's own state
(the branch point, the model, this run's rules)."""
import os
import signal
import subprocess

from pantolib import cli, paths, terminal
from pantolib.agent import last_prompt_entry
from pantolib.errors import PantoError
from pantolib.pipeline import Cmd, Pipeline, command_argv, read_session
from pantolib.providers import NAMES as PROVIDERS
from pantolib.screen import plural
from pantolib.terminal import BOLD, DIM, RED, YELLOW

HELP = """\
commands:
  /model [[PROVIDER] MODEL]  switch model from the next prompt on (MODEL alone: same provider)
  /model                  list models.toml's models, the one in use marked with its wire API
  /edit                   write the prompt in $EDITOR (back at the prompt: Enter sends it)
  /retry                  send the last prompt again (after a reply: a new reply beside it)
  /rewind [N | ID]        take back prompt N (or entry ID); alone: list them and ask which
  /tree                   the prompts and replies as a tree, branches included (● the path in use)
  /fork                   go on in a new session file holding this conversation
  /name TITLE             give the session a title
  /compact [TEXT]         summarize the older part of the conversation (TEXT: what to keep)
  /allowed [clear]        the rules in effect and where each comes from; clear forgets this run's
  /cost                   what this session has cost so far (panto-cost)
  /session                show the session file
  /help                   this help
  /quit                   leave (Ctrl-D does too)
keys: Enter sends; a line ending in \\ goes on on the next line; a paste is one prompt;
Tab completes a /command or an @path; Up/Down lines of the prompt, then history; Ctrl-A/E start/end; Ctrl-U/K kill to start/end;
Ctrl-W word back;
Ctrl-C cancels the running request or tool (at the prompt: clears the line).\
"""


def names():
    """The /commands, as HELP lists them (what Tab completes)."""
    import re

    return sorted(set(re.findall(r"^  (/[a-z]+)", HELP, re.M)))


class Commands:
    """The /commands, handed what they use:

    screen    what is shown and asked (screen.Screen), and the keys, let go around $EDITOR;
    settings  the provider and model (/model), --yes and the permission rules (/allowed);
    state     where the conversation stands (agent.SessionState), which /rewind, /retry, /fork move;
    agent     what runs a turn (/retry, /edit) or a compaction (/compact).

    /NAME ARG runs do_NAME(ARG), as the standard library's cmd module does.
    """

    def __init__(self, screen, settings, state, agent):
        self.screen, self.settings, self.state, self.agent = screen, settings, state, agent
        self.say = screen.say

    def run(self, line):
        """A /command: False to quit."""
        name, _, rest = line.strip().partition(" ")
        if name in ("/quit", "/exit", "/q"):
            return False
        handler = getattr(self, "do_" + name[1:], None)
        if handler is None:
            self.say(f"unknown command '{terminal.visible_line(name)}' (try /help)", RED)
        else:
            handler(rest.strip())
        return True

    def _need_file(self):
        if self.state.path is None:
            self.say("no session file yet (it is created by the first reply)")
            return False
        return True

    def _show(self, argv):
        """Run one command and show its output (neutralized); True when it succeeded."""
        pipe = Pipeline([Cmd(argv)])
        statuses, data = pipe.run()
        if data:
            self.screen.out.write(terminal.visible(data.decode("utf-8", "replace")))
            self.screen.out.flush()
        return statuses == [cli.OK]

    # -- the settings ------------------------------------------------------------------
    def do_help(self, arg):
        self.say(HELP)

    def do_model(self, arg):
        args = arg.split()
        if not args:
            self.list_models()
        elif len(args) == 1:        # a model of the provider in use
            provider, _, _ = self.settings.shown(self.state.session)
            self.settings.provider, self.settings.model = provider, args[0]
            self.state.fill = None
            self.say(f"model: {provider}: {args[0]} (from the next prompt on)")
        elif len(args) != 2 or args[0] not in PROVIDERS:
            self.say("usage: /model [[PROVIDER] MODEL] (PROVIDER is openai or anthropic)", RED)
        else:
            self.settings.provider, self.settings.model = args
            self.state.fill = None      # another model's context window
            self.say(f"model: {self.settings.provider}: {self.settings.model} (from the next prompt on)")

    def list_models(self):
        """The models of models.toml, the current one marked with its wire API."""
        from pantolib import models_toml, providers, secrets

        session = self.state.session
        active = session.active_model() if session is not None else None
        s = self.settings
        try:
            name, options, _ = providers.configure({"provider": s.provider, "model": s.model,
                                                    "api": s.api_for(s.provider)}, active, s.env)
            current = (name, options.model, options.api)
            base = secrets.shown_url(options.base_url)
            self.say(f"model: {name}: {options.model} @ {base} ({options.api})")
        except PantoError as e:
            self.say(str(e), RED)
            current = (None, None, None)
        try:
            table = models_toml.load(env=s.env)
        except PantoError as e:
            self.say(str(e), RED)
            table = models_toml.Prices()
        rows = sorted(table.table)
        if current[:2] not in rows and current[0]:
            rows.append(current[:2])
        width = max([len(f"{p}: {m}") for p, m in rows] or [0])
        for p, m in rows:
            here = (p, m) == current[:2]
            note = f"  ({current[2]}, in use)" if here else ""
            if here and (p, m) not in table.table:
                note += f"  not in {models_toml.default_path(s.env)}"
            self.say(f"{'*' if here else ' '} {terminal.visible_line(f'{p}: {m}'):<{width}}{note}",
                     BOLD if here else "")
        if not table.table:
            self.say(f"(no models in {models_toml.default_path(s.env)}: /model PROVIDER MODEL switches all the same)",
                     DIM)
        self.say("/model MODEL switches within the provider; /model PROVIDER MODEL to another", DIM)

    def do_allowed(self, arg):
        from pantolib import permissions

        rules = self.settings.rules
        if arg == "clear":
            n = sum(1 for _, origin in rules if origin == "this run")
            rules.remove_from("this run")
            self.say(f"this run's rules cleared ({n}): what they allowed asks again" if n else
                     "no rules of this run to clear")
            return
        if arg:
            self.say("usage: /allowed [clear]", RED)
            return
        if self.settings.yes:
            self.say("--yes: every call runs without asking", DIM)
        if not len(rules):
            self.say("no rules: every bash, write and edit call asks "
                     f"(rules that last go in {terminal.visible_line(permissions.user_file(self.settings.env))})")
            return
        width = max(len(rule.text) for rule, _ in rules)
        for rule, origin in rules:
            self.say(f"  {terminal.visible_line(rule.text):<{width}}  {terminal.visible_line(origin)}")

    # -- the session file --------------------------------------------------------------
    def do_session(self, arg):
        self.say(self.state.path or "no session file yet (it is created by the first reply)")

    def do_cost(self, arg):
        """The session's cost (panto-cost --json, the one pricing), drawn to
        fit the terminal: tokens in counted as the usage line counts them
        (input + cache read + cache write), and why a turn is unpriced."""
        import orjson

        if self.state.path is None:
            self.say("nothing spent yet: no session file")
            return
        statuses, data = Pipeline([Cmd(command_argv("panto-cost", "--json", self.state.path), stderr="pty")]).run(
            on_output=lambda cmd, d: None)
        try:
            report = orjson.loads(data) if statuses == [cli.OK] else None
        except orjson.JSONDecodeError:
            report = None
        if report is None:
            self._show(command_argv("panto-cost", self.state.path))     # its own words on what went wrong
            return
        for row, style in cost_rows(report, self.screen.columns(), self.settings.env):
            self.say(row, style)

    def do_name(self, arg):
        if not arg:
            self.say("usage: /name TITLE", RED)
        elif self._need_file():
            if self._show(command_argv("panto-log", "name", arg, self.state.path)):
                self.say(f"named: {terminal.visible_line(arg)}")

    def do_compact(self, arg):
        if self._need_file():
            self.agent.compact(instructions=arg or None)

    def do_tree(self, arg):
        """The session file's prompts and replies as a tree (tree_rows)."""
        if not self._need_file():
            return
        statuses, data = Pipeline([Cmd(command_argv("panto-log", "replay", self.state.path))]).run()
        try:
            session = read_session(data) if statuses == [cli.OK] else None
        except PantoError:
            session = None
        if session is None:
            self.say("cannot read the session to draw its tree", RED)
            return
        leaf = self.state.leaf()
        if leaf not in session.by_id:
            leaf = session.leaf
        rows = tree_rows(session, leaf, self.screen.columns())
        if not rows:
            self.say("no prompts yet")
        for text, active in rows:
            self.say(text, BOLD if active else "")

    def do_fork(self, arg):
        if not self._need_file():
            return
        leaf = self.state.leaf()
        src = Pipeline([Cmd(command_argv("panto-log", "replay", *(["--at", leaf] if leaf else []), self.state.path))])
        statuses, data = src.run()
        if statuses != [cli.OK] or not data:
            self.say("cannot fork: the session could not be read", RED)
            return
        header, lines = forked(data)
        statuses, echoed = Pipeline([Cmd(command_argv("panto-log", "append"))], stdin_data=lines).run()
        try:
            session = read_session(echoed)
        except PantoError:
            session = None
        if statuses != [cli.OK] or session is None or session.header is None:
            self.say("cannot fork: the new session could not be written", RED)
            return
        old_path, self.state.path = self.state.path, paths.session_path(session.header)
        self.state.session, self.state.branch = session, None
        self._keep_title(old_path, session)
        self.say(f"forked: now in session {header['id']} (from {header['parentSession']})")

    def _keep_title(self, old_path, session):
        """The title (/name) of the session forked from, written into the new file when its path lacks it."""
        from pantolib import scan

        try:
            title = scan.summarize(old_path).name
        except (OSError, scan.NotASession):
            return
        if title is None:
            return
        names = [e.get("name") for e in session.by_id.values() if e.get("type") == "sessionInfo"]
        if names and names[-1] == title:
            return
        if not self._show(command_argv("panto-log", "name", title, self.state.path)):
            self.say("the title was not kept in the new session (/name TITLE gives it one)", RED)

    # -- the prompts -------------------------------------------------------------------
    def do_edit(self, arg):
        text = edit_prompt(self.screen, self.settings.env, arg)
        if text and self.screen.editor is not None:
            self.screen.prefill = text     # back at the prompt for a last look: Enter sends it
        elif text:
            lines = text.split("\n")
            more = f"  … ({plural(len(lines), 'line')})" if len(lines) > 1 else ""
            self.say("> " + terminal.visible(lines[0]) + more, BOLD)
            self.agent.turn(text)

    def do_retry(self, arg):
        state = self.state
        if state.path is None:
            if state.last_prompt is None:
                self.say("nothing to retry yet")
            else:
                self.agent.turn(state.last_prompt)
            return
        session = state.session
        if session is None:
            self.say("nothing to retry yet")
            return
        leaf = session.leaf_message()
        prompt = last_prompt_entry(session)
        text = prompt and next(b["text"] for b in reversed(prompt["message"]["content"]) if b.get("type") == "text")
        if state.last_prompt is not None and text != state.last_prompt and not state.branch:
            # the last prompt typed never reached the file: send that one, never an earlier one
            self.say("retrying: " + terminal.visible_line(state.last_prompt)[:200], DIM)
            self.agent.turn(state.last_prompt)
            return
        if prompt is None:
            self.say("nothing to retry yet")
            return
        self.say("retrying: " + terminal.visible_line(text)[:200], DIM)
        # after a failed turn the prompt is the leaf: send it as it is; after a
        # reply: a new reply to the same prompt, beside the old one (a branch)
        state.branch = None if leaf is not None and session.leaf == prompt["id"] else prompt["id"]
        self.agent.tool_rounds(self.agent.request(None))

    def do_rewind(self, arg):
        found = self.prompts()
        if not found:
            self.say("no prompts to go back to")
            return
        chosen = self._choose(found, arg)
        if chosen is None:
            return
        entry, text = chosen
        parent = entry.get("parentId")
        if parent is None:
            self.say("that prompt has nothing before it to continue from", RED)
            return
        after = self._after(entry)
        self.state.branch = parent
        self.screen.prefill = text
        self.say(f"taken back: {terminal.visible_line(text)[:100]}", DIM)
        self.say("the next prompt continues from before it (a branch; nothing is removed)", DIM)
        self.files_back(after)

    def _after(self, entry):
        """The entries on the active path from entry on."""
        session = self.state.session
        path = session.path() if session is not None else []
        ids = [e.get("id") for e in path]
        return path[ids.index(entry["id"]):] if entry["id"] in ids else []

    def files_back(self, entries):
        """Offer to put back the files write and edit changed in entries (pantolib.undo):
        a file changed since is named and left alone unless the person says so;
        the bash commands that ran are named (what they did is not undone)."""
        from pantolib import undo
        from pantolib.tools.common import ToolError

        changed = undo.changes(entries)
        ran = undo.commands(entries)
        if ran:
            self.say(f"{plural(len(ran), 'command')} ran since then and cannot be undone:", YELLOW)
            for c in ran[:10]:
                self.say("  $ " + terminal.visible_line(c)[:150], DIM)
            if len(ran) > 10:
                self.say(f"  … and {len(ran) - 10} more", DIM)
        if not changed:
            return
        cwd = os.getcwd()
        shown = {p: (os.path.relpath(p, cwd) if p.startswith(cwd + os.sep) else p) for p in changed}
        self.say(f"{plural(len(changed), 'file')} changed since then:")
        for p, (before, last) in changed.items():
            self.say(f"  {terminal.visible_line(shown[p])}" + (" (created then)" if before is None else ""))
        if self.screen.ask_line("put them back as they were? (y/N) ").strip().lower() not in ("y", "yes"):
            self.say("files left as they are", DIM)
            return
        for p, (before, last) in changed.items():
            name = terminal.visible_line(shown[p])
            if undo.current(p) != last:
                answer = self.screen.ask_line(f"'{name}' was changed since (by a person or a command); "
                                              "put it back all the same? (y/N) ")
                if answer.strip().lower() not in ("y", "yes"):
                    self.say(f"left as it is: {name}", YELLOW)
                    continue
            try:
                undo.put_back(p, before, self.settings.env)
            except (OSError, ValueError, PantoError, ToolError) as e:
                self.say(f"cannot put back '{name}': {e}", RED)
                continue
            self.say(f"put back: {name}" + (" (removed: it did not exist)" if before is None else ""), DIM)

    def _choose(self, found, arg):
        """The (entry, text) of found that arg names (a number or an id prefix),
        asked for when arg is empty; None (and why, shown) when there is none."""
        if not arg:
            for i, (e, text) in enumerate(found, 1):
                first = terminal.visible_line(text.strip().split("\n")[0])[:100]
                self.say(f"{i:3}  {e['id'][:8]}  {first}")
            arg = self.screen.ask_line("rewind to (number, Enter to cancel): ").strip()
            if not arg:
                self.say("nothing taken back", DIM)
                return None
            if not (arg.isdigit() and 1 <= int(arg) <= len(found)):
                self.say(f"'{terminal.visible_line(arg)[:40]}' is not a number from 1 to {len(found)}: "
                         "nothing taken back", RED)
                return None
        if arg.isdigit() and 1 <= int(arg) <= len(found):
            return found[int(arg) - 1]
        matches = [f for f in found if f[0]["id"].startswith(arg)]
        if len(matches) == 1:
            return matches[0]
        self.say(f"no prompt '{terminal.visible_line(arg)}' (see /rewind)", RED)
        return None

    def prompts(self):
        """The user prompts on the active path (user_prompts), read from the
        file when the turns' stream leaves out what came before a compaction."""
        from pantolib import stream

        session = self.state.session
        if session is not None and stream.is_partial(session.header) and self.state.path:
            statuses, data = Pipeline(self.agent.plumbing.source(whole=True)).run()
            try:
                session = read_session(data) if statuses == [0] else session
            except PantoError:
                pass    # the partial path still names the prompts since the compaction
        return user_prompts(session) if session else []


def cost_rows(report, cols, env=None):
    """[(row, style)] of /cost for panto-cost's JSON report, at most cols - 1
    wide: per model the turns, tokens in (input + cache read + cache write,
    as the usage line counts them), out and cost; the total; and why turns
    are unpriced (a reply with no usage reported: cancelled; a model that
    models.toml does not name: the file to add it to)."""
    from pantolib import models_toml
    import textwrap

    from pantolib.prices import format_usd

    try:
        table = models_toml.load(env=env)
    except PantoError:
        table = models_toml.Prices()

    def tokens_in(d):
        return d["input"] + d["cacheRead"] + d["cacheWrite"]

    def cost(d):
        if d.get("picoUsd") is not None:
            return format_usd(d["picoUsd"])
        known = d.get("knownPicoUsd") or 0
        return f"≥ {format_usd(known)}" if known else "unknown"

    models = report.get("models") or []
    total = report["total"]
    cells = [[f"{terminal.visible_line(str(m.get('provider')))}: {terminal.visible_line(str(m.get('model')))}",
              f"{m['turns']:,}", f"{tokens_in(m):,}", f"{m['output']:,}", cost(m)] for m in models]
    cells.append(["total", f"{total['turns']:,}", f"{tokens_in(total):,}", f"{total['output']:,}", cost(total)])
    head = ["model", "turns", "in", "out", "cost"]
    widths = [max(len(r[i]) for r in cells + [head]) for i in range(5)]
    rest = sum(widths[1:]) + 2 * 4
    widths[0] = max(8, min(widths[0], cols - 1 - rest))

    def line(r):
        name = r[0] if len(r[0]) <= widths[0] else r[0][:widths[0] - 1] + "…"
        return "  ".join([name.ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]).rstrip()

    rows = [(line(head), DIM)] + [(line(r), "") for r in cells[:-1]] + [(line(cells[-1]), BOLD)]
    cancelled = missing = 0
    where = models_toml.default_path(env)
    for m in models:
        n = m.get("unpricedTurns") or 0
        if not n:
            continue
        if table.periods(m.get("provider"), m.get("model")) is None:
            missing += n
            rows.append((f"unpriced: {plural(n, 'turn')} of {m.get('provider')}: {m.get('model')}, a model "
                         f"{where} does not name (add its prices there)", YELLOW))
        else:
            cancelled += n
    if cancelled:
        rows.append((f"unpriced: {plural(cancelled, 'reply', 'replies')} with no usage reported "
                     "(cancelled before the usage came)", YELLOW))
    out = []
    for r, style in rows:       # a long note wraps; the table's rows fit already
        parts = textwrap.wrap(r, max(20, cols - 1), subsequent_indent="  ") if style == YELLOW else [r]
        out += [(p, style) for p in parts]
    return out


def user_prompts(session):
    """[(entry, text)] of the user messages with text on the session's path."""
    out = []
    for e in session.message_entries():
        m = e["message"]
        texts = [b["text"] for b in m["content"] if b.get("type") == "text"]
        if m["role"] == "user" and texts:
            out.append((e, texts[-1]))
    return out


def forked(data):
    """A new session holding the entries of the stream data (its parentSession:
    data's session, its relation "fork"): (its header, its stream). Each copied
    turn (an assistant message, a compaction, a branch summary) is written
    without its usage and with `billedIn`, the session that paid for it (SPEC
    8: each response is paid once; a reply whose usage is unknown is then
    unpriced once, not once per copy); the other lines are copied byte for
    byte."""
    import orjson

    from pantolib import entries, stream

    first, _, rest = data.partition(b"\n")
    header = entries.make_header()
    parent = orjson.loads(first).get("id")
    header["parentSession"], header["relation"] = parent, "fork"
    out = [stream.dumps(header)]
    for raw in rest.split(b"\n"):
        if not raw:
            continue
        obj = stream.loads(raw)
        if obj is not None:
            obj = _billed_copy(obj, parent)
        out.append(raw + b"\n" if obj is None else stream.dumps(obj))
    return header, b"".join(out)


def _billed_copy(entry, paid_in):
    """The copy of a turn paid in session `paid_in`, or None when the entry is
    no turn or is marked already (a copy keeps the session that paid)."""
    from pantolib import entries, stream

    if entries.billed_in(entry) is not None:
        return None
    if stream.is_assistant(entry):
        copy = dict(entry, message={k: v for k, v in entry["message"].items() if k != "usage"})
    elif stream.is_compaction(entry) or stream.is_branch_summary(entry):
        copy = {k: v for k, v in entry.items() if k != "usage"}
    else:
        return None
    copy["billedIn"] = paid_in
    return copy


def edit_prompt(screen, env, initial=""):
    """Write a prompt in $VISUAL or $EDITOR (vi): its text, or None when left empty."""
    import shlex
    import tempfile

    editor = env.get("VISUAL") or env.get("EDITOR") or "vi"
    fd, name = tempfile.mkstemp(prefix="panto-prompt-", suffix=".md")   # 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(initial)
        # Ctrl-C belongs to the editor while it runs, not to panto
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        held = screen.keys_held
        screen.release_keys()     # the editor gets the terminal as the person left it
        try:
            status = subprocess.call(shlex.split(editor) + [name],
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        except (OSError, ValueError, subprocess.SubprocessError) as e:
            screen.say(f"cannot start the editor '{terminal.visible_line(editor)}': {e}", RED)
            return None
        finally:
            signal.signal(signal.SIGINT, old)
            if held:
                screen.hold_keys()
        if status != 0:
            screen.say(f"the editor exited with status {status}: nothing sent", RED)
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
        screen.say("empty prompt: nothing sent", DIM)
        return None
    return text


def _label(entry):
    """A tree row's text for an entry it shows, or None for one it passes over
    (the system prompt, tool results, titles and entries of unknown types)."""
    if entry.get("type") == "compaction":
        return "≡ [compacted]"
    if entry.get("type") != "message":
        return None
    msg = entry["message"]
    texts = [b.get("text", "") for b in msg["content"] if b.get("type") == "text"]
    if msg["role"] == "user" and texts:
        return "> " + texts[-1]
    if msg["role"] == "assistant":
        calls = [f"[{b.get('name')}]" for b in msg["content"] if b.get("type") == "toolUse"]
        return "⏺ " + " ".join(([texts[0]] if texts and texts[0].strip() else []) + calls)
    return None


def tree_rows(session, leaf, cols):
    """[(row, on the active path)]: one row per prompt and reply, in file order.
    A chain of single children stays at one depth; where an entry has several
    children each starts a branch drawn with `├─` / `└─`, so siblings are at
    the same depth. Rows on the path to leaf start with `●`; each row is cut
    to cols - 1 columns."""
    from pantolib.conversation import chain

    parent_of = {eid: e.get("parentId") for eid, e in session.by_id.items()}
    active = set(chain(parent_of, leaf)) if leaf in parent_of else set()
    labels = {eid: _label(e) for eid, e in session.by_id.items()}

    def shown_parent(eid):
        p, seen = parent_of.get(eid), set()
        while p is not None and labels.get(p) is None and p not in seen:
            seen.add(p)
            p = parent_of.get(p)
        return p if p in labels else None

    kids = {}
    for eid in session.by_id:           # file order
        if labels[eid] is not None:
            kids.setdefault(shown_parent(eid), []).append(eid)
    rows = []

    def draw(eid, lead, rest):
        while True:
            text = terminal.visible_line(labels[eid].strip())
            on = eid in active
            rows.append((("● " if on else "  ") + lead + text, on))
            below = kids.get(eid, [])
            if len(below) != 1:
                break
            eid, lead = below[0], rest
        for i, k in enumerate(below):
            last = i == len(below) - 1
            todo.append((k, rest + ("└─ " if last else "├─ "), rest + ("   " if last else "│  ")))

    roots = kids.get(None, [])
    todo = []
    if len(roots) == 1:
        todo.append((roots[0], "", ""))
    else:
        todo += [(k, "└─ " if i == len(roots) - 1 else "├─ ", "   " if i == len(roots) - 1 else "│  ")
                 for i, k in enumerate(roots)]
    todo.reverse()
    while todo:             # depth first without recursion: a long session is not a deep stack
        n = len(todo)
        draw(*todo.pop())
        todo[n - 1:] = todo[n - 1:][::-1]
    return [(_fit(text, cols - 1), on) for text, on in rows]


def _fit(text, cols):
    if terminal.text_width(text) <= cols:
        return text
    out, w = [], 0
    for ch in text:
        cw = terminal.cell_width(ch)
        if w + cw > cols - 1:
            break
        out.append(ch)
        w += cw
    return "".join(out) + "…"
