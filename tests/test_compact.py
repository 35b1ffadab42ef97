"""Compaction (SPEC 3 `compaction`, 5.2): `panto-send --compact` between
`panto-log replay` and `panto-log append`, against the scripted server, and
the request after it. The session files are real files; the file only grows."""
import os
import shutil
import signal
import subprocess

import orjson
import pytest

import responses_server as R
import sse_server as S
from builders import lines, read
from conftest import KEY, SEED_TOML, assert_clean_error, env_for, run
from api_rules import VALID

from pantolib import compaction
from pantolib.conversation import Session

SYSTEM = "You are a test agent."
HEADER = {"type": "session", "version": 1, "id": "0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee",
          "timestamp": "2026-11-30T09:00:00.000Z", "cwd": "/work/proj"}
MODELS = {"openai": "gpt-4o", "anthropic": "claude-sonnet-4-20250514"}
STYLES = {"openai": "openai_chat", "anthropic": "anthropic_messages", "responses": "openai_responses"}
SUMMARY = "Goal: make the tests pass.\nFiles: app.py edited (the parser).\nNext steps: run the tests."


class Book:
    """Writes a session's entries with predictable ids, each child of the last."""

    def __init__(self, provider="openai"):
        self.provider, self.model = provider, MODELS[provider]
        self.entries, self.n = [], 0
        self.add("system", [{"type": "text", "text": SYSTEM}])

    def add(self, role, content, **msg):
        self.n += 1
        entry = {"type": "message", "id": f"{self.n:08x}",
                 "parentId": self.entries[-1]["id"] if self.entries else None,
                 "timestamp": f"2026-11-30T09:{self.n // 60:02d}:{self.n % 60:02d}.000Z"}
        if role == "user":
            entry["provider"], entry["model"] = self.provider, self.model
        m = {"role": role, "content": content}
        if role == "assistant":
            m.update(provider=self.provider, model=self.model, stopReason=msg.pop("stop", "stop"),
                     usage={"input": 100 * self.n, "output": 10})
        entry["message"] = m
        self.entries.append(entry)
        return entry

    def prompt(self, text, results=()):
        return self.add("user", [{"type": "toolResult", "toolUseId": i, "content": c, "isError": True}
                                 for i, c in results] + [{"type": "text", "text": text}])

    def reply(self, text):
        return self.add("assistant", [{"type": "text", "text": text}])

    def tool_call(self, call_id, command, text="Let me look."):
        return self.add("assistant", [{"type": "text", "text": text},
                                      {"type": "toolUse", "id": call_id, "name": "bash",
                                       "input": orjson.dumps({"command": command}).decode()}],
                        stop="toolUse")

    def tool_result(self, call_id, output):
        return self.add("user", [{"type": "toolResult", "toolUseId": call_id, "content": output}])

    def turn(self, t):
        """Turn t: a prompt and a reply; every fifth turn runs a tool in between."""
        self.prompt(f"prompt {t}")
        if t % 5 == 0:
            self.tool_call(f"call_{t}", f"ls dir{t}")
            self.tool_result(f"call_{t}", f"file-{t}.txt")
        self.reply(f"reply {t}")

    def write(self, path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(b"".join(orjson.dumps(x) + b"\n" for x in [HEADER, *self.entries]))
        return path


def twenty(provider="openai"):
    book = Book(provider)
    for t in range(1, 21):
        book.turn(t)
    return book


def summary_reply(provider, text=SUMMARY):
    if provider == "openai":
        return S.openai_text(text, usage={"prompt_tokens": 5000, "completion_tokens": 300,
                                          "prompt_tokens_details": {"cached_tokens": 4000}})
    return S.anthropic_text(text, {"input_tokens": 1000, "cache_read_input_tokens": 4000, "output_tokens": 1},
                            {"output_tokens": 300})


def text_reply(provider, text="Done."):
    if provider == "openai":
        return S.openai_text(text, usage={"prompt_tokens": 900, "completion_tokens": 5})
    return S.anthropic_text(text, {"input_tokens": 900, "output_tokens": 1}, {"output_tokens": 5})


def sh(srv, cmd, provider="openai", status=0):
    """A shell pipeline of the real commands (pipefail: any failure shows)."""
    p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, timeout=60,
                       env=env_for(srv, PANTO_API_STYLE=STYLES[provider]))
    assert p.returncode == status, (cmd, p.stderr.decode())
    assert b"Traceback" not in p.stderr
    return p


