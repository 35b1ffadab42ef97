"""@PATH mentions at the REPL on a real terminal, against a scripted server
(SPEC §9 "At work": Mentions)."""
import base64

import pytest

from conftest import repl_env, run
from repl_term import Term, read_entries, session_files
from sse_server import openai_text

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde"


@pytest.fixture
def env(srv, tmp_path):
    return repl_env(srv, tmp_path)


def test_a_prompt_mentioning_a_text_file_and_an_image_sends_and_records_their_blocks(isolated, srv, env):
    (isolated / "notes.txt").write_text("buy milk\n")
    (isolated / "pic.png").write_bytes(PNG)
    srv.push(openai_text("Seen."), openai_text("Plain."))
    prompt = "what do @notes.txt @pic.png say? mail me@example.com"
    t = Term([], env)
    t.expect("> ")
    t.turn(prompt, "Seen.")
    sent = srv.requests[-1].body["messages"][-1]
    assert sent["role"] == "user"
    assert sent["content"][0] == {"type": "text", "text": "File notes.txt:\nbuy milk\n"}
    assert sent["content"][1] == {"type": "image_url", "image_url": {
        "url": "data:image/png;base64," + base64.b64encode(PNG).decode()}}     # chat's image form
    assert sent["content"][-1] == {"type": "text", "text": prompt}        # the prompt as typed, last
    [path] = session_files(isolated)
    user = [e for e in read_entries(path) if e["type"] == "message" and e["message"]["role"] == "user"][-1]
    assert user["message"]["content"] == [
        {"type": "text", "text": "File notes.txt:\nbuy milk\n"},
        {"type": "image", "mediaType": "image/png", "data": base64.b64encode(PNG).decode()},
        {"type": "text", "text": prompt}]
    # a missing file leaves the @word as plain text and attaches nothing
    t.turn("and @gone.txt?", "Plain.")
    assert srv.requests[-1].body["messages"][-1]["content"] == "and @gone.txt?"
    assert t.quit() == 0
    shown = run(["panto-log", "show", path]).stdout.decode()
    assert f"[image: image/png, {len(PNG)} bytes]" in shown


def test_tab_completes_a_mentioned_path(isolated, srv, env):
    (isolated / "docs").mkdir()
    (isolated / "docs" / "plan.md").write_text("step one\n")
    srv.push(openai_text("Read it."))
    t = Term([], env)
    t.expect("> ")
    t.send("see @do\t")
    t.expect("@docs/")
    t.send("pl\t")
    t.expect("plan.md ")
    t.line("please")
    t.expect("Read it.")
    t.expect("> ")
    sent = srv.requests[-1].body["messages"][-1]["content"]
    assert sent == [{"type": "text", "text": "File docs/plan.md:\nstep one\n"},
                    {"type": "text", "text": "see @docs/plan.md please"}]
    assert t.quit() == 0


def test_send_attach_is_plumbing_too(isolated, srv):
    from conftest import send

    (isolated / "a.txt").write_text("alpha\n")
    srv.push(openai_text("ok"))
    p = send(srv, "--quiet", "--attach=a.txt", "what is in it?")
    assert p.returncode == 0, p.stderr
    assert srv.requests[-1].body["messages"][-1]["content"] == [
        {"type": "text", "text": "File a.txt:\nalpha\n"}, {"type": "text", "text": "what is in it?"}]
    p = send(srv, "--quiet", "--attach=nope.txt", "hi")
    assert p.returncode == 1 and p.stderr == b"panto-send: 'nope.txt' does not exist: not attached, nothing sent\n"
    assert p.stdout == b""


def test_resuming_shows_the_prompt_and_names_its_attachments(isolated, srv, env):
    (isolated / "notes.txt").write_text("line one\nline two\n")
    srv.push(openai_text("Seen."))
    t = Term([], env)
    t.expect("> ")
    t.turn("read @notes.txt", "Seen.")
    assert t.quit() == 0
    t = Term(["--continue"], env)
    shown = t.expect("> read @notes.txt")
    assert "File notes.txt:" in shown and "line two" not in shown     # named, not printed whole
    t.expect("> ")
    assert t.quit() == 0
