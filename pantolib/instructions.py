"""The project's instructions, read into a new session's system prompt.

The files, outermost first: the user's own `$XDG_CONFIG_HOME/panto/AGENTS.md`,
then `AGENTS.md` (or, where a directory has none, `CLAUDE.md`) of each
directory from the top down to the working directory. The top is the
repository root (the first directory, going up, that holds `.git`) or the
home directory, whichever comes first; when neither is above the working
directory, only the working directory is read. Each file goes under a line
naming its path. A file past MAX_BYTES is cut there, with a note; a file that
cannot be read is left out with a one-line note, never an error.
"""
import os

NAMES = ("AGENTS.md", "CLAUDE.md")
MAX_BYTES = 64 * 1024


class Found:
    """What was read: [(path, text)] in order, and one-line notes on what was not."""

    def __init__(self):
        self.files, self.notes = [], []


def directories(cwd, home):
    """The directories whose instruction file is read, outermost first."""
    cwd = os.path.abspath(cwd)
    chain, d = [], cwd
    while True:
        chain.append(d)
        if os.path.exists(os.path.join(d, ".git")) or (home and d == home):
            return chain[::-1]
        parent = os.path.dirname(d)
        if parent == d:
            return [cwd]        # neither a repository root nor home above: this directory only
        d = parent


def user_file(env):
    from pantolib import paths

    return os.path.join(paths.config_dir(env), "AGENTS.md")


def find(cwd=None, env=None):
    """The instruction files for a session started in cwd (a Found)."""
    env = os.environ if env is None else env
    cwd = os.getcwd() if cwd is None else cwd
    home = env.get("HOME") or os.path.expanduser("~")
    home = os.path.abspath(home) if home else None
    found = Found()
    candidates = [[user_file(env)]] + [[os.path.join(d, n) for n in NAMES] for d in directories(cwd, home)]
    seen = set()
    for names in candidates:
        for path in names:
            if not os.path.lexists(path):
                continue
            real = os.path.realpath(path)
            if real in seen:    # the same file twice (a link, or home's own config): once
                break
            seen.add(real)
            text = _read(path, found.notes)
            if text is not None:
                found.files.append((path, text))
            break
    return found


def _read(path, notes):
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
            size = os.fstat(f.fileno()).st_size
    except OSError as e:
        notes.append(f"cannot read '{path}' ({e.strerror or e}): left out")
        return None
    text = data[:MAX_BYTES].decode("utf-8", "replace")
    if len(data) > MAX_BYTES:
        text = text.rstrip("\ufffd")     # a character cut in two
        notes.append(f"'{path}' is {size:,} bytes: only its first {MAX_BYTES:,} were read")
        text += f"\n\n[cut here: the file is {size:,} bytes, only the first {MAX_BYTES:,} are included]"
    return text


def system_prompt(base, found):
    """The system prompt followed by the instruction files, each under a line naming its path."""
    parts = [base.rstrip("\n")]
    for path, text in found.files:
        parts.append(f"Instructions from {path}:\n\n{text.rstrip()}")
    return "\n\n".join(parts)