def transcript_of(entries):
    """The transcript the summary request must carry, written out independently."""
    parts = []
    for e in entries:
        role = e["message"]["role"]
        for b in e["message"]["content"]:
            if b["type"] == "text":
                parts.append(f"[{role}]\n{b['text']}")
            elif b["type"] == "toolUse":
                parts.append(f"[assistant called the tool bash]\n{b['input']}")
            elif b["type"] == "toolResult":
                parts.append(f"[{'error from' if b.get('isError') else 'result of'} bash]\n{b['content']}")
    return "<conversation>\n" + "\n\n".join(parts) + "\n</conversation>"


def by_text(book, text):
    return next(e for e in book.entries if e["message"]["content"][-1].get("text") == text)


# --- the summary request and the entry ----------------------------------------------

def test_compaction_request_entry_and_next_request(srv, tmp_path):
    book = twenty()
    path = str(book.write(tmp_path / "s.jsonl"))
    before = read(path)
    srv.push(summary_reply("openai"))
    p = sh(srv, f"panto-log replay {path} | panto-send --compact --tools 'keep the API names' "
                f"| panto-log append {path}")

    # the request: the system prompt, then one user message with the transcript of
    # everything before prompt 19, the summary prompt and the instructions; no tools
    (req,) = srv.requests
    kept_from = by_text(book, "prompt 19")
    part = book.entries[1:book.entries.index(kept_from)]
    ask = (transcript_of(part) + "\n\n" + compaction.SUMMARY_PROMPT
           + "\n\nInstructions from the user for this summary:\nkeep the API names")
    assert req.body["messages"] == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ask}]
    assert "tools" not in req.body and req.body["model"] == "gpt-4o"
    for word in ("Goal", "Decisions", "Files", "Open problems", "Next steps", "Needed to continue"):
        assert word in compaction.SUMMARY_PROMPT
    assert "prompt 18" in ask and "reply 18" in ask and "[result of bash]\nfile-15.txt" in ask
    assert "prompt 19" not in ask and "file-20.txt" not in ask

    # the entry: appended, the new leaf; the file only grew, by that one line
    after = read(path)
    assert after.startswith(before) and after.count(b"\n") == before.count(b"\n") + 1
    assert p.stdout == after
    entry = lines(after)[-1]
    assert list(entry) == ["type", "id", "parentId", "timestamp", "summary", "firstKeptId", "provider",
                           "model", "usage"]
    assert entry["type"] == "compaction" and entry["parentId"] == book.entries[-1]["id"]
    assert entry["summary"] == SUMMARY and entry["firstKeptId"] == kept_from["id"]
    assert (entry["provider"], entry["model"]) == ("openai", "gpt-4o")
    assert entry["usage"] == {"input": 1000, "output": 300, "cacheRead": 4000}
    assert "keep the API names" not in after.decode()   # sent, never written as a user entry
    shown = sh(srv, f"panto-log show --all {path}").stdout.decode()
    assert "prompt 1\n" in shown and "file-5.txt" in shown and SUMMARY in shown

    # the next turn: system, the summary as one user message, then prompt 19 on
    srv.push(text_reply("openai"))
    sh(srv, f"panto-log replay {path} | panto-send 'prompt 21' | panto-log append {path} >/dev/null")
    body = srv.requests[1].body
    VALID["openai"](body)
    assert body["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": compaction.PREFIX + SUMMARY},
        {"role": "user", "content": "prompt 19"},
        {"role": "assistant", "content": "reply 19"},
        {"role": "user", "content": "prompt 20"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "call_20", "type": "function", "function": {"name": "bash",
                                                               "arguments": '{"command":"ls dir20"}'}}]},
        {"role": "tool", "tool_call_id": "call_20", "content": "file-20.txt"},
        {"role": "assistant", "content": "reply 20"},
        {"role": "user", "content": "prompt 21"},
    ]
    final = read(path)
    assert final.startswith(after)
    new = lines(final)[len(lines(after)):]
    assert [e["message"]["role"] for e in new] == ["user", "assistant"]
    assert new[0]["parentId"] == entry["id"]
    assert sum(1 for _ in lines(final)) == 1 + len(book.entries) + 1 + 2   # nothing removed


