"""Which tool calls run unasked: the rules, the commands that are always
asked, and what "always" offers (SPEC §6, "Permissions").

A rule is `bash:WORDS` (a word prefix of a command line), `write` or `edit`
(the tool, anywhere under the working directory). A bash command line runs
unasked only when it is one simple command (no separator anywhere in its
raw text) whose first words equal a rule's words, word for word, and that
nothing here always asks about. Words are split on runs of spaces and tabs;
quotes are part of a word. Rules come from the user's own file
($XDG_CONFIG_HOME/panto/allow), from PANTO_ALLOW_FILE, and from this run
("always"); nothing in a project can grant one.

Deciding what a command line *does* (a `find -delete`, a `sed -i`, a
`python -c`) looks at each word as the shell will pass it: quotes and
backslashes removed; a word the shell expands (`$x`, `{a,b}`, a glob that
could become an option) might be anything, so it counts as forbidden.
"""
import os
import re
import stat

SEPARATORS = (";", "&", "|", "`", "$(", ">", "<", "\n")
# names that delete, overwrite, move, or stop things: asked every time
DESTRUCTIVE = frozenset(
    "rm rmdir unlink shred dd truncate mkfs chmod chown chgrp mv ln kill pkill killall "
    "shutdown reboot halt poweroff crontab wipefs mkswap fdisk sfdisk parted".split())
# commands whose job is to run another command: a rule for them would allow anything
WRAPPERS = frozenset(
    "sh bash zsh dash ksh mksh fish csh tcsh busybox env sudo doas su runuser pkexec eval exec command "
    "builtin xargs parallel nohup nice ionice timeout time watch setsid stdbuf chroot unshare nsenter "
    "strace ltrace flock script fakeroot firejail systemd-run unbuffer coproc taskset chrt prlimit numactl "
    "sg ssh bwrap proot valgrind . source".split())
FIND_ACTIONS = frozenset("-delete -exec -execdir -ok -okdir -fprint -fprint0 -fprintf -fls".split())
AWKS = frozenset("awk gawk mawk nawk".split())
# interpreter families: (name pattern, letters of an inline program in a
# cluster of short options, long options that give one, letters whose value
# is the rest of the cluster, whether option parsing stops at the script)
_INTERPRETERS = (
    ("python", re.compile(r"(python|pypy)[0-9.]*"), "c", (), "WX", True),
    ("perl", re.compile(r"perl[0-9.]*"), "eE", (), "IMmxdDC", True),
    ("node", re.compile(r"node|nodejs|deno|bun"), "ep", ("--eval", "--print"), "rC", False),
    ("ruby", re.compile(r"ruby[0-9.]*"), "eE", (), "IrCxFKTW", False),
    ("php", re.compile(r"php[0-9.]*"), "rRBE", (), "cdfzt", False),
    ("lua", re.compile(r"lua[0-9.]*|luajit"), "e", (), "l", False),
    ("julia", re.compile(r"julia"), "eE", ("--eval", "--print"), "CJLOHt", False),
    ("Rscript", re.compile(r"Rscript"), "e", (), "", False),
    ("elixir", re.compile(r"elixir"), "e", ("--eval",), "r", False),
)
_NAME = re.compile(r"[A-Za-z0-9_./+:@%-]+")   # a command name "always" can name
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_PLAIN = re.compile(r"[A-Za-z0-9_:][A-Za-z0-9_:-]*")
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
MAX_WORDS = 3            # words of a rule that "always" makes
MAX_FILE = 1 << 20       # bytes of a rules file


class Rule:
    """`bash:WORDS`, `write` or `edit`, with its words split."""

    __slots__ = ("tool", "words", "text")

    def __init__(self, tool, words=()):
        self.tool, self.words = tool, tuple(words)
        self.text = f"bash:{' '.join(self.words)}" if tool == "bash" else tool

    def __eq__(self, other):
        return isinstance(other, Rule) and self.text == other.text

    def __hash__(self):
        return hash(self.text)

    def __repr__(self):
        return f"Rule({self.text!r})"

    @property
    def shown(self):
        """How the question names it: the words, or the tool."""
        return " ".join(self.words) if self.tool == "bash" else self.tool

    def matches_nothing(self):
        """A bare interpreter name: it must name more (`python -m pytest`)."""
        return self.tool == "bash" and len(self.words) == 1 and interpreter(self.words[0]) is not None


