"""What every panto command owes (STYLE.md), as one shared parametrized test.

Every console script: --help, --version, exit 2 on a bad flag, no traceback.
Every filter (reads a stream, writes the stream): empty input, and unknown
entry types passed through byte for byte.
"""
import os

import orjson
import pytest

from conftest import run, scripts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SID = "0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee"


def names():
    return [name for name, _ in scripts()]


# the commands that read a stream and pass it on (panto-send, which needs a
# server, owes the same and is checked in test_send.py)
FILTERS = [
    pytest.param(["panto-log", "append"], id="panto-log-append"),
    pytest.param(["panto-tool", "--yes", "--quiet"], id="panto-tool"),
]


def no_traceback(p):
    assert b"Traceback" not in p.stderr and b"Traceback" not in p.stdout


def test_every_script_is_declared():
    names = [n for n, _ in scripts()]
    for n in ("panto", "panto-send", "panto-tool", "panto-log", "panto-ls", "panto-cost"):
        assert n in names


@pytest.mark.parametrize("name", names())
def test_the_installed_command_is_its_launcher(name):
    """What is on PATH ignores SIGINT, SIGTERM and SIGHUP in its first
    statement, before Python starts (a generated console-script wrapper
    imports first), and runs the launcher installed beside it, whose first
    import is the signal table (which imports nothing), applied at once."""
    import shutil

    path = shutil.which(name)
    assert path, f"{name} is not on PATH"
    with open(path, encoding="utf-8") as f:
        installed = f.read()
    with open(os.path.join(ROOT, "bin", name), encoding="utf-8") as f:
        assert installed == f.read(), f"{path} is not bin/{name}"
    lines = installed.splitlines()
    assert lines[:2] == ["#!/bin/sh", "trap '' INT TERM HUP"] and lines[-1] == f'exec "$d/panto-launcher" {name} "$@"'
    with open(os.path.join(os.path.dirname(path), "panto-launcher"), encoding="utf-8") as f:
        launcher = f.read().splitlines()
    assert launcher[0].startswith("#!") and "python" in launcher[0]
    code = [line for line in launcher[1:] if line.strip() and not line.lstrip().startswith("#")]
    first = code[:[line.startswith("signals.start(") for line in code].index(True)]
    assert [line.split("  #")[0] for line in first if "import" in line] == [
        "import os, sys", "from pantolib import signals"]
    with open(os.path.join(ROOT, "pantolib", "signals.py"), encoding="utf-8") as f:
        imports = [line for line in f if line.startswith(("import ", "from "))]
    assert imports == ["import _signal\n"]


@pytest.mark.parametrize("name", names())
def test_help(name, script_runner):
    p = script_runner.run([name, "--help"])
    assert p.returncode == 0, p.stderr
    assert "Usage:" in p.stdout and name in p.stdout
    assert "Traceback" not in p.stderr
    assert script_runner.run([name, "-h"]).stdout == p.stdout


@pytest.mark.parametrize("name", names())
def test_version(name, script_runner):
    from pantolib import __version__
    p = script_runner.run([name, "--version"])
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().endswith(__version__)
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("name", names())
def test_bad_flag_is_a_usage_error(name, script_runner):
    p = script_runner.run([name, "--no-such-flag-anywhere"])
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr
    assert p.stderr.startswith(f"{name}: unknown option '--no-such-flag-anywhere'"), p.stderr
    assert p.stdout == ""


