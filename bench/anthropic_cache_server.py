"""A loopback stand-in for Anthropic's messages API that caches prompts the
way Anthropic documents it, and reports usage the way the API does.

The caching rules it implements (platform.claude.com, "Prompt caching"):

- The prompt is a sequence of blocks in the order tools, system, messages
  (each tool definition, each system text block, each content block of each
  message is one block). A cache entry is the prefix up to and including
  one block; it matches only when everything before it is identical.
- Breakpoints: a block carrying `cache_control`, and the top-level
  `cache_control` of the request (automatic caching), which puts one on the
  last block of the request. At most 4 per request; a `ttl: "1h"`
  breakpoint may not come after a 5-minute one (400 otherwise).
- Reading: for each breakpoint the cache is looked up at its block and at
  up to 20 blocks before it (the look-back window); the longest prefix found
  is read (`cache_read_input_tokens`) and its lifetime refreshed.
- Writing: every breakpoint after the prefix read is written with its TTL
  (5 minutes unless `ttl: "1h"`); the tokens from the end of the prefix read
  to the last breakpoint are `cache_creation_input_tokens`, split by TTL in
  `cache_creation.ephemeral_5m_input_tokens` / `ephemeral_1h_input_tokens`
  (a block between a 1h breakpoint and an earlier one is a 1h write).
- A prefix shorter than the model's minimum cacheable length (1,024 tokens
  here, as for the Sonnet models) is neither written nor read.
- Tokens after the last breakpoint are plain `input_tokens`.

Tokens are counted as one per 4 bytes of a block's compact JSON (without its
cache_control), a fixed rule both sides of a comparison share. The reply is
scripted by the caller: `reply(body) -> list of content blocks`.
"""
import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MIN_CACHEABLE = 1024
LOOKBACK = 20
MAX_BREAKPOINTS = 4
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


