"""Every test gets its own HOME, XDG folders, session directory and working
directory, with no provider keys or panto settings leaking in from outside."""
import os
import shutil
import signal
import subprocess

import pytest

LEAKY_PREFIXES = ("OPENAI_", "ANTHROPIC_", "PANTO_")
# other agents' folders (panto-log import): a test never reads the real ones
AGENT_HOMES = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "PI_CODING_AGENT_DIR", "OPENCODE_DATA_DIR")

# The price table of the seed's pricing tests (its figures x 10^4 in picodollars).
SEED_TOML = """\
[anthropic."claude-sonnet-4-20250514"]
input = 3.0
output = 15.0
cache_read = 0.3
cache_write = 3.75

[openai.gpt-4o]
input = 2.5
output = 10.0
cache_read = 1.25

[openai.gpt-4o-mini]
input = 0.15
output = 0.6
"""


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    for key in list(os.environ):
        if key.startswith(LEAKY_PREFIXES) or key in AGENT_HOMES:
            monkeypatch.delenv(key)
    home = tmp_path / "home"
    work = tmp_path / "work"
    for d in (home, work):
        d.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    monkeypatch.setenv("PANTO_SESSION_DIR", str(home / "sessions"))
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.delenv("PYTHONWARNINGS", raising=False)
    monkeypatch.chdir(work)
    return work


@pytest.fixture
def agents_home(isolated, monkeypatch):
    """HOME with Claude Code's and Codex's folders under it (created by each test as it writes sources)."""
    home = os.environ["HOME"]
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", os.path.join(home, "claude"))
    monkeypatch.setenv("CODEX_HOME", os.path.join(home, "codex"))
    return home


@pytest.fixture
def sessions(isolated):
    """The session directory of the test's working directory (may not exist yet)."""
    from pantolib import paths

    return paths.session_dir(str(isolated))


def run(args, input=b"", cwd=None, env=None, timeout=60):
    """Run a console script (found on PATH) with bytes in and bytes out."""
    if isinstance(input, str):
        input = input.encode()
    exe = shutil.which(args[0])
    assert exe, f"{args[0]} is not on PATH (run the tests with the venv's bin/ first)"
    return subprocess.run([exe, *args[1:]], input=input, capture_output=True,
                          cwd=cwd, env=env, timeout=timeout)


def log(*args, input=b"", **kw):
    return run(["panto-log", *args], input=input, **kw)


@pytest.fixture
def sh():
    return run


def assert_clean_error(proc, status=1, name=None):
    """One `panto-X: ...` line on stderr, the given status, no traceback."""
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == status, (proc.returncode, err)
    assert "Traceback" not in err, err
    if name:
        assert err.startswith(f"{name}: "), err
    assert err.strip(), "no error message"


# -- panto-send against the scripted SSE server (tests/sse_server.py) ------------

KEY = "sk-test-0123456789abcdefSECRET"
AKEY = "sk-ant-test-9876543210SECRET"


@pytest.fixture
def srv():
    import sse_server

    with sse_server.Server() as s:
        yield s


def env_for(srv, **extra):
    """The environment of a command sent to `srv` (both providers, test keys); None removes a variable."""
    env = dict(os.environ, OPENAI_BASE_URL=srv.url + "/v1", OPENAI_API_KEY=KEY,
               ANTHROPIC_BASE_URL=srv.url, ANTHROPIC_API_KEY=AKEY)
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}


def send(srv, *args, input=b"", timeout=30, **env):
    return run(["panto-send", *args], input=input, env=env_for(srv, **env), timeout=timeout)


def roles(proc):
    """Roles of the message entries a run wrote (header and other entries skipped)."""
    from builders import lines

    return [e["message"]["role"] for e in lines(proc.stdout) if e.get("type") == "message"]


def secret_free(proc, *paths):
    for blob in [proc.stdout, proc.stderr] + [open(p, "rb").read() for p in paths]:
        assert KEY.encode() not in blob and AKEY.encode() not in blob


def failed(p, *needles):
    """panto-send's checks every failure owes: one line, exit 1, input (builders.BASE) +
    user entry ("now") kept, no reply."""
    from builders import BASE, lines

    assert_clean_error(p, name="panto-send")
    assert len(p.stderr.rstrip(b"\n").split(b"\n")) == 1, p.stderr
    assert p.stdout.startswith(BASE)
    out = lines(p.stdout[len(BASE):])
    assert len(out) == 1 and out[0]["message"]["role"] == "user"
    assert out[0]["message"]["content"][-1]["text"] == "now"
    for n in needles:
        assert n.encode() in p.stderr, p.stderr
    secret_free(p)


