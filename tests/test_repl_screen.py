"""What a person sees on the screen of the interactive panto, read back from
a real pseudo-terminal through a small terminal model (vt.py): type-ahead,
the spinner and the tool question, long replies and pastes, tables, NO_COLOR
thinking, and the seconds of the usage line."""
import re
import time

import pytest

from conftest import repl_env

from sse_server import an_block, an_delta, an_end, an_start, an_stop, anthropic_stream, \
    openai_text, openai_tools
from repl_term import Term, usage

FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"


@pytest.fixture
def env(srv, tmp_path):
    return repl_env(srv, tmp_path, anthropic=True)


def last_user_text(request):
    return request.body["messages"][-1]["content"]


@pytest.mark.parametrize("attempt", range(5))
def test_keys_typed_during_a_streaming_reply_wait_for_the_next_prompt(isolated, srv, env, attempt):
    # the reply stops after its first piece until the keys are typed: they come mid-stream
    srv.push(openai_text("", pieces=["The user wants ", "a demo of it."], gate_after=2),
             openai_text("typed ahead seen"))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.line("stream something")
    t.expect("The user wants ")
    t.send("TYPEDX")
    srv.open_gate()
    during = t.expect("a demo of it.")
    after = t.expect("> ")
    assert "TYPEDX" not in during + after        # not echoed into the reply or the usage line
    t.expect("TYPEDX")                            # at the next prompt, to be edited or sent
    assert len(srv.requests) == 1
    t.send("\r")
    t.expect("typed ahead seen")
    t.expect("> ")
    assert t.quit() == 0
    assert last_user_text(srv.requests[1]) == "TYPEDX"
    assert not any("TYPEDX" in row and "demo" in row for row in t.vt().text())


def slow_tool_start(tmp_path):
    """An environment addition that makes panto-tool start slowly, as on a
    busy machine: the moment a spinner on a timer would have been drawn
    before the question."""
    d = tmp_path / "slow"
    d.mkdir(exist_ok=True)
    (d / "sitecustomize.py").write_text(
        "import sys, time\nif 'panto-tool' in sys.argv[1:2]:\n    time.sleep(1.5)\n")
    return {"PYTHONPATH": str(d)}


@pytest.mark.parametrize("attempt", range(5))
def test_the_spinner_is_never_left_in_front_of_a_tool_question(isolated, srv, env, tmp_path, attempt):
    srv.push(openai_tools([("call_1", "bash", '{"command": "ls -la"}')]), openai_text("Listed."))
    t = Term([], dict(env, **slow_tool_start(tmp_path)))
    t.expect("> ")
    t.line("list the files")
    t.expect("allow bash?")
    rows = t.vt().screen()
    asked = [r for r in rows if "bash" in r and "ls -la" in r]
    assert asked, rows
    assert not any(f in r for r in asked for f in FRAMES), asked        # `⠸ running 0.3s⏺ bash ls -la`
    t.send("y")
    t.expect("Listed.")
    t.expect("> ")
    assert t.quit() == 0


def test_the_usage_line_counts_the_models_time_not_the_persons(isolated, srv, env):
    srv.push(openai_tools([("call_1", "bash", '{"command": "echo hi"}')], usage=usage(10, 5)),
             openai_text("Done.", usage=usage(20, 5)))
    t = Term([], env)
    t.expect("> ")
    t.line("say hi")
    t.expect("allow bash?")
    held = time.monotonic() + 2.5           # the person thinks before answering
    while time.monotonic() < held:
        t._read(0.05)
    answered = time.monotonic()
    t.send("y")
    t.expect("Done.")
    line = t.expect("> ")
    elapsed = time.monotonic() - answered
    seconds = float(re.search(r"(\d+\.\d)s", line).group(1))
    assert seconds <= elapsed + 0.2, (seconds, elapsed, line)   # nothing of the 2.5 s at the question
    assert t.quit() == 0


TALL = " ".join(f"word{i} **b{i}**" if i % 7 == 0 else f"word{i}" for i in range(400))


@pytest.mark.parametrize("attempt", range(5))
def test_a_reply_paragraph_taller_than_the_screen_is_drawn_once(isolated, srv, env, attempt):
    cut = [TALL[i:i + 37 + attempt] for i in range(0, len(TALL), 37 + attempt)]
    srv.push(openai_text(TALL + "\n\nThe end.", pieces=cut + ["\n\nThe end."]))
    t = Term(["--no-tools"], env, cols=60, rows=12)
    t.expect("> ")
    t.turn("a long answer please", "The end.")
    assert t.quit() == 0
    vt = t.vt()
    assert vt.clamped == 0                          # never up past the top of the screen
    rows = vt.text()
    words = " ".join(r for r in rows if r.startswith(("word", "**b")) or re.match(r"^\S*word\d", r)).split()
    assert words == TALL.split(), "the paragraph is not in the scrollback exactly once"
    assert all(len(r) <= 59 for r in rows)


