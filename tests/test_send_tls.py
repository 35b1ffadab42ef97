"""panto-send reads the CA certificates only for an https server: a plain
http:// base URL (a local server) never touches them, and an https one
that cannot read them fails in one line, after the input is out."""
import sse_server as S
from builders import BASE, lines
from conftest import failed, send


def test_plain_http_never_reads_the_ca_certificates(srv, tmp_path):
    srv.push(S.openai_text("ok."))
    p = send(srv, "now", input=BASE, SSL_CERT_FILE=str(tmp_path / "no-such-ca.pem"), SSL_CERT_DIR=None)
    assert p.returncode == 0, p.stderr
    out = lines(p.stdout[len(BASE):])
    assert [e["message"]["role"] for e in out] == ["user", "assistant"]
    assert out[-1]["message"]["content"] == [{"type": "text", "text": "ok."}]
    assert len(srv.requests) == 1


def test_https_with_unreadable_ca_certificates_fails_in_one_line(srv, tmp_path):
    missing = tmp_path / "no-such-ca.pem"
    p = send(srv, "now", input=BASE, OPENAI_BASE_URL=f"https://127.0.0.1:{srv.port}/v1",
             SSL_CERT_FILE=str(missing), SSL_CERT_DIR=None)
    failed(p, "https://127.0.0.1", "no such file")
    assert srv.requests == []
