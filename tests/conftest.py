"""Every test gets its own HOME, XDG folders, session directory and working
directory, with no provider keys or panto settings leaking in from outside."""
import os
import shutil
import subprocess

import pytest

LEAKY_PREFIXES = ("OPENAI_", "ANTHROPIC_", "PANTO_")

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
        if key.startswith(LEAKY_PREFIXES):
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