def parse(text):
    """The Rule a text names, or raise ValueError saying what is wrong."""
    text = text.strip(" \t")
    if text in ("write", "edit"):
        return Rule(text)
    if not text.startswith("bash:"):
        raise ValueError(f"'{text}' is not a rule (bash:WORDS, write or edit)")
    words = split_words(text[5:])
    if not words:
        raise ValueError("'bash:' names no command (bash:WORDS, e.g. bash:git status)")
    found = next((s for s in SEPARATORS if s in text), None)
    if found is not None:
        shown = "a newline" if found == "\n" else f"'{found}'"
        raise ValueError(f"'{text}' holds {shown}: a rule is the first words of one simple command")
    return Rule("bash", words)


def split_words(line):
    """Words as the rules see them: split on runs of spaces and tabs, quotes kept."""
    return [w for w in re.split(r"[ \t]+", line) if w]


# -- the rules in effect --------------------------------------------------------------

class Rules:
    """Rules and where each comes from ("this run", FILE:LINE)."""

    def __init__(self, items=()):
        self.items = []          # [(Rule, origin)]
        for rule, origin in items:
            self.add(rule, origin)

    def add(self, rule, origin):
        if all(r != rule for r, _ in self.items):
            self.items.append((rule, origin))

    def remove_from(self, origin):
        self.items = [(r, o) for r, o in self.items if o != origin]

    def __iter__(self):
        return iter(self.items)

    def __len__(self):
        return len(self.items)

    def bash_rule(self, words):
        """The longest bash rule whose words begin the command's words, or None."""
        best = None
        for rule, _ in self.items:
            n = len(rule.words)
            if (rule.tool == "bash" and tuple(words[:n]) == rule.words and not rule.matches_nothing()
                    and (best is None or n > len(best.words))):
                best = rule
        return best

    def tool_rule(self, tool):
        return next((r for r, _ in self.items if r.tool == tool), None)


def user_file(env=None):
    """The user's own rules: $XDG_CONFIG_HOME/panto/allow (else ~/.config/panto/allow).
    A relative XDG_CONFIG_HOME is ignored (it would be inside the project)."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or ""
    if not os.path.isabs(base):
        base = os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
    return os.path.join(base, "panto", "allow")


def rule_files(env=None):
    """[(path, label)] of the files rules are read from: the user's, then PANTO_ALLOW_FILE."""
    env = os.environ if env is None else env
    out = [(user_file(env), None)]
    if env.get("PANTO_ALLOW_FILE"):
        out.append((os.path.abspath(env["PANTO_ALLOW_FILE"]), "PANTO_ALLOW_FILE"))
    return out


def read_file(path):
    """([(Rule, line number)], [problem]) of a rules file. A missing file is
    no rules; one that is not a regular file is refused without being opened
    for long (never a FIFO read, never a device); a bad line is one problem
    naming FILE:LINE, and is ignored."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return [], []
    except OSError as e:
        return [], [f"cannot read the rules file '{path}' ({e.strerror}): its rules do not apply"]
    if not stat.S_ISREG(st.st_mode):
        return [], [_refused(path, st.st_mode)]
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        return [], []
    except OSError as e:
        return [], [f"cannot read the rules file '{path}' ({e.strerror}): its rules do not apply"]
    try:
        st = os.fstat(fd)         # what was opened, not what was looked at
        if not stat.S_ISREG(st.st_mode):
            return [], [_refused(path, st.st_mode)]
        if st.st_size > MAX_FILE:
            return [], [f"the rules file '{path}' is larger than {MAX_FILE >> 20} MB: its rules do not apply"]
        chunks, got = [], 0
        while got <= MAX_FILE:
            chunk = os.read(fd, MAX_FILE + 1 - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as e:
        return [], [f"cannot read the rules file '{path}' ({e.strerror}): its rules do not apply"]
    finally:
        os.close(fd)
    if got > MAX_FILE:
        return [], [f"the rules file '{path}' is larger than {MAX_FILE >> 20} MB: its rules do not apply"]
    rules, problems = [], []
    for number, raw in enumerate(b"".join(chunks).split(b"\n"), 1):
        line = raw.decode("utf-8", "replace").rstrip("\r")
        body = re.split(r"(?:^|[ \t])#", line, maxsplit=1)[0].strip(" \t")
        if not body:
            continue
        try:
            rule = parse(body)
        except ValueError as e:
            problems.append(f"{path}:{number}: {e}; the line is ignored")
            continue
        if rule.matches_nothing():
            problems.append(f"{path}:{number}: '{rule.text}' matches nothing (a rule for an interpreter must "
                            f"name more, e.g. 'bash:{rule.words[0]} -m pytest'); the line is ignored")
            continue
        rules.append((rule, number))
    return rules, problems


def _refused(path, mode):
    from pantolib.files import kind

    return f"the rules file '{path}' is not a regular file ({kind(mode)}): it was not read"


def load(env=None):
    """(Rules, problems) of the rules files: the user's, then PANTO_ALLOW_FILE."""
    rules, problems = Rules(), []
    for path, label in rule_files(env):
        found, said = read_file(path)
        problems += said
        where = f"{label} {path}" if label else path
        for rule, number in found:
            rules.add(rule, f"{where}:{number}")
    return rules, problems


