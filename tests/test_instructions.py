"""Project instructions (AGENTS.md, else CLAUDE.md) in a new session's system
prompt: which files, in what order, each under its path, as sent and as
recorded; --no-context-files; a resumed session keeps its own; big and
unreadable files."""
import json
import os

import pytest

from conftest import repl_env, run
from sse_server import openai_text
from repl_term import Term, read_entries, session_files


@pytest.fixture
def env(srv, tmp_path):
    return repl_env(srv, tmp_path)


@pytest.fixture
def project(isolated, tmp_path):
    """repo/.git, repo/AGENTS.md, repo/pkg/CLAUDE.md (no AGENTS.md there),
    repo/pkg/sub/AGENTS.md and CLAUDE.md; the user's own AGENTS.md; cwd repo/pkg/sub.
    Above repo, an AGENTS.md that must not be read."""
    (tmp_path / "AGENTS.md").write_text("OUTSIDE THE REPOSITORY\n")
    repo = tmp_path / "repo"
    sub = repo / "pkg" / "sub"
    sub.mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / "AGENTS.md").write_text("Run tests with make test.\n")
    (repo / "pkg" / "CLAUDE.md").write_text("Never touch generated/.\n")
    (sub / "AGENTS.md").write_text("This folder holds the parser.\n")
    (sub / "CLAUDE.md").write_text("NOT READ: AGENTS.md is there\n")
    user = tmp_path / "home" / ".config" / "panto"
    user.mkdir(parents=True)
    (user / "AGENTS.md").write_text("I like short answers.\n")
    os.chdir(sub)
    return {"repo": repo, "sub": sub, "user": user / "AGENTS.md"}


def system_text(entries):
    [system] = [e for e in entries if e["type"] == "message" and e["message"]["role"] == "system"]
    return system["message"]["content"][0]["text"]


def send(env, *args):
    p = run(["panto-send", "--quiet", *args, "hi"], env=env)
    assert p.returncode == 0, p.stderr
    return [json.loads(x) for x in p.stdout.splitlines()], p.stderr


def test_the_files_in_order_each_under_its_path(project, srv, env):
    srv.push(openai_text("ok"))
    lines, _ = send(env)
    text = system_text(lines[1:])
    assert text.startswith("You are panto")
    order = [f"Instructions from {project['user']}:\n\nI like short answers.",
             f"Instructions from {project['repo'] / 'AGENTS.md'}:\n\nRun tests with make test.",
             f"Instructions from {project['repo'] / 'pkg' / 'CLAUDE.md'}:\n\nNever touch generated/.",
             f"Instructions from {project['sub'] / 'AGENTS.md'}:\n\nThis folder holds the parser."]
    at = [text.index(x) for x in order]
    assert at == sorted(at)
    assert "NOT READ" not in text and "OUTSIDE" not in text
    sent = srv.requests[0].body["messages"][0]
    assert sent["role"] == "system" and sent["content"] == text        # recorded exactly as sent


def test_no_context_files_leaves_them_out(project, srv, env):
    srv.push(openai_text("ok"))
    lines, _ = send(env, "--no-context-files")
    text = system_text(lines[1:])
    assert "Instructions from" not in text and "make test" not in text


def test_without_a_repository_only_the_working_directory_is_read(isolated, srv, env, tmp_path):
    (tmp_path / "AGENTS.md").write_text("ABOVE\n")
    (isolated / "CLAUDE.md").write_text("Here.\n")
    srv.push(openai_text("ok"))
    lines, _ = send(env)
    text = system_text(lines[1:])
    assert f"Instructions from {isolated / 'CLAUDE.md'}:\n\nHere." in text and "ABOVE" not in text


def test_a_huge_file_is_cut_and_an_unreadable_one_is_a_note(isolated, srv, env):
    (isolated / "AGENTS.md").write_text("x" * 300_000)
    srv.push(openai_text("ok"))
    lines, err = send(env)
    text = system_text(lines[1:])
    assert len(text) < 70_000 and "[cut here: the file is 300,000 bytes" in text
    assert b"only its first 65,536 were read" in err
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    os.chmod(isolated / "AGENTS.md", 0)
    srv.push(openai_text("ok"))
    lines, err = send(env)
    assert "Instructions from" not in system_text(lines[1:])
    assert err.count(b"\n") == 1 and b"cannot read" in err and b"Traceback" not in err


def test_an_unreadable_file_is_one_note_never_a_crash(isolated, srv, env):
    (isolated / "AGENTS.md").mkdir()        # unreadable for anyone, root too
    srv.push(openai_text("ok"))
    lines, err = send(env)
    assert "Instructions from" not in system_text(lines[1:])
    assert err.count(b"\n") == 1 and b"cannot read" in err and b"left out" in err


def test_the_repl_names_the_files_and_a_resumed_session_keeps_its_own(project, srv, env):
    srv.push(openai_text("first reply"), openai_text("second reply"))
    t = Term(["--no-tools"], env)
    banner = t.expect("> ")
    assert "instructions: ~/.config/panto/AGENTS.md" in banner and "AGENTS.md" in banner
    assert str(project["repo"] / "pkg" / "CLAUDE.md") in banner
    t.turn("hello", "first reply")
    assert t.quit() == 0
    sent = srv.requests[0].body["messages"][0]["content"]
    assert "Run tests with make test." in sent
    (project["repo"] / "AGENTS.md").write_text("CHANGED AFTERWARDS\n")
    t = Term(["-c", "--no-tools"], env)
    banner = t.expect("> ")
    assert "instructions:" not in banner          # its own, as recorded
    t.turn("again", "second reply")
    assert t.quit() == 0
    assert srv.requests[1].body["messages"][0]["content"] == sent
    [path] = session_files(project["sub"])
    assert system_text(read_entries(path)) == sent


def test_the_repl_with_no_context_files(project, srv, env):
    srv.push(openai_text("plain"))
    t = Term(["--no-tools", "--no-context-files"], env)
    banner = t.expect("> ")
    assert "instructions:" not in banner
    t.turn("hello", "plain")
    assert t.quit() == 0
    assert "Instructions from" not in srv.requests[0].body["messages"][0]["content"]
