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
    """The file a session belongs in, by its header's cwd and id."""
    return os.path.join(session_dir(header["cwd"], env), header["id"] + SUFFIX)


def cache_dir(env=None):
    return _xdg(env, "XDG_CACHE_HOME", (".cache",))


def _xdg(env, var, fallback):
    env = os.environ if env is None else env
    base = env.get(var) or os.path.join(env.get("HOME") or os.path.expanduser("~"), *fallback)
    return os.path.join(base, "panto")


def state_dir(env=None):
    """$XDG_STATE_HOME/panto: the REPL's history, tools allowed 'always'."""
    return _xdg(env, "XDG_STATE_HOME", (".local", "state"))


def config_dir(env=None):
    return _xdg(env, "XDG_CONFIG_HOME", (".config",))


def list_dir(directory):
    """(path, os.stat_result) of every session file in a folder; none if it is missing."""
    try:
        it = os.scandir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    with it:
        for d in it:
            if d.name.endswith(SUFFIX) and not d.name.startswith("."):
                try:
                    if d.is_file():
                        out.append((d.path, d.stat()))
                except OSError:
                    continue
    return out


def all_dirs(env=None):
    root = sessions_root(env)
    try:
        with os.scandir(root) as it:
            return sorted(d.path for d in it if d.is_dir() and not d.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return []


def read_header(path):
    """The parsed header of a session file, or None if its first line is not one."""
    import orjson

    try:
        with open(path, "rb") as f:
            first = f.readline(1 << 20)
    except OSError:
        return None
    try:
        obj = orjson.loads(first)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is dict and obj.get("type") == "session" and isinstance(obj.get("id"), str):
        return obj
    return None


def _candidates(cwd):
    """Session files of this directory whose header cwd really is this directory."""
    out = []
    for path, st in list_dir(session_dir(cwd)):
        header = read_header(path)
        if header is not None and header.get("cwd") == cwd:
            out.append((path, st, header))
    return out


def last_session(cwd=None):
    """The session of this directory with the most recent activity (mtime), or None."""
    cwd = os.getcwd() if cwd is None else cwd
    found = _candidates(cwd)
    if not found:
        return None
    return max(found, key=lambda c: (c[1].st_mtime_ns, c[0]))[0]


def resolve(arg, cwd=None):
    """A SESSION argument -> path: an existing path, an id, or a unique id prefix."""
    cwd = os.getcwd() if cwd is None else cwd
    if os.path.exists(arg):
        if os.path.isdir(arg):
            raise PantoError(f"'{arg}' is a directory, not a session file")
        return arg
    if "/" in arg or ".." in arg or arg.endswith(SUFFIX):
        raise PantoError(f"'{arg}': no such session file")
    if not arg:
        raise PantoError("empty session id")
    found = [c for c in _candidates(cwd) if c[2]["id"].startswith(arg)]
    exact = [c for c in found if c[2]["id"] == arg]
    if exact:
        return exact[0][0]
    if not found:
        raise PantoError(f"no session '{arg}' in {session_dir(cwd)} (see panto-ls)")
    if len(found) > 1:
        ids = ", ".join(sorted(c[2]["id"] for c in found)[:10])
        more = "" if len(found) <= 10 else f" and {len(found) - 10} more"
        raise PantoError(f"session id '{arg}' is ambiguous: {ids}{more}")
    return found[0][0]