# -- what the shell will pass ---------------------------------------------------------

def shell_value(word):
    """A word as the shell passes it (quotes and backslashes removed), or
    None when it cannot be known without running the shell: a parameter or
    ANSI-C expansion, a brace expansion, or a glob that could expand to an
    option or a name (one starting with a glob character or `-`)."""
    out, i, n, glob = [], 0, len(word), False
    while i < n:
        ch = word[i]
        if ch == "'":
            j = word.find("'", i + 1)
            if j < 0:
                return None
            out.append(word[i + 1:j])
            i = j + 1
        elif ch == '"':
            i += 1
            while i < n and word[i] != '"':
                c = word[i]
                if c == "$":
                    return None
                if c == "\\" and i + 1 < n and word[i + 1] in '$`"\\\n':
                    i += 1
                    c = word[i]
                out.append(c)
                i += 1
            if i >= n:
                return None
            i += 1
        elif ch == "\\":
            if i + 1 < n:
                out.append(word[i + 1])
            i += 2
        elif ch == "$":
            return None
        elif ch == "{" and word != "{}":
            return None
        else:
            if ch in "*?[":
                glob = True
            out.append(ch)
            i += 1
    text = "".join(out)
    if glob and (not text or text[0] in "-*?[" or word[0] in "*?["):
        return None
    return text


def shell_words(command):
    """The words of a simple command as the shell splits them (a quoted
    space does not split), still quoted; None when a quote is not closed."""
    words, i, n, start = [], 0, len(command), None
    while i < n:
        ch = command[i]
        if ch in " \t":
            if start is not None:
                words.append(command[start:i])
                start = None
            i += 1
            continue
        if start is None:
            start = i
        if ch == "\\":
            i += 2
        elif ch == "'":
            j = command.find("'", i + 1)
            if j < 0:
                return None
            i = j + 1
        elif ch == '"':
            i += 1
            while i < n and command[i] != '"':
                i += 2 if command[i] == "\\" else 1
            if i >= n:
                return None
            i += 1
        else:
            i += 1
    if start is not None:
        words.append(command[start:])
    return words


def interpreter(name):
    """The interpreter family a command name (its basename) belongs to, or None."""
    base = os.path.basename(name)
    for entry in _INTERPRETERS:
        if entry[1].fullmatch(base):
            return entry
    return None


# -- one command line -------------------------------------------------------------------

class Verdict:
    """What the rules say of one call: allowed (by `rule`), or asked (`why`);
    `offer` is the rule "always" would add (None: not offered, and `note`
    says why in a few words, for the question)."""

    __slots__ = ("rule", "why", "offer", "note")

    def __init__(self, rule=None, why=None, offer=None, note=None):
        self.rule, self.why, self.offer = rule, why, offer
        self.note = note or why

    @property
    def allowed(self):
        return self.rule is not None

    def __repr__(self):
        return f"Verdict(rule={self.rule}, why={self.why!r}, offer={self.offer})"