def test_next_request_on_anthropic(srv, tmp_path):
    book = twenty("anthropic")
    path = str(book.write(tmp_path / "s.jsonl"))
    srv.push(summary_reply("anthropic"), text_reply("anthropic"))
    sh(srv, f"panto-log replay {path} | panto-send --compact | panto-log append {path} >/dev/null", "anthropic")
    first = srv.requests[0].body
    assert first["system"] == SYSTEM and "tools" not in first
    assert first["messages"][0]["content"][0]["text"].endswith(compaction.SUMMARY_PROMPT)
    assert len(first["messages"]) == 1
    entry = lines(read(path))[-1]
    assert entry["usage"] == {"input": 1000, "output": 300, "cacheRead": 4000}
    assert (entry["provider"], entry["model"]) == ("anthropic", MODELS["anthropic"])

    sh(srv, f"panto-log replay {path} | panto-send 'prompt 21' | panto-log append {path} >/dev/null", "anthropic")
    body = srv.requests[1].body
    VALID["anthropic"](body)
    assert body["system"] == SYSTEM
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": compaction.PREFIX + SUMMARY},
                                     {"type": "text", "text": "prompt 19"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "reply 19"}]},
        {"role": "user", "content": [{"type": "text", "text": "prompt 20"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Let me look."},
                                          {"type": "tool_use", "id": "call_20", "name": "bash",
                                           "input": {"command": "ls dir20"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_20", "content": "file-20.txt"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "reply 20"}]},
        {"role": "user", "content": [{"type": "text", "text": "prompt 21"}]},
    ]


def test_summary_and_next_request_on_the_responses_api(srv, tmp_path):
    book = twenty()
    path = str(book.write(tmp_path / "s.jsonl"))
    srv.push(R.text(SUMMARY, R.usage(5000, 300, cached=4000)), R.text("Done.", R.usage(900, 5)))
    cmd = f"panto-log replay {path} | panto-send %s | panto-log append {path} >/dev/null"
    sh(srv, cmd % "--compact --tools", "responses")
    first = srv.requests[0]
    assert first.path.endswith("/responses") and "tools" not in first.body
    assert first.body["instructions"] == SYSTEM
    (ask,) = first.body["input"]
    assert ask["role"] == "user" and ask["content"][0]["text"].endswith(compaction.SUMMARY_PROMPT)
    entry = lines(read(path))[-1]
    assert entry["summary"] == SUMMARY and entry["usage"] == {"input": 1000, "output": 300, "cacheRead": 4000}

    sh(srv, cmd % "'prompt 21'", "responses")
    body = srv.requests[1].body
    assert body["instructions"] == SYSTEM

    def said(t):
        return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}

    assert body["input"] == [
        said(compaction.PREFIX + SUMMARY), said("prompt 19"),
        {"type": "message", "role": "assistant", "content": "reply 19"},
        said("prompt 20"), {"type": "message", "role": "assistant", "content": "Let me look."},
        {"type": "function_call", "call_id": "call_20", "name": "bash", "arguments": '{"command":"ls dir20"}'},
        {"type": "function_call_output", "call_id": "call_20", "output": "file-20.txt"},
        {"type": "message", "role": "assistant", "content": "reply 20"}, said("prompt 21")]


def test_keep_and_a_second_compaction(srv, tmp_path):
    book = twenty()
    path = str(book.write(tmp_path / "s.jsonl"))
    srv.push(summary_reply("openai", "first summary"), summary_reply("openai", "second summary"),
             text_reply("openai"))
    sh(srv, f"panto-log replay {path} | panto-send --compact --keep 5 | panto-log append {path} >/dev/null")
    first = lines(read(path))[-1]
    assert first["firstKeptId"] == by_text(book, "prompt 16")["id"]

    # compacting again summarizes the first summary and what it kept before prompt 20
    sh(srv, f"panto-log replay {path} | panto-send --compact --keep 1 | panto-log append {path} >/dev/null")
    ask = srv.requests[1].body["messages"][1]["content"]
    assert ask.startswith("<conversation>\n[user]\n" + compaction.PREFIX + "first summary\n\n[user]\nprompt 16\n")
    assert "prompt 15" not in ask and "prompt 19" in ask and "prompt 20" not in ask
    second = lines(read(path))[-1]
    assert second["parentId"] == first["id"] and second["firstKeptId"] == by_text(book, "prompt 20")["id"]

    sh(srv, f"panto-log replay {path} | panto-send 'prompt 21' | panto-log append {path} >/dev/null")
    msgs = srv.requests[2].body["messages"]
    assert msgs[1] == {"role": "user", "content": compaction.PREFIX + "second summary"}
    assert msgs[2] == {"role": "user", "content": "prompt 20"}
    assert "first summary" not in orjson.dumps(msgs).decode()


def test_keep_zero_summarizes_everything(srv, tmp_path):
    book = twenty()
    path = str(book.write(tmp_path / "s.jsonl"))
    srv.push(summary_reply("openai"), text_reply("openai"))
    (tmp_path / "how.txt").write_text("Name every file.\n")
    sh(srv, f"panto-log replay {path} | panto-send --compact --keep 0 -f {tmp_path}/how.txt "
            f"| panto-log append {path} >/dev/null")
    entry = lines(read(path))[-1]
    assert entry["firstKeptId"] is None
    ask = srv.requests[0].body["messages"][1]["content"]
    assert "[assistant]\nreply 20\n</conversation>" in ask
    assert ask.endswith(compaction.INSTRUCTIONS + "Name every file.")
    sh(srv, f"panto-log replay {path} | panto-send 'prompt 21' | panto-log append {path} >/dev/null")
    assert srv.requests[1].body["messages"] == [
        {"role": "system", "content": SYSTEM}, {"role": "user", "content": compaction.PREFIX + SUMMARY},
        {"role": "user", "content": "prompt 21"}]


# --- where the cut falls ---------------------------------------------------------------

def test_cut_moves_before_a_tool_use_whose_result_it_would_part(srv, tmp_path):
    book = Book()
    for t in range(1, 4):
        book.turn(t)
    book.prompt("prompt 4")
    call = book.tool_call("call_x", "make")        # never run: the next prompt answers it
    book.prompt("prompt 5", results=[("call_x", "tool call not run")])
    book.reply("reply 5")
    book.prompt("prompt 6")
    book.reply("reply 6")
    path = str(book.write(tmp_path / "s.jsonl"))
    srv.push(summary_reply("openai"), text_reply("openai"))
    sh(srv, f"panto-log replay {path} | panto-send --compact | panto-log append {path} >/dev/null")

    entry = lines(read(path))[-1]
    assert entry["firstKeptId"] == call["id"]          # not prompt 5, which holds the result
    ask = srv.requests[0].body["messages"][1]["content"]
    assert "prompt 4" in ask and "make" not in ask and "prompt 5" not in ask

    sh(srv, f"panto-log replay {path} | panto-send 'prompt 7' | panto-log append {path} >/dev/null")
    body = srv.requests[1].body
    VALID["openai"](body)
    assert body["messages"][1:5] == [
        {"role": "user", "content": compaction.PREFIX + SUMMARY},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "call_x", "type": "function", "function": {"name": "bash", "arguments": '{"command":"make"}'}}]},
        {"role": "tool", "tool_call_id": "call_x", "content": "tool call not run"},
        {"role": "user", "content": "prompt 5"},
    ]