def interrupt_when(srv, args, stream, marker):
    """Run panto-send --live, SIGINT it once `marker` is on its stderr."""
    proc = subprocess.Popen([shutil.which("panto-send"), "--live", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_for(srv))
    proc.stdin.write(stream)
    proc.stdin.close()
    err = b""
    while marker not in err:
        piece = os.read(proc.stderr.fileno(), 65536)
        assert piece, (b"panto-send ended early: " + err)
        err += piece
    proc.send_signal(signal.SIGINT)
    out = proc.stdout.read()
    err += proc.stderr.read()
    proc.wait(timeout=10)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def shell(srv, cmd, **env):
    """Run a bash pipeline against the scripted server; it must succeed, with no traceback."""
    p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, timeout=60,
                       env=env_for(srv, **env))
    assert p.returncode == 0, (cmd, p.stderr.decode(errors="replace"))
    assert b"Traceback" not in p.stderr
    return p


def reply(text):
    import sse_server

    return sse_server.openai_text(text, usage={"prompt_tokens": 20, "completion_tokens": 3})


@pytest.fixture
def branched(srv, isolated):
    """One question, then three answers to what came next: two branches
    made with replay --at, each appended to the same file. Returns
    (srv, path, {name: entry}) with the entries of each step."""
    srv.push(reply("one"), reply("two"), reply("three"), reply("four"))
    shell(srv, 'panto-send "first question" </dev/null | panto-log append >/dev/null')
    shell(srv, 'panto-log replay --last | panto-send "second question" | panto-log append >/dev/null')
    entries = _lines(shell(srv, "panto-log replay --last").stdout)
    path = os.path.join(os.environ["PANTO_SESSION_DIR"], os.listdir(os.environ["PANTO_SESSION_DIR"])[0],
                        entries[0]["id"] + ".jsonl")
    assert os.path.exists(path)
    system, u1, a1, u2, a2 = entries[1:]
    # branch at the first answer, by a prefix of its id
    shell(srv, f'panto-log replay --at {a1["id"][:6]} --last | panto-send "branch b" | panto-log append {path} >/dev/null')
    shell(srv, f'panto-log replay --at {a1["id"]} {path} | panto-send "branch c" | panto-log append {path} >/dev/null')
    every = _lines(open(path, "rb").read())
    u3, a3, u4, a4 = every[6:]
    return srv, path, dict(system=system, u1=u1, a1=a1, u2=u2, a2=a2, u3=u3, a3=a3, u4=u4, a4=a4)


def _lines(out):
    import orjson

    return [orjson.loads(x) for x in out.split(b"\n") if x]


def repl_env(srv, tmp_path, anthropic=False, **extra):
    """The environment of a REPL test: the scripted server as the OpenAI-style
    provider (and the Anthropic-style one too, with anthropic), a terminal
    type, and a TMPDIR of the test's own; the key is repl_term.KEY."""
    from repl_term import KEY

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, OPENAI_BASE_URL=srv.url + "/v1", OPENAI_API_KEY=KEY, OPENAI_MODEL="gpt-4o",
               TERM="xterm-256color", TMPDIR=str(tmp), **extra)
    if anthropic:
        env.update(ANTHROPIC_BASE_URL=srv.url, ANTHROPIC_API_KEY=KEY)
    return env


@pytest.fixture
def local_zone(monkeypatch):
    """local_zone(TZ): this process's local time zone for the test (a TZ
    value, set with time.tzset), put back after it."""
    import time

    def set_zone(tz):
        monkeypatch.setenv("TZ", tz)
        time.tzset()

    yield set_zone
    monkeypatch.undo()
    time.tzset()


def scripts():
    """(command, "module:main") of every installed command: the bin/ launchers
    pyproject.toml installs, and the module each one runs (pantolib/launch.py)."""
    import tomllib

    from pantolib.launch import MODULES

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        files = tomllib.load(f)["tool"]["setuptools"]["script-files"]
    names = [os.path.basename(f) for f in files]
    return sorted((n, MODULES[n] + ":main") for n in names if n in MODULES)  # not the launcher itself
