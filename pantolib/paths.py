"""Where sessions live, and how a SESSION argument names one."""
import os

from pantolib.errors import PantoError

SUFFIX = ".jsonl"


def sessions_root(env=None):
    env = os.environ if env is None else env
    if env.get("PANTO_SESSION_DIR"):
        return env["PANTO_SESSION_DIR"]
    if env.get("XDG_DATA_HOME"):
        return os.path.join(env["XDG_DATA_HOME"], "panto", "sessions")
    home = env.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".local", "share", "panto", "sessions")


def encode_cwd(cwd):
    """`/Users/t/Code/p` -> `--Users-t-Code-p--` (leading slashes dropped)."""
    body = cwd.lstrip("/")
    for ch in "/\\:":
        body = body.replace(ch, "-")
    return f"--{body}--"


def session_dir(cwd=None, env=None):
    return os.path.join(sessions_root(env), encode_cwd(os.getcwd() if cwd is None else cwd))


def session_path(header, env=None):
    """The file a session belongs in, by its header's cwd and id. The id must
    be a canonical UUID: nothing else may become a file name."""
    sid, cwd = header.get("id"), header.get("cwd")
    if not is_session_id(sid):
        shown = repr(sid)[:80]
        raise PantoError(f"the session id {shown} is not a UUID, so it cannot name a session file "
                         f"(give the session FILE to append to)")
    if not isinstance(cwd, str) or "\0" in cwd:
        raise PantoError("the session header's 'cwd' cannot name a directory")
    return os.path.join(session_dir(cwd, env), sid + SUFFIX)


def cache_dir(env=None):
    return _xdg(env, "XDG_CACHE_HOME", (".cache",))


def _xdg(env, var, fallback):
    env = os.environ if env is None else env
    base = env.get(var) or os.path.join(env.get("HOME") or os.path.expanduser("~"), *fallback)
    return os.path.join(base, "panto")


def data_dir(env=None):
    """$XDG_DATA_HOME/panto: what panto keeps for the user (files' contents before a tool changed them)."""
    return _xdg(env, "XDG_DATA_HOME", (".local", "share"))


def state_dir(env=None):
    """$XDG_STATE_HOME/panto: the REPL's history, the fields servers refused (providers/refusals.py)."""
    return _xdg(env, "XDG_STATE_HOME", (".local", "state"))


def config_dir(env=None):
    return _xdg(env, "XDG_CONFIG_HOME", (".config",))