def test_cut_library_rules():
    book = Book()
    book.prompt("p1")
    book.tool_call("c1", "ls")
    book.tool_result("c1", "out")           # results alone are not a prompt
    book.reply("r1")
    book.prompt("p2")
    book.reply("r2")
    kept = book.entries[1:]
    assert compaction.cut(kept, 1) == 4      # before p2
    assert compaction.cut(kept, 2) == 0      # before p1: nothing to summarize
    assert compaction.cut(kept, 3) == 0      # fewer prompts than kept
    assert compaction.cut(kept, 0) == len(kept)
    # a result after the cut pulls it back to its tool use, however far
    parted = kept[:2] + [kept[4], kept[2]] + kept[5:]   # p1, call, p2, result, r2
    assert compaction.cut(parted, 1) == 1


def test_a_session_too_short_passes_through_unchanged(srv, tmp_path):
    book = Book()
    book.turn(1)
    book.turn(2)
    path = str(book.write(tmp_path / "s.jsonl"))
    before = read(path)
    p = sh(srv, f"panto-log replay {path} | panto-send --compact | panto-log append {path}")
    assert p.stdout == before and read(path) == before
    assert srv.requests == []
    err = p.stderr.decode()
    assert err.startswith("panto-send: nothing to compact") and err.count("\n") == 1
    q = run(["panto-send", "--compact", "--keep", "0"], input=b"", env=env_for(srv))
    assert q.returncode == 0 and q.stdout == b"" and b"nothing to compact" in q.stderr
    assert srv.requests == []