@pytest.mark.parametrize("name", names())
def test_help_is_quick_and_imports_nothing_heavy(name):
    """--help must not pay for httpx: start-up is part of the interface."""
    import subprocess
    import sys
    module = dict(scripts())[name].split(":")[0]
    code = (f"import sys\nsys.argv=['{name}','--help']\nimport {module} as m\n"
            "try:\n    m.main()\nexcept SystemExit:\n    pass\n"
            "print('HEAVY' if 'httpx' in sys.modules else 'LIGHT', file=sys.stderr)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True)
    assert p.stderr.strip().endswith(b"LIGHT"), p.stderr


def _stand_ins_apply():
    """Whether the orjson installed is one the stand-ins were read against
    (launch.ORJSON_READ): a newer one is imported whole, as it should be."""
    import importlib.util

    from pantolib import launch

    spec = importlib.util.find_spec("orjson")
    folder = os.path.dirname(os.path.dirname(spec.origin))
    return launch.ORJSON_READ[0] <= launch.orjson_version(folder) < launch.ORJSON_READ[1]


def _imported(stderr):
    """The modules a run with PYTHONPROFILEIMPORTTIME=1 imported, by name."""
    return {line.rsplit(b"|", 1)[1].strip().decode() for line in stderr.splitlines()
            if line.startswith(b"import time:") and b"|" in line}


@pytest.mark.parametrize("argv", [pytest.param(["panto-log", "append"], id="panto-log-append"),
                                  pytest.param(["panto-log", "show"], id="panto-log-show"),
                                  pytest.param(["panto-cost"], id="panto-cost")])
def test_a_command_starts_without_what_orjson_imports_only_to_name_types(isolated, tmp_path, argv):
    """orjson imports uuid and dataclasses (with inspect, ast, platform) only
    to know their types; a command's start loads orjson without them, and
    still does its work."""
    if not _stand_ins_apply():
        pytest.skip("the orjson installed is newer than the versions the stand-ins were read against")
    session = tmp_path / "work" / "s.jsonl"
    p = run(["panto-log", "append", str(session)], input=_stream(tmp_path / "work"))
    assert p.returncode == 0, p.stderr
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    p = run(argv + [str(session)], input=b"" if argv[-1] != "append" else _stream(tmp_path / "work"), env=env)
    assert p.returncode == 0, p.stderr
    imported = _imported(p.stderr)
    assert "orjson" in imported and "pantolib.launch" in imported
    assert not imported & {"uuid", "dataclasses", "inspect", "platform"}, imported & {"uuid", "dataclasses"}
    if argv[-1] == "show":
        assert b"hello" in p.stdout


def test_a_command_that_needs_no_orjson_does_not_import_it(isolated, tmp_path):
    """The stand-ins are put in place when orjson is imported, not before: a
    report recalled whole (nothing changed) never imports it."""
    p = run(["panto-log", "append", str(tmp_path / "work" / "s.jsonl")], input=_stream(tmp_path / "work"))
    assert p.returncode == 0, p.stderr
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    first = run(["panto-cost", "--all"], env=env)
    again = run(["panto-cost", "--all"], env=env)
    assert first.returncode == again.returncode == 0, again.stderr
    assert first.stdout == again.stdout and b"TOTAL" in again.stdout
    assert "pantolib.launch" in _imported(again.stderr)
    assert not _imported(again.stderr) & {"orjson", "uuid", "dataclasses"}


def test_orjson_loaded_without_uuid_and_dataclasses_still_parses_and_leaves_them_real():
    """launch.OrjsonFinder: after orjson's import `import uuid` and `import dataclasses`
    load the real modules, orjson reads and writes, its error is a
    ValueError; a UUID, which panto never serializes, is refused. An orjson
    outside the versions read, or imported while another thread runs, is
    imported whole, and writes a UUID."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from pantolib import launch\n"
            "if sys.argv[1] == 'unread':\n"
            "    launch.ORJSON_READ = ((0, 0), (0, 1))\n"
            "if sys.argv[1] == 'thread':\n"
            "    import threading\n"
            "    done = threading.Event()\n"
            "    threading.Thread(target=done.wait).start()\n"
            "launch.OrjsonFinder.install()\n"
            "import orjson\n"
            "if sys.argv[1] == 'thread':\n"
            "    done.set()\n"
            "whole = 'uuid' in sys.modules and 'dataclasses' in sys.modules\n"
            "assert launch.OrjsonFinder not in sys.meta_path\n"
            "import uuid, dataclasses\n"
            "assert orjson.loads(orjson.dumps({'a': [1, 2.5, None, 'é']})) == {'a': [1, 2.5, None, 'é']}\n"
            "try:\n"
            "    orjson.loads(b'{')\n"
            "except ValueError as e:\n"
            "    assert isinstance(e, orjson.JSONDecodeError)\n"
            "u = uuid.uuid5(uuid.NAMESPACE_URL, 'x')\n"
            "assert u.version == 5 and u == uuid.uuid5(uuid.NAMESPACE_URL, 'x')\n"
            "assert dataclasses.asdict(dataclasses.make_dataclass('D', ['x'])(1)) == {'x': 1}\n"
            "try:\n"
            "    named = orjson.dumps(u) == b'\"' + str(u).encode() + b'\"'\n"
            "except TypeError:\n"
            "    named = False\n"
            "print(whole, named)\n")
    out = {}
    for mode in ("read", "unread", "thread"):
        p = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, cwd=ROOT)
        assert p.returncode == 0, p.stderr
        out[mode] = p.stdout.decode().split()
    assert out["read"] == (["False", "False"] if _stand_ins_apply() else ["True", "True"])
    assert out["unread"] == out["thread"] == ["True", "True"]


def test_the_orjson_version_is_that_of_its_one_dist_info(tmp_path):
    """The stand-ins are used only for an orjson whose version is known: one
    dist-info beside it; none, two (a stale one left) or a garbled name: unknown."""
    from pantolib.launch import orjson_version

    assert orjson_version(str(tmp_path / "none")) == (0, 0)
    (tmp_path / "orjson").mkdir()
    assert orjson_version(str(tmp_path)) == (0, 0)
    (tmp_path / "orjson-3.13.0.dist-info").mkdir()
    (tmp_path / "orjsonx-9.9.dist-info").mkdir()
    assert orjson_version(str(tmp_path)) == (3, 13)
    (tmp_path / "orjson-3.8.1.dist-info").mkdir()
    assert orjson_version(str(tmp_path)) == (0, 0)
    (tmp_path / "orjson-3.8.1.dist-info").rmdir()
    (tmp_path / "orjson-3.13.0.dist-info").rename(tmp_path / "orjson-three.dist-info")
    assert orjson_version(str(tmp_path)) == (0, 0)


@pytest.mark.parametrize("argv", FILTERS)
def test_filter_empty_input(isolated, argv):
    p = run(argv, input=b"")
    assert p.returncode == 0, p.stderr
    assert p.stdout == b""
    no_traceback(p)
    assert not os.path.exists(os.environ["PANTO_SESSION_DIR"])


def _stream(cwd):
    head = orjson.dumps({"type": "session", "version": 1, "id": SID,
                         "timestamp": "2026-04-25T17:40:15.990Z", "cwd": str(cwd)}) + b"\n"
    user = orjson.dumps({"type": "message", "id": "00000001", "parentId": None, "timestamp": "2026-04-25T17:40:16.000Z",
                         "provider": "openai", "model": "gpt-4o",
                         "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]}}) + b"\n"
    asst = orjson.dumps({"type": "message", "id": "00000002", "parentId": "00000001",
                         "timestamp": "2026-04-25T17:40:17.000Z",
                         "message": {"role": "assistant", "content": [{"type": "text", "text": "hello"}],
                                     "provider": "openai", "model": "gpt-4o", "stopReason": "stop"}}) + b"\n"
    # unknown entry types, in a layout panto would never write: spaces, key order, escapes, floats
    odd1 = b'{ "id" : "0dd00001", "type":"bookmark",  "parentId":"00000002", "timestamp":"t", "x":1.50e3, "s":"\\u00e9\\/"}\n'
    odd2 = b'{"type":"compaction","id":"0dd00002","parentId":"0dd00001","timestamp":"t","summary":{"role":"user"},"n":[1,2 ,3]}\n'
    return head + user + odd1 + asst + odd2


@pytest.mark.parametrize("argv", FILTERS)
def test_filter_passes_unknown_entry_types_byte_for_byte(isolated, argv):
    data = _stream(isolated)
    p = run(argv, input=data)
    assert p.returncode == 0, p.stderr
    no_traceback(p)
    assert p.stdout.startswith(data), p.stdout[:400]


@pytest.mark.parametrize("argv", FILTERS)
def test_filter_rejects_garbage_cleanly(isolated, argv):
    p = run(argv, input=b"\x00garbage\n")
    assert p.returncode == 1
    no_traceback(p)
    assert p.stderr.decode().startswith(argv[0] + ": ")
