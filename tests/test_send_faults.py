"""panto-send when things go wrong: every failure is one line on stderr, exit 1,
no assistant entry, and the input plus the new user entry still on stdout;
the API key appears nowhere."""
import os
import signal
import socket
import subprocess
import shutil
import time

import pytest

import sse_server as S
from builders import BASE, lines
from conftest import AKEY, KEY, assert_clean_error, env_for, failed, secret_free, send


def test_http_error_shows_the_providers_message(srv):
    srv.push(S.error_reply(400, "Invalid value for 'model': 'nope' does not exist", "invalid_request_error"))
    failed(send(srv, "now", input=BASE), "HTTP 400", "does not exist")


def test_anthropic_http_error_shows_its_message(srv):
    srv.push(S.error_reply(400, "messages: roles must alternate", "invalid_request_error", style="anthropic"))
    failed(send(srv, "-p", "anthropic", "now", input=BASE), "HTTP 400", "roles must alternate")


@pytest.mark.parametrize("provider,var", [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")])
def test_401_names_the_key_variable(srv, provider, var):
    srv.push(S.error_reply(401, "invalid x-api-key", "authentication_error", style=provider))
    failed(send(srv, "-p", provider, "now", input=BASE), "HTTP 401", var)


def test_key_echoed_by_the_server_is_redacted(srv):
    # a proxy that echoes the request headers in its error, and a model that repeats the key
    srv.push(S.error_reply(403, f"forbidden for Authorization: Bearer {KEY} (x-api-key {AKEY})"))
    failed(send(srv, "now", input=BASE), "HTTP 403", "[redacted]")
    srv.push(S.openai_stream([{"error": {"message": f"bad key {KEY}"}}]))
    failed(send(srv, "now", input=BASE), "[redacted]")
    srv.push(S.openai_text(f"your key is {KEY}!"))
    p = send(srv, "now", "--live", input=BASE)
    assert p.returncode == 0
    assert b"[redacted]" in p.stdout and b"[redacted]" in p.stderr
    secret_free(p)


def test_429_is_retried_honouring_retry_after(srv):
    srv.push(S.error_reply(429, "slow down", headers={"retry-after": "0.3"}),
             S.error_reply(503, "busy", headers={"retry-after-ms": "10"}), S.openai_text("finally"))
    t = time.monotonic()
    p = send(srv, "now", input=BASE)
    assert p.returncode == 0, p.stderr
    assert time.monotonic() - t >= 0.3
    assert lines(p.stdout)[-1]["message"]["content"] == [{"type": "text", "text": "finally"}]
    assert len(srv.requests) == 3 and p.stderr == b""


def test_5xx_gives_up_after_the_retries(srv):
    for _ in range(3):
        srv.push(S.error_reply(502, "bad gateway", headers={"retry-after": "0"}))
    p = send(srv, "--retries", "2", "now", input=BASE)
    failed(p, "HTTP 502", "bad gateway", "2 retries")
    assert len(srv.requests) == 3


def test_retries_zero_disables_and_4xx_is_not_retried(srv):
    srv.push(S.error_reply(500, "oops", headers={"retry-after": "0"}))
    failed(send(srv, "--retries", "0", "now", input=BASE), "HTTP 500")
    srv.push(S.error_reply(400, "bad"), S.openai_text("never"))
    failed(send(srv, "now", input=BASE), "HTTP 400")
    assert len(srv.requests) == 2


def test_long_retry_after_fails_at_once(srv):
    srv.push(S.error_reply(429, "quota", headers={"retry-after": "3600"}))
    t = time.monotonic()
    failed(send(srv, "now", input=BASE), "HTTP 429", "3600")
    assert time.monotonic() - t < 5 and len(srv.requests) == 1


def test_connection_refused(srv):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = send(srv, "now", input=BASE, OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1")
    failed(p, "cannot connect", f"127.0.0.1:{port}")


def test_socks_proxy_without_its_package(srv):
    """httpx needs an extra package for SOCKS proxies: a clear line, not an internal error."""
    p = send(srv, "now", input=BASE, ALL_PROXY="socks5://127.0.0.1:9", all_proxy="socks5://127.0.0.1:9")
    failed(p)
    assert b"internal error" not in p.stderr


def test_reset_mid_stream(srv):
    rep = S.openai_text("a long answer that breaks", reset_after=3)
    srv.push(rep)
    failed(send(srv, "now", input=BASE), "connection")


def test_close_mid_stream(srv):
    srv.push(S.anthropic_text("a long answer that breaks", close_after=4))
    failed(send(srv, "-p", "anthropic", "now", input=BASE), "connection")


def test_stall_hits_the_read_timeout(srv):
    srv.push(S.openai_text("stalls after the first piece", stall_after=2, stall=20))
    t = time.monotonic()
    failed(send(srv, "--timeout", "0.5", "now", input=BASE), "no data", "--timeout")
    assert time.monotonic() - t < 10


def test_slow_drip_is_not_a_stall(srv):
    srv.push(S.openai_text("drip drip drip", split=256, delay=0.1))
    p = send(srv, "--timeout", "0.5", "now", input=BASE)
    assert p.returncode == 0, p.stderr
    assert lines(p.stdout)[-1]["message"]["content"] == [{"type": "text", "text": "drip drip drip"}]


def test_garbage_instead_of_sse(srv):
    srv.push(S.reply(["data: {this is not json}\n\n"]))
    failed(send(srv, "now", input=BASE), "malformed")


def test_ctrl_c_before_the_reply_keeps_the_prompt(srv):
    srv.push(S.openai_text("never finishes", stall_after=1, stall=20))
    proc = subprocess.Popen([shutil.which("panto-send"), "now"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env_for(srv))
    proc.stdin.write(BASE)
    proc.stdin.close()
    got = b""
    while got.count(b"\n") < 3:  # the prompt is downstream: the request is under way
        piece = os.read(proc.stdout.fileno(), 65536)
        assert piece, "panto-send ended before writing the prompt"
        got += piece
    proc.send_signal(signal.SIGINT)
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.wait(timeout=10)
    p = subprocess.CompletedProcess(proc.args, proc.returncode, got + out, err)
    assert_clean_error(p, status=130, name="panto-send")
    assert b"interrupted" in err and len(err.rstrip(b"\n").split(b"\n")) == 1, err
    assert p.stdout.startswith(BASE)
    out = lines(p.stdout[len(BASE):])
    assert out[0]["message"]["content"][-1]["text"] == "now"
    assert all(e["message"]["role"] == "user" or e["message"]["stopReason"] == "aborted" for e in out)
    secret_free(p)


def test_prompt_is_downstream_before_the_request_finishes(srv):
    srv.push(S.openai_text("slow", stall_after=1, stall=20))
    proc = subprocess.Popen([shutil.which("panto-send"), "--timeout", "5", "now"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_for(srv))
    proc.stdin.write(BASE)
    proc.stdin.close()
    got = b""
    deadline = time.monotonic() + 10
    while got.count(b"\n") < 3 and time.monotonic() < deadline:
        got += os.read(proc.stdout.fileno(), 65536)
    assert got.startswith(BASE) and b'"text":"now"' in got  # while the reply is still pending
    proc.kill()
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()


def test_json_error_with_status_200_instead_of_a_stream(srv):
    srv.push({"status": 200, "body": {"error": {"message": "model is loading", "type": "unavailable"}}})
    failed(send(srv, "now", input=BASE), "the server ignored stream: true")