def test_too_short_after_a_compaction_that_kept_a_tool_use(srv, tmp_path):
    book = Book()
    book.turn(1)
    call = book.tool_call("call_y", "ls")
    book.prompt("prompt 2", results=[("call_y", "tool call not run")])
    book.reply("reply 2")
    book.entries.append({"type": "compaction", "id": "cccccccc", "parentId": book.entries[-1]["id"],
                         "timestamp": "2026-11-30T10:00:00.000Z", "summary": "old", "firstKeptId": call["id"],
                         "provider": "openai", "model": "gpt-4o"})
    path = str(book.write(tmp_path / "s.jsonl"))
    p = sh(srv, f"panto-log replay {path} | panto-send --compact --keep 1")
    assert p.stdout == read(path) and b"nothing to compact" in p.stderr and srv.requests == []


# --- the file keeps everything --------------------------------------------------------

def test_replay_of_an_entry_before_the_compaction_is_uncompacted(srv, tmp_path):
    book = twenty()
    path = str(book.write(tmp_path / "s.jsonl"))
    srv.push(summary_reply("openai"), text_reply("openai"), text_reply("openai"))
    sh(srv, f"panto-log replay {path} | panto-send --compact | panto-log append {path} >/dev/null")
    compacted = read(path)
    comp = lines(compacted)[-1]
    assert comp["type"] == "compaction"

    # a branch from reply 20, the compaction's parent: the full history goes out
    sh(srv, f"panto-log replay --at {comp['parentId']} {path} | panto-send 'prompt 21' "
            f"| panto-log append {path} >/dev/null")
    msgs = srv.requests[1].body["messages"]
    assert len(msgs) == 1 + 20 * 2 + 4 * 2 + 1 and SUMMARY not in orjson.dumps(msgs).decode()
    assert msgs[1] == {"role": "user", "content": "prompt 1"}
    assert msgs[-1] == {"role": "user", "content": "prompt 21"}

    # continuing from the compaction entry itself is compacted again
    sh(srv, f"panto-log replay --at {comp['id']} {path} | panto-send 'prompt 22' "
            f"| panto-log append {path} >/dev/null")
    msgs = srv.requests[2].body["messages"]
    assert msgs[1] == {"role": "user", "content": compaction.PREFIX + SUMMARY}
    assert msgs[2] == {"role": "user", "content": "prompt 19"} and len(msgs) == 2 + 6 + 1

    final = read(path)
    assert final.startswith(compacted) and len(lines(final)) == len(lines(compacted)) + 4