def tokens(block):
    raw = json.dumps(block, separators=(",", ":"), ensure_ascii=False).encode()
    return max(1, (len(raw) + 3) // 4)


def _without_cache_control(block):
    return {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) else block


def blocks_of(body):
    """[(block without cache_control, its cache_control or None)] in prompt order."""
    out = [(_without_cache_control(t), t.get("cache_control")) for t in body.get("tools") or []]
    system = body.get("system")
    if isinstance(system, str) and system:
        out.append(({"type": "text", "text": system}, None))
    elif isinstance(system, list):
        out += [(_without_cache_control(b), b.get("cache_control")) for b in system]
    for m in body.get("messages") or []:
        content = m["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for i, b in enumerate(content):
            head = {"role": m["role"]} if i == 0 else {}  # a message boundary is part of the prefix
            out.append(({**head, **_without_cache_control(b)}, b.get("cache_control")))
    return out


class BadRequest(Exception):
    pass


class Cache:
    """Prefix hash -> (expiry, ttl), with the documented look-up and write rules."""

    def __init__(self, clock=time.monotonic):
        self.entries = {}
        self.clock = clock
        self.lock = threading.Lock()

    def usage(self, body):
        """The usage dict the API would report for this request (and update the cache)."""
        blocks = blocks_of(body)
        if not blocks:
            raise BadRequest("messages: at least one message is required")
        marks = {i: cc for i, (_, cc) in enumerate(blocks) if cc}
        top = body.get("cache_control")
        if top:
            marks[len(blocks) - 1] = marks.get(len(blocks) - 1) or top
        if len(marks) > MAX_BREAKPOINTS:
            raise BadRequest(f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                             f"Found {len(marks)}.")
        ttls = []
        for i in sorted(marks):
            cc = marks[i]
            if cc.get("type") != "ephemeral" or cc.get("ttl", "5m") not in TTL_SECONDS:
                raise BadRequest(f"cache_control: invalid value {json.dumps(cc)}")
            ttls.append(cc.get("ttl", "5m"))
        if any(a == "5m" and b == "1h" for a, b in zip(ttls, ttls[1:])):
            raise BadRequest("a ttl='1h' cache_control block must not come after a ttl='5m' one")
        digest = hashlib.sha256(str(body.get("model")).encode())
        hashes, cum, total = [], [], 0
        for block, _ in blocks:
            digest.update(json.dumps(block, sort_keys=True, separators=(",", ":")).encode())
            hashes.append(digest.copy().hexdigest())
            total += tokens(block)
            cum.append(total)
        now = self.clock()
        with self.lock:
            hit = -1
            for b in marks:  # the longest cached prefix within each breakpoint's look-back window
                for j in range(b, max(-1, b - LOOKBACK - 1), -1):
                    e = self.entries.get(hashes[j])
                    if e and e[0] > now:
                        hit = max(hit, j)
                        break
            if hit >= 0:
                ttl = self.entries[hashes[hit]][1]
                self.entries[hashes[hit]] = (now + TTL_SECONDS[ttl], ttl)
            read = cum[hit] if hit >= 0 else 0
            written = {"5m": 0, "1h": 0}
            done = read
            for b in sorted(marks):
                if b <= hit or cum[b] < MIN_CACHEABLE:
                    continue
                ttl = marks[b].get("ttl", "5m")
                self.entries[hashes[b]] = (now + TTL_SECONDS[ttl], ttl)
                written[ttl] += cum[b] - done
                done = cum[b]
        write = written["5m"] + written["1h"]
        return {"input_tokens": total - read - write, "cache_creation_input_tokens": write,
                "cache_read_input_tokens": read,
                "cache_creation": {"ephemeral_5m_input_tokens": written["5m"],
                                   "ephemeral_1h_input_tokens": written["1h"]},
                "prompt_tokens_total": total}


def _sse(event, data):
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        owner = self.server.owner
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        if not self.path.endswith("/v1/messages"):
            return self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "not found"}})
        body = json.loads(raw)
        try:
            usage = owner.cache.usage(body)
        except BadRequest as e:
            return self._json(400, {"type": "error", "error": {"type": "invalid_request_error", "message": str(e)}})
        total = usage.pop("prompt_tokens_total")
        content = owner.reply(body)
        out_tokens = sum(tokens(b) for b in content)
        owner.log.append({"prompt": total, "usage": usage, "output": out_tokens})
        events = [_sse("message_start", {"type": "message_start", "message": {
            "id": f"msg_{len(owner.log)}", "type": "message", "role": "assistant", "content": [],
            "model": body.get("model"), "stop_reason": None, "stop_sequence": None,
            "usage": {**usage, "output_tokens": 1}}})]
        for i, b in enumerate(content):
            if b["type"] == "tool_use":
                events.append(_sse("content_block_start", {"type": "content_block_start", "index": i,
                                                           "content_block": {**b, "input": {}}}))
                events.append(_sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {
                    "type": "input_json_delta", "partial_json": json.dumps(b["input"])}}))
            else:
                events.append(_sse("content_block_start", {"type": "content_block_start", "index": i,
                                                           "content_block": {"type": "text", "text": ""}}))
                events.append(_sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                           "delta": {"type": "text_delta", "text": b["text"]}}))
            events.append(_sse("content_block_stop", {"type": "content_block_stop", "index": i}))
        stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        events.append(_sse("message_delta", {"type": "message_delta",
                                             "delta": {"stop_reason": stop, "stop_sequence": None},
                                             "usage": {**usage, "output_tokens": out_tokens}}))
        events.append(_sse("message_stop", {"type": "message_stop"}))
        payload = b"".join(events)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(payload)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(payload)
        self.close_connection = True

    def _json(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True


class CacheServer:
    """The server on 127.0.0.1 and a free port; `log` holds one record per request."""

    def __init__(self, reply):
        self.reply, self.cache, self.log = reply, Cache(), []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.owner = self
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self._httpd.shutdown()
        self._httpd.server_close()