def check(command, rules):
    """The Verdict of the rules on a bash command line."""
    found = next((s for s in SEPARATORS if s in command), None)
    if found is not None:
        shown = "a newline" if found == "\n" else f"'{found}'"
        return Verdict(why=f"not one simple command ({shown} in it): asked every time")
    words = split_words(command)
    if not words:
        return Verdict(why="an empty command line")
    always = always_asked(command)
    if always:
        return Verdict(why=f"{always}: asked every time")
    offer = offered(command)
    rule = rules.bash_rule(words)
    if rule is not None:
        return Verdict(rule=rule, offer=offer)
    if offer is not None:
        return Verdict(why=f"no rule matches (\"always\" would add '{offer.text}')", offer=offer)
    if interpreter(words[0]):
        note = f"no \"always\": a rule for '{words[0]}' must name more than the interpreter"
    else:
        note = f"no \"always\": '{words[0]}' is not a plain command name"
    return Verdict(why=f"no rule matches ({note})", note=note)


def always_asked(command):
    """Why a simple command is asked whatever the rules, or None."""
    words = shell_words(command)
    if words is None:
        return "a quote is not closed"
    while words and _ASSIGNMENT.match(words[0]):
        words = words[1:]          # `LC_ALL=C rm x` runs rm
    if not words:
        return None
    name = shell_value(words[0])
    if name is None or any(c in name for c in "*?["):
        return f"the command name '{words[0]}' is not plain"
    base = os.path.basename(name)
    if base in DESTRUCTIVE or base.startswith("mkfs."):
        return f"'{base}' deletes or changes files or processes"
    if base in WRAPPERS:
        return f"'{base}' runs other commands"
    if base in AWKS:
        return f"'{base}' programs can run commands"
    args = [shell_value(w) for w in words[1:]]
    if base == "find":
        for raw, a in zip(words[1:], args):
            if a is None:
                return f"'find' with a word the shell expands ('{raw}')"
            if a in FIND_ACTIONS:
                return f"'find {a}' deletes, writes or runs commands"
        return None
    if base == "sed" or re.fullmatch(r"perl[0-9.]*", base):
        edit = _in_place(base, args, words[1:])
        if edit:
            return edit
    if base == "sed":
        return _sed_program(args, words[1:])
    family = interpreter(base)
    if family:
        return _inline(family, base, args, words[1:])
    return None


def _in_place(base, args, raws):
    """Why sed/perl edits files in place (-i…, also in combined flags, --in-place…), or None."""
    perl = base != "sed"
    for raw, a in zip(raws, args):
        if a is None:
            return f"'{base}' with a word the shell expands ('{raw}')"
        if a == "--":
            break
        if a.startswith("--"):
            name = a[2:].split("=", 1)[0]
            if name and "in-place".startswith(name):
                return f"'{base} {a}' edits files in place"
            continue
        if a.startswith("-") and len(a) > 1:
            for j, ch in enumerate(a[1:]):
                if ch == "i":
                    return f"'{base} {a}' edits files in place"
                if perl and ch in "eE":
                    break      # an inline program: said by _inline
                if (not perl and ch in "efl") or (perl and ch in "IMmxdDC"):
                    break      # the rest is this option's value
        elif perl:
            break              # the script: the rest are its arguments
    return None


# a sed program that can only print, delete and substitute (no e, w, r…)
_ADDR = r"(?:\d+(?:~\d+)?|\$|/(?:\\.|[^/\\])*/[IM]*)"
_RANGE = rf"(?:{_ADDR}(?:\s*,\s*(?:{_ADDR}|[+~]\d+))?\s*!?)?"
_S = r"s(?P<d>[^\\\s\w])(?:\\.|(?!(?P=d)).)*(?P=d)(?:\\.|(?!(?P=d)).)*(?P=d)[gpiImM0-9]*"
_Y = r"y(?P<e>[^\\\s\w])(?:\\.|(?!(?P=e)).)*(?P=e)(?:\\.|(?!(?P=e)).)*(?P=e)"
_SED_PLAIN = rf"\s*{_RANGE}\s*(?:[pdDnNPhHgGxz=l]|[qQ]\d*|{_S}|{_Y})?\s*"   # compiled when a sed is seen