def test_failed_summary_request_writes_no_entry(srv, tmp_path):
    book = twenty()
    path = str(book.write(tmp_path / "s.jsonl"))
    before = read(path)
    srv.push(S.error_reply(400, "this model is not available"))
    p = sh(srv, f"panto-log replay {path} | panto-send --compact --retries 0 | panto-log append {path}", status=1)
    assert read(path) == before and p.stdout == before
    err = p.stderr.decode()
    assert err.startswith("panto-send: ") and "not available" in err and err.count("\n") == 1
    srv.push(summary_reply("openai", "   "))
    p = sh(srv, f"panto-log replay {path} | panto-send --compact | panto-log append {path}", status=1)
    assert read(path) == before and b"no summary written" in p.stderr


@pytest.mark.parametrize("provider, reply, why", [
    ("openai", S.error_reply(400, "This model's maximum context length is 128000 tokens. However, your "
                                  "messages resulted in 131000 tokens."), "too long for the context window"),
    ("anthropic", S.anthropic_text("Goal: fix", {"input_tokens": 9000, "output_tokens": 1}, {"output_tokens": 3},
                                   stop="model_context_window_exceeded"), "fills the context window"),
    ("anthropic", S.anthropic_text("", {"input_tokens": 9000, "output_tokens": 1}, {"output_tokens": 1},
                                   stop="refusal"), "the model refused"),
])
def test_a_summary_that_cannot_be_had_writes_nothing(srv, tmp_path, provider, reply, why):
    book = twenty(provider)
    path = str(book.write(tmp_path / "s.jsonl"))
    before = read(path)
    srv.push(reply)
    p = sh(srv, f"panto-log replay {path} | panto-send --compact | panto-log append {path}", provider, status=1)
    assert read(path) == before and p.stdout == before
    err = p.stderr.decode()
    assert err.startswith("panto-send: no summary written: ") and why in err and err.count("\n") == 1


def test_a_summary_cut_at_the_token_limit_is_written_with_a_note(srv, tmp_path):
    book = twenty()
    path = str(book.write(tmp_path / "s.jsonl"))
    srv.push(S.openai_text("Goal: make the tests", finish="length", usage={"prompt_tokens": 9, "completion_tokens": 4}))
    p = sh(srv, f"panto-log replay {path} | panto-send --compact --max-tokens 4 | panto-log append {path}")
    assert lines(read(path))[-1]["summary"] == "Goal: make the tests"
    assert b"cut off at the token limit" in p.stderr