@pytest.mark.parametrize("attempt", range(5))
def test_a_200_line_paste_stays_whole_in_the_scrollback(isolated, srv, env, attempt):
    srv.push(openai_text("Got the log."))
    t = Term(["--no-tools"], env, cols=80, rows=24)
    t.expect("> ")
    lines = [f"log line {i:03} of the paste" for i in range(200)]
    t.send(PASTE_START + "\r".join(lines) + PASTE_END)
    t.expect("more lines above")    # while editing, a window on it
    t.send("\r")
    t.expect("Got the log.")
    t.expect("> ")
    assert t.quit() == 0
    rows = t.vt().text()
    shown = [r.lstrip("> ").strip() for r in rows if "log line" in r]
    assert shown == lines, shown[:3]
    assert not any("more lines above" in r for r in rows)
    assert srv.requests[0].body["messages"][-1]["content"] == "\n".join(lines)


def test_wrapping_tables_and_no_color_thinking_on_the_screen(isolated, srv, env):
    long = ("This answer is long enough to need more than one row on a narrow terminal, "
            "and its words must never be cut in two.")
    events = [an_start(), an_block(0, {"type": "thinking", "thinking": ""}),
              an_delta(0, {"type": "thinking_delta", "thinking": "weighing the options"}),
              an_delta(0, {"type": "signature_delta", "signature": "sig"}), an_stop(0),
              an_block(1, {"type": "text", "text": ""}),
              an_delta(1, {"type": "text_delta", "text": long + "\n\n| file | lines |\n|---|---:|\n"}),
              an_delta(1, {"type": "text_delta", "text": "| a.py | 12 |\n| bb.py | 3 |\n\nDone."}),
              an_stop(1), an_end()]
    srv.push(anthropic_stream(events))
    t = Term(["--no-tools", "-p", "anthropic", "-m", "claude-test"], dict(env, NO_COLOR="1"), cols=40, rows=30)
    t.expect("> ")
    t.turn("explain", "Done.")
    assert t.quit() == 0
    rows = t.vt().text()
    i = next(k for k, r in enumerate(rows) if r.startswith("thinking: weighing"))
    assert rows[i + 1] == ""                             # thinking set apart
    body = [r for r in rows[i + 2:] if r]
    text_rows = body[:next(k for k, r in enumerate(body) if "│" in r)]
    assert " ".join(text_rows) == long and all(len(r) <= 39 for r in text_rows)
    assert body[len(text_rows):len(text_rows) + 4] == ["file  │ lines", "──────┼──────", "a.py  │    12",
                                                       "bb.py │     3"]
    assert "\x1b[2m" not in t.screen and "\x1b[1m" not in t.screen


def test_markdown_tables_in_colour(isolated, srv, env):
    srv.push(openai_text("| a | b |\n|---|---|\n| one | two |\n\nafter"))
    t = Term(["--no-tools"], env, cols=60, rows=20)
    t.expect("> ")
    t.turn("table", "after")
    assert t.quit() == 0
    rows = t.vt().text()
    assert "a   │ b" in rows and "one │ two" in rows and "| one | two |" not in rows


def test_compact_with_nothing_to_compact_says_so_without_a_usage_line(isolated, srv, env):
    srv.push(openai_text("First answer.", usage=usage(100, 10)))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.turn("hello", "First answer.")
    t.line("/compact")
    said = t.expect("nothing to compact yet")
    said += t.expect("> ")
    assert " out" not in said and "--keep" not in said and "panto-send" not in said
    assert len(srv.requests) == 1
    assert t.quit() == 0


def test_keys_typed_while_the_spinner_turns_are_not_drawn_into_it(isolated, srv, env):
    srv.push(openai_text("", pieces=["Answer."], gate_after=1), openai_text("again"))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.line("wait for it")
    t.expect(" waiting ")                 # the spinner turns: nothing of the reply yet
    t.send("AHEAD")
    srv.open_gate()
    during = t.expect("Answer.")
    t.expect("> ")
    t.expect("AHEAD")
    assert "AHEAD" not in during
    t.send("\x15")                         # Ctrl-U: the typed-ahead text is the person's to keep or drop
    assert t.quit() == 0
    assert len(srv.requests) == 1


def test_the_spinner_is_erased_before_a_note(isolated, srv, env):
    from sse_server import error_reply

    srv.push(error_reply(429, "slow down", headers={"retry-after": "1"}), openai_text("After the retry."))
    t = Term(["--no-tools"], env)
    t.expect("> ")
    t.turn("busy server", "retrying", "After the retry.")
    assert t.quit() == 0
    rows = [r for r in t.vt().text() if "retrying" in r]
    assert rows and not any(f in r for r in rows for f in FRAMES), rows
    assert rows[0].startswith("panto-send: ")