def _sed_program(args, raws):
    """Why a sed command is asked although it does not edit in place (a
    program that can run commands or write files: GNU sed's e, w, W, r…), or None."""
    scripts, plain_words, from_file, k = [], [], False, 0
    sandbox = "--sandbox" in args
    while k < len(args):
        a = args[k]
        if a == "--":
            plain_words += args[k + 1:]
            break
        if a.startswith("--"):
            name, eq, value = a[2:].partition("=")
            if name and "expression".startswith(name):     # GNU sed takes any unique abbreviation
                if not eq:
                    k += 1
                    value = args[k] if k < len(args) else ""
                scripts.append(value)
            elif name and "file".startswith(name):
                from_file = True
            elif len(name) > 1 and "line-length".startswith(name) and not eq:
                k += 1             # its value
        elif a.startswith("-") and len(a) > 1:
            letters = a[1:]
            for j, ch in enumerate(letters):
                if ch in "ef":
                    value = letters[j + 1:]
                    if not value:
                        k += 1
                        value = args[k] if k < len(args) else ""
                    if ch == "e":
                        scripts.append(value)
                    else:
                        from_file = True
                    break
                if ch == "l":
                    if not letters[j + 1:]:
                        k += 1
                    break
        else:
            plain_words.append(a)
        k += 1
    if sandbox:
        return None
    if from_file:
        return "'sed -f' runs a program from a file (it may run commands or write files)"
    if not scripts and plain_words:
        scripts = plain_words[:1]
    for script in scripts:
        if not re.fullmatch(_SED_PLAIN, script, re.S):
            return "a 'sed' program that may run commands or write files (only p, d, s, y and the like are plain)"
    return None


def _inline(family, base, args, raws):
    """Why an interpreter is given an inline program, or None."""
    kind, _, letters, longs, valued, stops = family
    k = 0
    if kind == "node" and base == "deno":
        first = next((a for a in args if a is None or not a.startswith("-")), "")
        if first is None or first == "eval":
            return f"'deno {first or raws[0]}' runs an inline program"
    while k < len(args):
        a, raw = args[k], raws[k]
        if a is None:
            return f"'{base}' with a word the shell expands ('{raw}')"
        if a == "--":
            break
        if a.startswith("--"):
            name = a.split("=", 1)[0]
            if name in longs:
                return f"'{base} {name}' runs an inline program"
            if kind == "python" and name == "--check-hash-based-pycs" and "=" not in a:
                k += 1                   # its value is the next word
        elif a.startswith("-") and len(a) > 1:
            for j, ch in enumerate(a[1:]):
                if ch in letters:
                    return f"'{base} -{ch}' runs an inline program"
                if kind == "python" and ch == "m":
                    return None          # a module: the rest are its arguments
                if ch in valued:
                    if not a[j + 2:]:
                        k += 1           # the value is the next word
                    break
        elif stops:
            return None                  # the script: the rest are its arguments
        k += 1
    return None


def offered(command):
    """The rule "always" adds for a simple command (the name and the plain
    words after it, at most three; `-m MODULE` for python), or None when it
    would say nothing (always asked, a name that is not plain, a bare interpreter)."""
    words = split_words(command)
    if not words or any(s in command for s in SEPARATORS) or always_asked(command):
        return None
    name = words[0]
    if not _NAME.fullmatch(name) or name.startswith("-"):
        return None
    family = interpreter(name)
    taken = [name]
    rest = words[1:]
    if family and family[0] == "python" and len(rest) >= 2 and rest[0] == "-m" and _MODULE.fullmatch(rest[1]):
        taken += rest[:2]
        rest = rest[2:]
    for w in rest:
        if len(taken) >= MAX_WORDS or not _PLAIN.fullmatch(w):
            break
        taken.append(w)
    rule = Rule("bash", taken)
    return None if rule.matches_nothing() else rule


def protected(path, env=None):
    """Why write and edit always ask for a path, or None: a rules file, or a
    file inside a .git directory (its config and hooks run commands that a
    rule such as bash:git status would then run unasked)."""
    real = os.path.realpath(path)
    if any(os.path.realpath(p) == real for p, _ in rule_files(env)):
        return "a rules file: asked every time"
    if ".git" in real.split(os.sep) or ".git" in os.path.normpath(path).split(os.sep):
        return "inside .git, whose config and hooks run commands: asked every time"
    return None
