"""A scripted server-sent-events server for panto's tests, REPL tests and offline demo.

It speaks just enough HTTP/1.1 (stdlib `http.server`, 127.0.0.1, a free
port) to stand in for OpenAI's chat completions (`POST .../chat/completions`)
and Anthropic's messages (`POST .../v1/messages`) APIs. Each request is
recorded (method, path, headers, body) and answered with the next reply of a
queue; when the queue is empty it answers in "auto" mode if that is on, else
with HTTP 500.

A reply is a JSON-able dict:

    {"status": 200,                 # HTTP status (default 200)
     "headers": {"retry-after": "1"},
     "chunks": ["data: {...}\\n\\n", ...],  # body pieces, one write each, or:
     "body": "..." | {...},         # one body (a dict is sent as JSON)
     "split": 0,                    # re-cut the body into pieces of N bytes
     "delay": 0.0,                  # seconds before each piece (slow drip)
     "stall_after": None,           # after N pieces send nothing more ...
     "stall": 30.0,                 # ... for this long, keeping the connection open
     "reset_after": None,           # after N pieces reset the connection (TCP RST)
     "close_after": None,           # after N pieces close it without ending the body
     "gate_after": None,            # after N pieces wait until the test calls srv.open_gate()
     "gate": "default"}             # ... the name of the gate waited for

Builders below make the wire formats from their documentation: `openai_text`,
`openai_tools`, `openai_stream` (any list of chunk objects), `anthropic_text`,
`anthropic_tool`, `anthropic_stream` (any list of events), `error_reply`.

In Python (tests):

    from sse_server import Server, openai_text
    with Server() as srv:
        srv.push(openai_text("Hello", usage={"prompt_tokens": 5, "completion_tokens": 1}))
        env["OPENAI_BASE_URL"] = srv.url + "/v1"
        ...                                        # run panto-send
        srv.requests[0].body["stream_options"]     # what was sent

As a script (REPL tests, `make demo`):

    python tests/sse_server.py --port-file F [--script FILE] [--auto] [--log FILE]

writes its port to F once it listens, loads a JSON list of replies from
FILE, answers with `auto` turns when the list runs out (--auto), and appends
every request as one JSON line to the --log FILE. Other processes may push
replies with `POST /__push` (body: one reply or a list) and read the
recorded requests with `GET /__requests`. It runs until killed.

Auto mode, for demos: a request that offers tools and ends with a user's
text gets a `bash` tool call running `ls`; one that ends with tool results
gets a short text quoting them; anything else gets a text echoing the prompt.
Usage is reported in every auto reply.
"""
import argparse
import json
import os
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


# --- wire formats -----------------------------------------------------------

