"""pantolib.http on its own, against real servers on 127.0.0.1: the
streaming POST (retries, status errors and their hints, network failures
before and during the body), the GET of a model list, what a provider's
error body says, retry-after, and the TLS context's lazy CA loading."""
import email.utils
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pantolib import http
from pantolib.errors import ProviderError
from sse_server import error_reply, reply, sse

KEY = "sk-unit-0123456789abcdefSECRET"


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    for var in ("ALL_PROXY", "all_proxy", "HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(var, raising=False)


def post(srv, body=None, **kw):
    """Request.open() and the whole body, or the ProviderError it raised."""
    with http.Request(srv.url + "/v1/chat/completions", {"authorization": f"Bearer {KEY}"},
                      body or {"model": "m"}, secrets=[KEY], **kw) as r:
        try:
            r.open()
            return b"".join(r.chunks())
        except ProviderError as e:
            return e


# -- error bodies -------------------------------------------------------------------------

@pytest.mark.parametrize("body,want", [
    (b'{"error": {"message": "bad key", "type": "auth"}}', "bad key"),
    (b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}', "Overloaded"),
    (b'{"error": {"type": "invalid_request"}}', "invalid_request"),
    (b'{"error": {"detail": "no such model"}}', "no such model"),
    (b'[{"error": {"message": "wrapped"}}]', "wrapped"),
    (b'{"error": "plain words"}', "plain words"),
    (b'{"message": "top level"}', "top level"),
    (b'{"detail": "fastapi style"}', "fastapi style"),
    (b'{"error": {"code": 7}, "message": "beside"}', "beside"),
    (b'{"status": 500}', '{"status": 500}'),
    (b'{"error": null, "detail": "beside a null error"}', "beside a null error"),
    (b'{"error": {"message": ["not", "text"]}}', '{"error": {"message": ["not", "text"]}}'),
    (b'[1, 2]', "[1, 2]"),
    (b"<html>\n  Bad   gateway\n</html>", "<html> Bad gateway </html>"),
    (b'data: {"error": {"message": "in a stream"}}\n\n', "in a stream"),
    (b'event: error\ndata: {"type": "error", "error": {"message": "named"}}\n\n', "named"),
    (b'data: [DONE]\n\ndata: not json\n\ndata: {"message": "third"}\n\n', "third"),
    (b'data: {"choices": []}\n\n', 'data: {"choices": []}'),
])
def test_error_detail(body, want):
    assert http.error_detail(body) == want


# -- retry-after ------------------------------------------------------------------------------

@pytest.mark.parametrize("headers,want", [
    ({}, None),
    ({"retry-after": "3"}, 3.0),
    ({"retry-after": "-3"}, 0.0),
    ({"retry-after-ms": "1500"}, 1.5),
    ({"retry-after-ms": "soon", "retry-after": "2"}, 2.0),
    ({"retry-after": "whenever"}, None),
    ({"retry-after": ""}, None),
])
def test_retry_after(headers, want):
    assert http.retry_after(headers) == want


def test_retry_after_a_date():
    now = 1_800_000_000.0
    assert http.retry_after({"retry-after": email.utils.formatdate(now + 7, usegmt=True)}, now=now) == 7.0
    assert http.retry_after({"retry-after": email.utils.formatdate(now - 7, usegmt=True)}, now=now) == 0.0
    later = http.retry_after({"retry-after": email.utils.formatdate(4_000_000_000, usegmt=True)})
    assert later > 0


def test_where_keeps_only_scheme_host_and_port():
    assert http._where("https://user:pw@api.example.com/v1/x?key=1") == "https://api.example.com"
    assert http._where("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080"


# -- the POST ---------------------------------------------------------------------------------

def test_a_stream_is_read_in_chunks_and_the_body_sent_as_json(srv):
    srv.push(reply([sse({"n": 1}), sse({"n": 2})]))
    assert post(srv, {"model": "m", "stream": True}) == b'data: {"n": 1}\n\ndata: {"n": 2}\n\n'
    assert srv.requests[0].body == {"model": "m", "stream": True}
    assert srv.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_a_json_answer_is_read_whole(srv):
    srv.push({"status": 200, "body": {"id": "x", "choices": []}})
    with http.Request(srv.url + "/v1/x", {}, {}) as r:
        assert r.open() is r
        assert r.whole == b'{"id": "x", "choices": []}'
        assert list(r.chunks()) == [r.whole]


def test_retries_with_the_wait_the_server_asks_for(srv):
    srv.push(error_reply(429, "slow down", headers={"retry-after": "0"}),
             error_reply(503, "busy", headers={"retry-after-ms": "0"}),
             reply([sse({"ok": True})]))
    said = []
    assert post(srv, on_retry=said.append) == b'data: {"ok": true}\n\n'
    assert said == ["provider: HTTP 429, retrying in 0.0 s (1/3)", "provider: HTTP 503, retrying in 0.0 s (2/3)"]
    assert len(srv.requests) == 3


def test_x_should_retry_overrides_the_status(srv):
    srv.push(error_reply(400, "odd", headers={"x-should-retry": "true", "retry-after": "0"}),
             reply([sse("fine")]))
    assert post(srv) == b"data: fine\n\n"
    srv.push(error_reply(500, "do not", headers={"x-should-retry": "false"}))
    e = post(srv)
    assert isinstance(e, http.StatusError) and e.status == 500 and len(srv.requests) == 3


@pytest.mark.parametrize("rep,kw,want", [
    (error_reply(401, "Incorrect API key"), {"key_var": "OPENAI_API_KEY"},
     "acme: HTTP 401: Incorrect API key (check OPENAI_API_KEY)"),
    (error_reply(403, "forbidden"), {}, "acme: HTTP 403: forbidden"),
    (error_reply(404, "no model"), {}, "acme: HTTP 404: no model (check the model name and the base URL)"),
    (error_reply(503, "later", headers={"retry-after": "120"}), {},
     "acme: HTTP 503: later (the server asks to retry after 120 s)"),
    (error_reply(500, "boom"), {"retries": 0}, "acme: HTTP 500: boom"),
    ({"status": 400, "body": ""}, {}, "acme: HTTP 400"),
])
def test_status_errors_and_their_hints(srv, rep, kw, want):
    srv.push(rep)
    e = post(srv, provider="acme", **kw)
    assert isinstance(e, http.StatusError) and str(e) == want
    assert e.status == rep["status"]


def test_giving_up_after_the_retries_says_so(srv):
    srv.push(*[error_reply(502, "bad gateway", headers={"retry-after": "0"})] * 2)
    e = post(srv, retries=1)
    assert str(e) == "provider: HTTP 502: bad gateway (gave up after 1 retry)" and len(srv.requests) == 2
    srv.push(*[error_reply(502, "bad gateway", headers={"retry-after": "0"})] * 3)
    assert str(post(srv, retries=2)).endswith("(gave up after 2 retries)")


def test_a_key_in_the_error_is_hidden(srv):
    srv.push(error_reply(401, f"key {KEY} is not valid, nor sk-proj-abcdefghijklmnopqrstuvwx"))
    e = post(srv)
    assert KEY not in str(e) and "sk-proj-abcdefghijklmnopqrstuvwx" not in str(e)
    assert KEY not in e.detail and str(e).startswith("provider: HTTP 401: key ")


def test_an_error_body_is_read_up_to_its_limit(srv):
    import httpx

    srv.push({"status": 400, "body": "x" * (http.MAX_ERROR_BODY + 5000)})
    with httpx.Client() as c:
        resp = c.send(c.build_request("POST", srv.url + "/v1/x", content=b"{}"), stream=True)
        assert http._read_body(resp) == b"x" * http.MAX_ERROR_BODY
        assert resp.is_closed


def test_the_backoff_without_retry_after_doubles_with_some_jitter():
    import httpx

    r = http.Request("http://127.0.0.1:1/v1/x", {}, {}, retries=9)
    waits = [r._retry_wait(httpx.Response(503), attempt) for attempt in range(6)]
    for attempt, wait in enumerate(waits):
        base = min(http.BACKOFF_CAP, http.BACKOFF_BASE * 2 ** attempt)
        assert 0.75 * base <= wait <= 1.25 * base
    assert r._retry_wait(httpx.Response(400), 0) is None
    assert r._retry_wait(httpx.Response(503), 9) is None


def test_a_body_that_cannot_be_decoded(srv):
    srv.push(reply(["not gzip at all"], headers={"content-encoding": "gzip"}))
    e = post(srv)
    assert isinstance(e, ProviderError) and str(e).startswith("provider: reading the stream failed: ")
    srv.push({"status": 400, "body": "not gzip either", "headers": {"content-encoding": "gzip"}})
    e = post(srv)
    assert isinstance(e, http.StatusError) and str(e) == "provider: HTTP 400" and e.detail == ""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nothing_listening():
    port = free_port()
    with http.Request(f"http://127.0.0.1:{port}/v1/x", {}, {}) as r:
        with pytest.raises(ProviderError) as e:
            r.open()
    assert str(e.value) == (f"provider: cannot connect to http://127.0.0.1:{port}: connection refused "
                            "(is the server running? check the base URL)")


@pytest.fixture
def silent():
    """A port that takes connections and never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    yield s.getsockname()[1]
    s.close()


def test_no_response_within_the_timeout(silent):
    with http.Request(f"http://127.0.0.1:{silent}/v1/x", {}, {}, timeout=0.2) as r:
        with pytest.raises(ProviderError) as e:
            r.open()
    assert str(e.value) == f"provider: no response from http://127.0.0.1:{silent} within 0.2 s (raise --timeout)"


def test_a_url_httpx_cannot_send_to():
    with http.Request("ftp://127.0.0.1/v1/x", {}, {}) as r:
        with pytest.raises(ProviderError) as e:
            r.open()
    assert str(e.value).startswith("provider: request to ftp://127.0.0.1 failed: ")


def test_a_socks_proxy_needs_a_package_panto_does_not_install(monkeypatch):
    import importlib.util

    if importlib.util.find_spec("socksio") is not None:
        pytest.skip("httpx's SOCKS extra is installed here")
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1")
    r = http.Request("http://127.0.0.1:1/v1/x", {}, {})
    with pytest.raises(ProviderError) as e:
        r.open()
    assert "the proxy set in the environment needs a package panto does not install" in str(e.value)
    assert "unset the proxy variable" in str(e.value)
    with pytest.raises(ProviderError) as e:
        http.get_json("http://127.0.0.1:1/v1/models", {})
    assert "needs a package panto does not install" in str(e.value)
    r.close()


def test_the_stream_stops_sending(srv):
    srv.push(reply([sse(1), sse(2)], stall_after=1, stall=30))
    got = []
    with http.Request(srv.url + "/v1/x", {}, {}, timeout=1.0) as r:
        r.open()
        with pytest.raises(ProviderError) as e:
            for c in r.chunks():
                got.append(c)
    assert got == [b"data: 1\n\n"]
    assert str(e.value) == "provider: no data from the server for 1 s (raise --timeout)"


@pytest.mark.parametrize("how", ["close_after", "reset_after"])
def test_the_connection_breaks_mid_stream(srv, how):
    srv.push(reply([sse(1), sse(2)], **{how: 1}))
    with http.Request(srv.url + "/v1/x", {}, {}) as r:
        r.open()
        with pytest.raises(ProviderError) as e:
            list(r.chunks())
    assert str(e.value).startswith("provider: the connection broke mid-stream: ")


def test_close_before_open_is_harmless():
    r = http.Request("http://127.0.0.1:1/v1/x", {}, {})
    r.close()
    assert r._client is None and r.whole is None


# -- the GET of a model list --------------------------------------------------------------------

class _Models(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    answers = {
        "/models": (200, b'{"data": [{"id": "m1"}]}'),
        "/text": (200, b"<html>\nnot json\n</html>"),
        "/denied": (401, b'{"error": {"message": "no key"}}'),
        "/none": (404, b""),
        "/teapot": (418, b"short and stout"),
    }

    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.path == "/moved":
            return self._send(302, b"", location="/models")
        if self.path == "/huge":
            self.send_response(200)
            self.send_header("content-length", str(http.MAX_MODELS_BODY + 2**20))
            self.end_headers()
            piece = b" " * 2**20
            try:
                for _ in range(17):
                    self.wfile.write(piece)
            except OSError:
                pass
            return
        if self.path == "/silent":
            self.server.done.wait(30)
            return
        self._send(*self.answers[self.path])

    def _send(self, status, body, **headers):
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass        # a client that hung up (the huge answer): nothing to report


@pytest.fixture(scope="module")
def models():
    httpd = _Quiet(("127.0.0.1", 0), _Models)
    httpd.done = threading.Event()
    t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.done.set()
    httpd.shutdown()
    httpd.server_close()


def test_get_json_gives_the_document(models):
    assert http.get_json(models + "/models", {}) == {"data": [{"id": "m1"}]}
    assert http.get_json(models + "/moved", {}) == {"data": [{"id": "m1"}]}     # redirects followed


@pytest.mark.parametrize("path,kw,want", [
    ("/denied", {"key_var": "ACME_API_KEY"}, "acme: HTTP 401: no key (check ACME_API_KEY)"),
    ("/denied", {}, "acme: HTTP 401: no key"),
    ("/none", {}, "acme: HTTP 404 (this server has no model list there; check the base URL)"),
    ("/teapot", {"key_var": "ACME_API_KEY"}, "acme: HTTP 418: short and stout"),
    ("/text", {}, "acme: the answer of {url} is not JSON: <html> not json </html>"),
])
def test_get_json_failures_on_one_line(models, path, kw, want):
    with pytest.raises(ProviderError) as e:
        http.get_json(models + path, {}, provider="acme", **kw)
    assert str(e.value) == want.format(url=models)


def test_get_json_refuses_a_huge_answer(models):
    with pytest.raises(ProviderError) as e:
        http.get_json(models + "/huge", {})
    assert str(e.value) == f"provider: the answer of {models} is larger than 16 MB"


def test_get_json_with_no_answer_and_with_nothing_listening(models):
    with pytest.raises(ProviderError) as e:
        http.get_json(models + "/silent", {}, timeout=0.2)
    assert str(e.value) == f"provider: no response from {models} within 0.2 s (raise --timeout)"
    port = free_port()
    with pytest.raises(ProviderError) as e:
        http.get_json(f"http://127.0.0.1:{port}/v1/models?key={KEY}", {}, secrets=[KEY])
    assert str(e.value) == (f"provider: cannot reach http://127.0.0.1:{port}: connection refused "
                            "(is the server running? check the base URL)")


# -- TLS ----------------------------------------------------------------------------------------

def ca_count(ctx):
    return ctx.cert_store_stats()["x509_ca"]


def test_the_ca_certificates_are_read_once_at_the_first_tls_use(monkeypatch, tmp_path):
    import certifi

    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    ctx = http._TLSContext()
    assert ca_count(ctx) == 0
    ctx.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="example.com")
    n = ca_count(ctx)
    assert n > 10
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "gone.pem"))
    ctx.load()                          # read already: not again
    assert ca_count(ctx) == n
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname


def test_ca_sources_dir_and_certifi(monkeypatch, tmp_path):
    import certifi

    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    ctx = http._TLSContext()
    with socket.socket() as s:
        ctx.wrap_socket(s, server_hostname="example.com", do_handshake_on_connect=False).close()
    assert ca_count(ctx) == 0        # a directory is read as certificates are needed
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    ctx.load()                       # the first TLS use chose the directory: nothing is read again
    assert ca_count(ctx) == 0
    monkeypatch.delenv("SSL_CERT_FILE")
    monkeypatch.delenv("SSL_CERT_DIR")
    ctx = http._TLSContext()
    ctx.load()
    want = ssl.create_default_context(cafile=certifi.where())
    assert ca_count(ctx) == ca_count(want) > 10


def test_a_key_log_file_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("SSLKEYLOGFILE", str(tmp_path / "keys"))
    assert http._TLSContext().keylog_filename == str(tmp_path / "keys")
    monkeypatch.delenv("SSLKEYLOGFILE")
    assert http._TLSContext().keylog_filename is None


def test_prepare_reads_certificates_for_https_only_and_keeps_errors_for_the_connection(monkeypatch, tmp_path):
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(bad))
    ctx = http._TLSContext()
    monkeypatch.setattr(http, "TLS", ctx)
    http.prepare("http://127.0.0.1:1/v1")
    assert not ctx._loaded
    http.prepare("HTTPS://api.example.com/v1")          # fails: left for the connection to report
    assert not ctx._loaded
    with pytest.raises(ssl.SSLError):
        ctx.load()
