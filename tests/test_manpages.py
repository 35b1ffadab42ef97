"""Every command has a man page that agrees with its usage, and the pages install."""
import importlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest

from conftest import scripts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAN = os.path.join(ROOT, "man")
SECTIONS = ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES"]


def module_of(target):
    name = target.split(":")[0]
    try:
        if importlib.util.find_spec(name) is None:
            return None
    except ModuleNotFoundError:
        return None
    return importlib.import_module(name)


def page(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def sections(text):
    """{section name: its roff source}."""
    out, name = {}, None
    for line in text.splitlines():
        m = re.match(r'^\.SH\s+"?([^"]*?)"?\s*$', line)
        if m:
            name = m.group(1).upper()
            out[name] = ""
        elif name:
            out[name] += line + "\n"
    return out


def plain(roff):
    """Roff source -> text, enough to find option names in it."""
    s = re.sub(r"\\f[BIRP]|\\f\(..|\\f\[[^]]*\]", "", roff)
    s = s.replace("\\-", "-").replace("\\(em", "--").replace("\\&", "").replace("\\ ", " ")
    s = re.sub(r'^\.\w+\s*', "", s, flags=re.M)
    return s.replace('"', "")


def usage_options(doc):
    """Every option named in the Usage: lines of a docopt text."""
    usage = doc.split("Usage:", 1)[1]
    usage = re.split(r"\n\s*\n", usage, 1)[0]
    return sorted(set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", usage)))


def page_params():
    out = []
    for name, target in scripts():
        marks = [] if module_of(target) else [pytest.mark.skip(reason=f"{target} is not written yet")]
        out.append(pytest.param(name, target, marks=marks, id=name))
    return out


@pytest.mark.parametrize("name, target", [pytest.param(n, t, id=n) for n, t in scripts()])
def test_every_script_has_a_man_page(name, target):
    assert os.path.isfile(os.path.join(MAN, name + ".1")), f"man/{name}.1 is missing"


@pytest.mark.parametrize("name, target", page_params())
def test_man_page_has_the_sections(name, target):
    text = page(os.path.join(MAN, name + ".1"))
    assert text.startswith(".TH "), f"man/{name}.1 does not start with .TH"
    assert re.match(rf'^\.TH "?{re.escape(name.upper())}"? "?1"?', text), text.splitlines()[0]
    got = sections(text)
    missing = [s for s in SECTIONS if s not in got]
    assert not missing, f"man/{name}.1 lacks {missing}"
    for s in SECTIONS:
        assert got[s].strip(), f"man/{name}.1: section {s} is empty"
    assert name in plain(got["NAME"]) and " - " in plain(got["NAME"])


@pytest.mark.parametrize("name, target", page_params())
def test_synopsis_names_every_option_of_the_usage(name, target):
    doc = module_of(target).__doc__
    wanted = usage_options(doc)
    got = sections(page(os.path.join(MAN, name + ".1")))
    synopsis = plain(got["SYNOPSIS"])
    described = plain(got.get("OPTIONS", "")) + synopsis
    missing = [o for o in wanted if o not in synopsis and o not in described]
    assert not missing, f"man/{name}.1 does not mention {missing} (usage: {wanted})"
    for o in wanted:
        if o.startswith("--") and o not in ("--help", "--version"):
            assert o in described, f"man/{name}.1 OPTIONS does not describe {o}"


def test_usage_options_parser():
    doc = "Usage:\n  x [--all] [-q | --json] [--by=KEY] [FILE...]\n  x -h | --help\n\nOptions:\n  --zzz  no\n"
    assert usage_options(doc) == ["--all", "--by", "--help", "--json", "-h", "-q"]


def test_session_format_page():
    path = os.path.join(MAN, "panto-session.5")
    text = page(path)
    assert re.match(r'^\.TH "?PANTO-SESSION"? "?5"?', text)
    got = sections(text)
    for s in ("NAME", "DESCRIPTION", "FILES", "EXAMPLES", "SEE ALSO"):
        assert s in got and got[s].strip(), s
    body = plain(text)
    for word in ("cacheWrite1h", "redactedThinking", "isError", "parentId", "toolUse", "toolResult",
                 "UUIDv7", "0600", "flock"):
        assert word in body, word


@pytest.mark.parametrize("name", ["panto-log.1", "panto-ls.1", "panto-session.5"])
def test_pages_render_without_warnings(name):
    if not shutil.which("groff"):
        pytest.skip("groff is not installed")
    p = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", os.path.join(MAN, name)], capture_output=True)
    assert p.returncode == 0 and p.stderr == b"", p.stderr.decode()


def test_pages_mention_fzf():
    assert "fzf" in page(os.path.join(MAN, "panto-ls.1"))


def test_wheel_ships_the_man_pages(tmp_path):
    try:
        import setuptools
    except ImportError:
        pytest.skip("setuptools is not installed")
    if importlib.util.find_spec("wheel") is None:
        if tuple(int(x) for x in setuptools.__version__.split(".")[:2]) < (70, 1):
            pytest.skip("building a wheel needs the 'wheel' package with this setuptools")
    src = tmp_path / "src"
    src.mkdir()
    for item in ("pyproject.toml", "README.md", "pantolib", "man"):
        s = os.path.join(ROOT, item)
        if os.path.isdir(s):
            shutil.copytree(s, src / item, ignore=shutil.ignore_patterns("__pycache__"))
        elif os.path.exists(s):
            shutil.copy(s, src / item)
    out = tmp_path / "dist"
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                        "-w", str(out), str(src)], capture_output=True, timeout=120)
    if p.returncode != 0:
        pytest.skip("could not build a wheel here: " + p.stderr.decode(errors="replace")[-300:])
    wheel = next(out.glob("*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for name, _ in scripts():
        assert any(n.endswith(f"data/data/share/man/man1/{name}.1") for n in names), name
    assert any(n.endswith("data/data/share/man/man5/panto-session.5") for n in names)


def test_pyproject_installs_every_page():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        data = tomllib.load(f)["tool"]["setuptools"]["data-files"]
    man1 = data.get("share/man/man1", [])
    for name, _ in scripts():
        assert f"man/{name}.1" in man1, name
    assert "man/panto-session.5" in data.get("share/man/man5", [])


def test_every_page_carries_the_version_of_the_code():
    from pantolib import __version__

    for name in sorted(os.listdir(MAN)):
        first = page(os.path.join(MAN, name)).splitlines()[0]
        assert f'"panto {__version__}"' in first, f"man/{name}: {first}"