def sse(data, event=None):
    """One SSE event: `event:` line when named, `data:` JSON (or a string as is)."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return head + "".join(f"data: {line}\n" for line in payload.split("\n")) + "\n"


def reply(chunks, **kw):
    return {"status": 200, "chunks": list(chunks), **kw}


def error_reply(status, message, kind="api_error", headers=None, style="openai"):
    if style == "anthropic":
        body = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        body = {"error": {"message": message, "type": kind, "code": None}}
    return {"status": status, "body": body, "headers": dict(headers or {})}


def oa_chunk(delta=None, finish=None, usage=None, choices=True, **extra):
    """An OpenAI chat.completion.chunk."""
    obj = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test"}
    if choices:
        obj["choices"] = [{"index": 0, "delta": delta if delta is not None else {},
                           "finish_reason": finish}]
    else:
        obj["choices"] = []
    if usage is not None:
        obj["usage"] = usage
    obj.update(extra)
    return obj


def openai_stream(chunks, done=True, **kw):
    """A reply streaming these chunk objects (or raw strings), then `[DONE]`."""
    out = [sse(c) for c in chunks]
    if done:
        out.append(sse("[DONE]"))
    return reply(out, **kw)


def openai_text(text, pieces=None, usage=None, finish="stop", done=True, **kw):
    parts = pieces or [text[i:i + 4] for i in range(0, len(text), 4)] or [""]
    chunks = [oa_chunk({"role": "assistant", "content": ""})]
    chunks += [oa_chunk({"content": p}) for p in parts]
    chunks.append(oa_chunk({}, finish=finish))
    if usage is not None:
        chunks.append(oa_chunk(usage=usage, choices=False))
    return openai_stream(chunks, done=done, **kw)


def openai_tools(calls, text=None, usage=None, **kw):
    """Tool calls [(id, name, arguments JSON text)], each in fragments."""
    chunks = [oa_chunk({"role": "assistant", "content": None})]
    if text:
        chunks.append(oa_chunk({"content": text}))
    for i, (cid, name, args) in enumerate(calls):
        chunks.append(oa_chunk({"tool_calls": [{"index": i, "id": cid, "type": "function",
                                                "function": {"name": name, "arguments": ""}}]}))
        for j in range(0, len(args), 5):
            chunks.append(oa_chunk({"tool_calls": [{"index": i, "function": {"arguments": args[j:j + 5]}}]}))
    chunks.append(oa_chunk({}, finish="tool_calls"))
    if usage is not None:
        chunks.append(oa_chunk(usage=usage, choices=False))
    return openai_stream(chunks, **kw)


def anthropic_stream(events, **kw):
    """A reply streaming these (event name, data) pairs (or raw strings)."""
    return reply([e if isinstance(e, str) else sse(e[1], e[0]) for e in events], **kw)


def an_start(usage=None):
    msg = {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-test",
           "stop_reason": None, "stop_sequence": None}
    if usage is not None:
        msg["usage"] = usage
    return ("message_start", {"type": "message_start", "message": msg})


def an_block(index, block):
    return ("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})


def an_delta(index, delta):
    return ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})


def an_stop(index):
    return ("content_block_stop", {"type": "content_block_stop", "index": index})


def an_end(stop_reason="end_turn", usage=None):
    d = {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None}}
    if usage is not None:
        d["usage"] = usage
    return [("message_delta", d), ("message_stop", {"type": "message_stop"})]


def anthropic_text(text, start_usage=None, end_usage=None, stop="end_turn", **kw):
    ev = [an_start(start_usage), an_block(0, {"type": "text", "text": ""})]
    ev += [an_delta(0, {"type": "text_delta", "text": text[i:i + 4]}) for i in range(0, len(text), 4)]
    ev += [an_stop(0)] + an_end(stop, end_usage)
    return anthropic_stream(ev, **kw)


def anthropic_tool(tid, name, args, text=None, thinking=None, signature=None,
                   start_usage=None, end_usage=None, **kw):
    ev, i = [an_start(start_usage)], 0
    if thinking is not None:
        ev += [an_block(i, {"type": "thinking", "thinking": ""}),
               an_delta(i, {"type": "thinking_delta", "thinking": thinking})]
        if signature:
            ev.append(an_delta(i, {"type": "signature_delta", "signature": signature}))
        ev.append(an_stop(i))
        i += 1
    if text:
        ev += [an_block(i, {"type": "text", "text": ""}), an_delta(i, {"type": "text_delta", "text": text}),
               an_stop(i)]
        i += 1
    ev.append(an_block(i, {"type": "tool_use", "id": tid, "name": name, "input": {}}))
    ev += [an_delta(i, {"type": "input_json_delta", "partial_json": args[j:j + 7]})
           for j in range(0, len(args), 7)]
    ev += [an_stop(i)] + an_end("tool_use", end_usage)
    return anthropic_stream(ev, **kw)


# --- auto mode ---------------------------------------------------------------

def auto_reply(path, body):
    """A plausible turn for a demo, in the wire format the request asked for."""
    body = body if isinstance(body, dict) else {}
    msgs = body.get("messages") or []
    last = msgs[-1] if msgs else {}
    tokens = max(1, len(json.dumps(body)) // 4)
    tools = bool(body.get("tools"))
    if path.endswith("/messages"):
        content = last.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": str(content or "")}]
        results = [b for b in blocks if b.get("type") == "tool_result"]
        prompt = " ".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        usage0 = {"input_tokens": tokens, "output_tokens": 1}
        usage1 = {"output_tokens": 20}
        if results:
            return anthropic_text(_summary(results[0].get("content")), usage0, usage1)
        if tools:
            return anthropic_tool(f"toolu_{os.urandom(6).hex()}", "bash", '{"command": "ls"}',
                                  text="Let me look at the files.", start_usage=usage0, end_usage=usage1)
        return anthropic_text(f"You said: {prompt}", usage0, usage1)
    usage = {"prompt_tokens": tokens, "completion_tokens": 20}
    if last.get("role") == "tool":
        return openai_text(_summary(last.get("content")), usage=usage)
    if tools:
        return openai_tools([(f"call_{os.urandom(6).hex()}", "bash", '{"command": "ls"}')],
                            text="Let me look at the files.", usage=usage)
    content = last.get("content")
    prompt = content if isinstance(content, str) else " ".join(
        p.get("text", "") for p in content or [] if isinstance(p, dict))
    return openai_text(f"You said: {prompt}", usage=usage)


def _summary(result):
    text = result if isinstance(result, str) else json.dumps(result)
    names = [w for w in text.split() if w][:10]
    return "The directory holds: " + (", ".join(names) if names else "nothing") + "."


# --- the server ----------------------------------------------------------------

class Request:
    def __init__(self, method, path, headers, raw):
        self.method, self.path, self.headers, self.raw = method, path, headers, raw
        try:
            self.body = json.loads(raw) if raw else None
        except ValueError:
            self.body = None

    def to_json(self):
        return {"method": self.method, "path": self.path, "headers": self.headers,
                "body": self.body if self.body is not None else self.raw.decode("utf-8", "replace")}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.path == "/__requests":
            body = json.dumps([r.to_json() for r in self.server.owner.requests]).encode()
            return self._plain(200, body, "application/json")
        self._plain(404, b'{"error":{"message":"not found"}}', "application/json")

    def do_POST(self):
        srv = self.server.owner
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        if self.path == "/__push":
            items = json.loads(raw)
            for r in items if isinstance(items, list) else [items]:
                srv.push(r)
            return self._plain(200, b"{}", "application/json")
        req = Request("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, raw)
        rep = srv._record(req)
        try:
            self._serve(rep)
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    def _plain(self, status, body, ctype):
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def _serve(self, rep):
        status = rep.get("status", 200)
        headers = {k.lower(): str(v) for k, v in (rep.get("headers") or {}).items()}
        if "chunks" not in rep:
            body = rep.get("body", "")
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
                headers.setdefault("content-type", "application/json")
            elif isinstance(body, str):
                body = body.encode()
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("content-length", str(len(body)))
            self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True
            return
        pieces = [c.encode() if isinstance(c, str) else bytes(c) for c in rep["chunks"]]
        if rep.get("split"):
            whole, n = b"".join(pieces), rep["split"]
            pieces = [whole[i:i + n] for i in range(0, len(whole), n)]
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.send_response(status)
        headers.setdefault("content-type", "text/event-stream")
        headers.setdefault("cache-control", "no-cache")
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("transfer-encoding", "chunked")
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        delay = rep.get("delay") or 0
        for i, piece in enumerate(pieces):
            if i == rep.get("gate_after"):
                self.server.owner.gate(rep.get("gate", "default")).wait(30.0)
            if i == rep.get("stall_after"):
                self.server.owner._stop.wait(rep.get("stall", 30.0))
                return
            if i == rep.get("reset_after"):
                return self._reset()
            if i == rep.get("close_after"):
                return
            if delay:
                time.sleep(delay)
            if piece:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
        if rep.get("stall_after") == len(pieces):
            self.server.owner._stop.wait(rep.get("stall", 30.0))
            return
        if rep.get("reset_after") == len(pieces):
            return self._reset()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _reset(self):
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        for f in (self.rfile, self.wfile):
            try:
                f.close()
            except OSError:
                pass
        self.connection.close()

    def finish(self):
        try:
            super().finish()
        except (OSError, ValueError):
            pass


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True


class Server:
    """The server on 127.0.0.1 and a free port, serving in a background thread."""

    def __init__(self, replies=(), auto=False, log=None, port=0, check=None):
        self.queue, self.requests, self.auto, self.log = list(replies), [], auto, log
        self.check = check      # check(request) -> a reply that refuses it, or None (a server's own rules)
        self.refused = []       # (request, reply) that `check` answered
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._gates = {}
        self._httpd = _HTTPServer(("127.0.0.1", port), _Handler)
        self._httpd.owner = self
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = None

    def gate(self, name="default"):
        """The Event a reply with `gate_after` waits for (open_gate sets it)."""
        with self._lock:
            return self._gates.setdefault(name, threading.Event())

    def open_gate(self, name="default"):
        self.gate(name).set()

    def push(self, *replies):
        with self._lock:
            self.queue.extend(replies)
        return self

    def _record(self, req):
        with self._lock:
            self.requests.append(req)
            if self.log:
                with open(self.log, "a", encoding="utf-8") as f:
                    f.write(json.dumps(req.to_json()) + "\n")
            refusal = self.check(req) if self.check else None
            if refusal is not None:
                self.refused.append((req, refusal))
                return refusal
            if self.queue:
                return self.queue.pop(0)
        if self.auto:
            return auto_reply(req.path, req.body)
        return error_reply(500, "the test server has no scripted reply left", "server_error")

    def start(self):
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def close(self):
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description="Scripted OpenAI/Anthropic SSE server on 127.0.0.1.")
    ap.add_argument("--port-file", help="write the port here once listening")
    ap.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    ap.add_argument("--script", help="JSON file: a list of replies served in order")
    ap.add_argument("--auto", action="store_true", help="answer with auto turns when the script runs out")
    ap.add_argument("--log", help="append every request to this file as JSON Lines")
    a = ap.parse_args(argv)
    replies = []
    if a.script:
        with open(a.script, encoding="utf-8") as f:
            replies = json.load(f)
    srv = Server(replies, auto=a.auto, log=a.log, port=a.port)
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{srv.port}\n")
        os.replace(tmp, a.port_file)
    else:
        print(srv.url, flush=True)
    try:
        srv._httpd.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        srv._httpd.server_close()
    return 0


# --- GET requests served from the queue (model lists) ------------------------
# A GET of any path but /__requests is recorded like a POST and answered with
# the next reply of the queue (e.g. `models_reply`); with an empty queue it is
# still a 404 and not recorded, as before.

def models_reply(ids, style="openai", has_more=False):
    """A model list as GET {base}/models (OpenAI) or /v1/models (Anthropic) answers it."""
    if style == "anthropic":
        data = [{"type": "model", "id": i, "display_name": i, "created_at": "2026-01-01T00:00:00Z"}
                for i in ids]
        return {"status": 200, "body": {"data": data, "has_more": has_more,
                                        "first_id": ids[0] if ids else None,
                                        "last_id": ids[-1] if ids else None}}
    return {"status": 200, "body": {"object": "list", "data": [
        {"id": i, "object": "model", "created": 1, "owned_by": "test"} for i in ids]}}


def _do_get_queued(self):
    if self.path == "/__requests":
        return _plain_get(self)
    srv = self.server.owner
    with srv._lock:
        rep = srv.queue.pop(0) if srv.queue else None
        if rep is not None:
            srv.requests.append(Request("GET", self.path, {k.lower(): v for k, v in self.headers.items()}, b""))
    if rep is None:
        return _plain_get(self)
    try:
        self._serve(rep)
    except OSError:
        self.close_connection = True


_plain_get = _Handler.do_GET
_Handler.do_GET = _do_get_queued


if __name__ == "__main__":
    sys.exit(main())