def test_ctrl_c_while_the_summary_streams_writes_no_entry(srv, tmp_path):
    book = twenty()
    data = read(book.write(tmp_path / "s.jsonl"))
    chunks = [S.oa_chunk({"role": "assistant", "content": ""}), S.oa_chunk({"content": "Goal: the first half."})]
    srv.push(S.openai_stream(chunks, done=False, stall_after=2, stall=30))
    proc = subprocess.Popen([shutil.which("panto-send"), "--compact", "--live"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_for(srv))
    proc.stdin.write(data)
    proc.stdin.close()
    err = b""
    while b"the first half." not in err:   # no key starts with ".": the display holds none of it back
        piece = os.read(proc.stderr.fileno(), 65536)
        assert piece, b"panto-send ended early: " + err
        err += piece
    proc.send_signal(signal.SIGINT)
    out = proc.stdout.read()
    err += proc.stderr.read()
    assert proc.wait(timeout=10) == 130, err
    assert out == data and b"Traceback" not in err
    assert err.rstrip().split(b"\n")[-1] == b"panto-send: interrupted: no summary written (the stream is passed through)"


def test_live_summary_and_usage_errors(srv, tmp_path):
    book = twenty()
    path = str(book.write(tmp_path / "s.jsonl"))
    srv.push(summary_reply("openai"))
    p = sh(srv, f"panto-log replay {path} | panto-send --compact --live")
    assert SUMMARY.encode() in p.stderr and lines(p.stdout)[-1]["summary"] == SUMMARY
    for args in (["--compact", "--keep", "-1"], ["--compact", "--keep", "two"], ["--keep", "3", "hi"],
                 ["--compact", "-f", path, "and text"]):
        q = run(["panto-send", *args], input=read(path), env=env_for(srv))
        assert_clean_error(q, 2, "panto-send")
    assert len(srv.requests) == 1


def test_the_compaction_request_is_priced_like_a_turn(srv, tmp_path):
    book = twenty()
    path = str(book.write(tmp_path / "s.jsonl"))
    prices = tmp_path / "models.toml"
    prices.write_text(SEED_TOML)

    def cost():
        p = run(["panto-cost", "--json", f"--prices={prices}", path], env=env_for(srv))
        assert p.returncode == 0, p.stderr
        return orjson.loads(p.stdout)["total"]

    before = cost()
    srv.push(summary_reply("openai"))
    sh(srv, f"panto-log replay {path} | panto-send --compact | panto-log append {path} >/dev/null")
    after = cost()
    assert after["turns"] == before["turns"] + 1 and after["compactions"] == 1
    # gpt-4o: 1000 input at $2.5, 300 output at $10, 4000 cache reads at $1.25 per Mtok
    assert after["picoUsd"] - before["picoUsd"] == 1000 * 2_500_000 + 300 * 10_000_000 + 4000 * 1_250_000


def test_a_key_in_the_summary_is_redacted(srv, tmp_path):
    book = twenty()
    path = str(book.write(tmp_path / "s.jsonl"))
    srv.push(summary_reply("openai", f"Goal: use the key {KEY} for the tests."))
    p = sh(srv, f"panto-log replay {path} | panto-send --compact --live | panto-log append {path}")
    for blob in (p.stdout, p.stderr, read(path)):
        assert KEY.encode() not in blob
    assert lines(read(path))[-1]["summary"] == "Goal: use the key [redacted] for the tests."


# --- the conversation, in the library ---------------------------------------------------

def session_of(entries):
    s = Session()
    from pantolib import stream

    for e in [HEADER, *entries]:
        s.add(stream.parse_line(orjson.dumps(e) + b"\n"))
    return s


def test_last_compaction_on_the_path_counts_and_bad_ones_are_skipped():
    book = twenty()
    keep = by_text(book, "prompt 20")
    comp = {"type": "compaction", "id": "cccccccc", "parentId": book.entries[-1]["id"],
            "timestamp": "2026-11-30T10:00:00.000Z", "summary": "S", "firstKeptId": keep["id"],
            "provider": "openai", "model": "gpt-4o"}
    msgs = session_of(book.entries + [comp]).messages()
    assert msgs[:2] == [{"role": "system", "content": [{"type": "text", "text": SYSTEM}]},
                        {"role": "user", "content": [{"type": "text", "text": compaction.PREFIX + "S"}]}]
    assert msgs[2]["content"] == keep["message"]["content"] and len(msgs) == 2 + 4
    # a compaction with no usable summary is kept in the file but not honoured
    bad = dict(comp, id="dddddddd", parentId="cccccccc", summary=42)
    assert session_of(book.entries + [comp, bad]).messages() == msgs
    # a firstKeptId that is not on the path keeps nothing from before
    lost = dict(comp, firstKeptId="99999999")
    assert len(session_of(book.entries + [lost]).messages()) == 2


def test_long_tool_text_is_clipped_in_the_transcript():
    book = Book()
    book.prompt("p1")
    book.tool_call("c1", "x" * 5000)
    book.tool_result("c1", "y" * 10000)
    text = compaction.transcript([e["message"] for e in book.entries[1:]])
    assert "[... 8000 characters left out ...]" in text and "y" * compaction.TOOL_TEXT_LIMIT not in text
    assert "[user]\np1" in text