def list_dir(directory):
    """(path, os.stat_result) of every session file in a folder, sorted by
    name; none if the folder is missing.

    The folder is read through a descriptor, so that each file's stat looks
    up its name alone, not every folder of its path again (over 10,000
    sessions that walk was a tenth of a report where nothing changed). The
    names are sorted before they are stat'ed, so the results lie in memory
    in the order they are used: a report's key over 10,000 files, built from
    them, took twice as long when they were sorted after. A symbolic link
    counts as the file it names, as a stat follows it."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    try:
        prefix, stat = os.path.join(directory, ""), os.stat
        # names alone, then one stat each: a third faster than scandir's entries
        for name in sorted([n for n in os.listdir(fd) if n.endswith(SUFFIX) and not n.startswith(".")]):
            try:
                st = stat(name, dir_fd=fd)
            except OSError:
                continue
            if st.st_mode & 0o170000 == 0o100000:   # a regular file (stat.S_ISREG, without importing stat)
                out.append((prefix + name, st))
    finally:
        os.close(fd)
    return out


def all_dirs(env=None):
    root = sessions_root(env)
    try:
        with os.scandir(root) as it:
            return sorted(d.path for d in it if d.is_dir() and not d.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return []


def read_header(path):
    """The parsed header of a session file, or None if its first line is not
    a valid header (stream.header_of, the rule every reader shares)."""
    from pantolib import stream

    try:
        with open(path, "rb") as f:
            first = f.readline(1 << 20)
    except OSError:
        return None
    return stream.header_of(first)


_HEX = frozenset("0123456789abcdef")


def is_session_id(text):
    """A session id is a UUID in its canonical 8-4-4-4-12 hex form (it names a file)."""
    if not isinstance(text, str) or len(text) != 36 or not text[8] == text[13] == text[18] == text[23] == "-":
        return False
    digits = text.replace("-", "")
    return len(digits) == 32 and _HEX.issuperset(digits)


def _candidates(cwd):
    """Session files of this directory whose header cwd really is this directory."""
    out = []
    for path, st in list_dir(session_dir(cwd)):
        header = read_header(path)
        if header is not None and header.get("cwd") == cwd and is_session_id(header["id"]):
            out.append((path, st, header))
    return out


def last_session(cwd=None, kept=None):
    """The session of this directory with the most recent activity, or None.

    Activity is the timestamp of a session's last entry (its mtime only when
    no entry has a valid one), as panto-ls orders sessions: copying or
    touching files does not change which one is the last. A lone candidate
    is the last without reading its tail (whose last line may be 100 MB).
    With `kept` (a list), the line of the chosen file that decided its
    activity is added to it (scan.last_timestamp), for its reader.
    """
    from pantolib import scan

    cwd = os.getcwd() if cwd is None else cwd
    candidates = _candidates(cwd)
    if len(candidates) == 1:
        return candidates[0][0]
    best = None
    for path, st, header in candidates:
        lines = []
        try:
            key = (scan.activity(scan.last_timestamp(path, lines), st.st_mtime_ns), header["id"])
        except OSError:
            continue
        if best is None or key > best[0]:
            best = (key, path, lines)
    if best is None:
        return None
    if kept is not None:
        kept.extend(best[2])
    return best[1]


def _matching(directory, prefix):
    """(id, path) of the sessions in a folder whose id starts with prefix.

    Files are named by their header's id (panto-log append names them so);
    the header is read to confirm it."""
    out = []
    for path, _ in list_dir(directory):
        stem = os.path.basename(path)[:-len(SUFFIX)]
        if not stem.startswith(prefix):
            continue
        header = read_header(path)
        if header is not None and header["id"].startswith(prefix) and is_session_id(header["id"]):
            out.append((header["id"], path))
    return out


def candidates(prefix, cwd=None, env=None):
    """(id, path) of the sessions an id prefix names: this directory's, else
    every other directory's (the order SPEC 4.2 resolves in); none for what
    cannot be an id."""
    if not prefix or "/" in prefix or ".." in prefix or "\0" in prefix:
        return []
    here = session_dir(os.getcwd() if cwd is None else cwd, env)
    found = _matching(here, prefix)
    return found or [f for d in all_dirs(env) if d != here for f in _matching(d, prefix)]


def _one(found, arg):
    exact = [f for f in found if f[0] == arg]
    if exact or len(found) == 1:
        return (exact or found)[0][1]
    shown = sorted(found)[:10]
    ids = ", ".join(f"{i} ({p})" for i, p in shown)
    more = "" if len(found) <= 10 else f" and {len(found) - 10} more"
    raise PantoError(f"session id '{arg}' is ambiguous: {ids}{more} (give more of it)")


def resolve(arg, cwd=None, env=None):
    """A SESSION argument -> the path of its file (SPEC §4.2).

    An existing path is taken as it is. Otherwise arg is a session id or a
    unique prefix of one, looked up in this directory's sessions folder
    first, then among every directory's; an ambiguous prefix is an error
    naming the candidates. An argument with `/` or `..` that is not an
    existing path is refused (an id never has them).
    """
    cwd = os.getcwd() if cwd is None else cwd
    if os.path.exists(arg):
        if os.path.isdir(arg):
            raise PantoError(f"'{arg}' is a directory, not a session file")
        return arg
    if "/" in arg or ".." in arg or arg.endswith(SUFFIX) or "\0" in arg:
        raise PantoError(f"'{arg}': no such session file")
    if not arg:
        raise PantoError("empty session id")
    found = candidates(arg, cwd, env)
    if found:
        return _one(found, arg)
    here = session_dir(cwd, env)
    raise PantoError(f"no session '{arg}' in {here} or any other directory's sessions (see panto-ls --all)")
