"""The only module that imports httpx: one streaming POST with timeouts,
bounded retries, provider error messages (on one line) and API keys kept out
of them (pantolib.secrets decides what a key is); and the GET of a model list.

Import it only after the command line is parsed (httpx costs ~100 ms).
panto-send imports it in a thread while it reads its input (see cmd/send.py).
"""
import os
import random
import ssl
import sys
import threading
import time

import httpx
import orjson

from pantolib import secrets as _secrets
from pantolib.errors import ProviderError
from pantolib.providers import one_line

RETRY_STATUSES = frozenset((408, 409, 429, 500, 502, 503, 504, 520, 522, 524, 529))
RETRY_AFTER_CAP = 30.0      # seconds: a longer retry-after fails the turn at once
BACKOFF_BASE = 0.5          # seconds, doubled every attempt
BACKOFF_CAP = 8.0
CONNECT_CAP = 15.0          # seconds to connect, at most
MAX_ERROR_BODY = 64 * 1024
MAX_WHOLE_BODY = 64 * 1024 * 1024   # a complete reply sent as one JSON document
MAX_MODELS_BODY = 16 * 1024 * 1024


class _TLSContext(ssl.SSLContext):
    """httpx's default verification (certificates checked, host name
    matched), with the CA certificates read once, at the first TLS
    connection or by `load()`: a plain http:// server never costs the
    50-80 ms of reading a CA bundle. The same sources as httpx with
    trust_env: SSL_CERT_FILE, else SSL_CERT_DIR, else certifi's bundle."""

    def __new__(cls):
        return super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)

    def __init__(self):
        super().__init__()
        self._lock = threading.Lock()
        self._loaded = False
        # what ssl.create_default_context() adds to a client context
        if sys.version_info >= (3, 13):
            self.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN | ssl.VERIFY_X509_STRICT
        keylog = os.environ.get("SSLKEYLOGFILE")
        if keylog and not sys.flags.ignore_environment:
            self.keylog_filename = keylog

    def load(self):
        with self._lock:
            if self._loaded:
                return
            if os.environ.get("SSL_CERT_FILE"):
                self.load_verify_locations(cafile=os.environ["SSL_CERT_FILE"])
            elif os.environ.get("SSL_CERT_DIR"):
                self.load_verify_locations(capath=os.environ["SSL_CERT_DIR"])
            else:
                import certifi

                self.load_verify_locations(cafile=certifi.where())
            self._loaded = True

    def wrap_socket(self, *args, **kwargs):
        self.load()
        return super().wrap_socket(*args, **kwargs)

    def wrap_bio(self, *args, **kwargs):
        self.load()
        return super().wrap_bio(*args, **kwargs)


TLS = _TLSContext()     # the one SSL context of the process: every client uses it


def prepare(url):
    """Get ready to talk to url: for https, read the CA certificates now
    (panto-send calls it in its background thread). Errors wait for the
    connection, which reports them."""
    if url.lower().startswith("https:"):
        try:
            TLS.load()
        except (OSError, ValueError, ImportError):
            pass


class StatusError(ProviderError):
    """An HTTP error status, with the provider's own message."""

    def __init__(self, message, status, detail):
        super().__init__(message)
        self.status, self.detail = status, detail


def error_detail(body):
    """The provider's own message from an error body (OpenAI or Anthropic
    shape, or any text), on one line."""
    return one_line(_message(body))


def _message(body):
    if body.lstrip()[:5] in (b"data:", b"event"):   # an error answered as an event stream
        return _stream_message(body)
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace")
    if isinstance(obj, list) and obj and isinstance(obj[0], dict):
        obj = obj[0]  # some proxies wrap the error in a list
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("detail") or err.get("type")
            if isinstance(msg, str) and msg:
                return msg
        elif isinstance(err, str) and err:
            return err
        for key in ("message", "detail"):
            if isinstance(obj.get(key), str):
                return obj[key]
    return body.decode("utf-8", "replace")


def _stream_message(body):
    """The message of the first event of an event-stream body that holds one
    (`data: {"error": {...}}`), else the body as it is."""
    from pantolib.providers.sse import events

    for ev in events([body, b"\n\n"]):
        if ev.data == b"[DONE]":
            continue
        try:
            obj = orjson.loads(ev.data)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict) and (obj.get("error") or obj.get("message")):
            return _message(ev.data)
    return body.decode("utf-8", "replace")


def retry_after(headers, now=None):
    """Seconds the server asks us to wait (retry-after-ms, retry-after), or None."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    v = headers.get("retry-after")
    if not v:
        return None
    try:
        return max(0.0, float(v))
    except ValueError:
        pass
    import email.utils   # only for a date (~8 ms to import)

    try:
        when = email.utils.parsedate_to_datetime(v).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


class Request:
    """One streaming POST: call `.chunks()` for the body, `.close()` when done."""

    def __init__(self, url, headers, body, *, timeout=120.0, retries=3, provider="provider",
                 key_var=None, secrets=(), on_retry=None):
        self.url, self.headers, self.body = url, headers, body
        self.timeout, self.retries, self.provider = timeout, retries, provider
        self.key_var, self.on_retry = key_var, on_retry
        self.secrets = _secrets.ordered([*secrets, *_secrets.url_keys(url)])
        self._client = self._response = None
        self.whole = None   # the body of a 2xx answered as one JSON document, not as a stream

    def _hide(self, text):
        """A message with keys hidden, and anything shaped like one (a server's words)."""
        return _secrets.redact(text, self.secrets, keylike=True)

    def _fail(self, message):
        return ProviderError(self._hide(f"{self.provider}: {message}"))

    def open(self):
        """Send the request (retrying 429/5xx); returns once a 2xx response has begun."""
        t = self.timeout
        try:
            self._client = httpx.Client(timeout=httpx.Timeout(t, connect=min(t, CONNECT_CAP)),
                                        follow_redirects=False, trust_env=True, verify=TLS)
        except ImportError as e:  # e.g. ALL_PROXY=socks5://... without httpx's SOCKS extra
            raise self._fail(f"the proxy set in the environment needs a package panto does not "
                             f"install ({e}); unset the proxy variable") from None
        content = orjson.dumps(self.body)
        attempt = 0
        while True:
            try:
                req = self._client.build_request("POST", self.url, headers=self.headers, content=content)
                resp = self._client.send(req, stream=True)
            except httpx.ConnectTimeout:
                raise self._fail(f"could not connect to {self._where()} within {min(t, CONNECT_CAP):g} s "
                                 "(check the base URL and your network)") from None
            except httpx.ConnectError as e:
                raise self._fail(f"cannot connect to {self._where()}: {_reason(e)} "
                                 "(is the server running? check the base URL)") from None
            except httpx.TimeoutException:
                raise self._fail(f"no response from {self._where()} within {t:g} s (raise --timeout)") from None
            except httpx.HTTPError as e:
                raise self._fail(f"request to {self._where()} failed: {_reason(e)}") from None
            if resp.status_code < 300 and "json" not in resp.headers.get("content-type", ""):
                self._response = resp
                return self
            if resp.status_code < 300:  # a JSON answer to a streaming request: the caller reads it whole
                self.whole = _read_body(resp, MAX_WHOLE_BODY)
                return self
            body = _read_body(resp)
            wait = self._retry_wait(resp, attempt)
            if wait is None:
                raise self._status_error(resp.status_code, body, resp.headers)
            attempt += 1
            if self.on_retry:
                self.on_retry(self._hide(f"{self.provider}: HTTP {resp.status_code}, retrying in "
                                         f"{wait:.1f} s ({attempt}/{self.retries})"))
            time.sleep(wait)

    def _where(self):
        return _where(self.url)

    def _retry_wait(self, resp, attempt):
        """Seconds to wait before retrying this response, or None to give up."""
        should = resp.headers.get("x-should-retry")
        if attempt >= self.retries or should == "false":
            return None
        if resp.status_code not in RETRY_STATUSES and should != "true":
            return None
        asked = retry_after(resp.headers)
        if asked is not None:
            return asked if asked <= RETRY_AFTER_CAP else None
        backoff = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** attempt)
        return backoff * (0.75 + random.random() / 2)

    def _status_error(self, status, body, headers):
        detail = self._hide(error_detail(body)) if body else ""
        msg = f"HTTP {status}"
        if detail:
            msg += f": {detail}"
        hint = ""
        if status in (401, 403) and self.key_var:
            hint = f"check {self.key_var}"
        elif status == 404:
            hint = "check the model name and the base URL"
        elif status in RETRY_STATUSES:
            asked = retry_after(headers)
            if asked is not None and asked > RETRY_AFTER_CAP:
                hint = f"the server asks to retry after {asked:.0f} s"
            elif self.retries:
                hint = f"gave up after {self.retries} {'retry' if self.retries == 1 else 'retries'}"
        if hint:
            msg += f" ({hint})"
        return StatusError(self._hide(f"{self.provider}: {msg}"), status, detail)

    def chunks(self):
        """The response body as byte chunks; network failures become ProviderError."""
        if self.whole is not None:
            yield self.whole
            return
        try:
            yield from self._response.iter_bytes()
        except httpx.ReadTimeout:
            raise self._fail(f"no data from the server for {self.timeout:g} s (raise --timeout)") from None
        except httpx.TimeoutException:
            raise self._fail(f"the server timed out after {self.timeout:g} s (raise --timeout)") from None
        except (httpx.RemoteProtocolError, httpx.ReadError) as e:
            raise self._fail(f"the connection broke mid-stream: {_reason(e)}") from None
        except httpx.HTTPError as e:
            raise self._fail(f"reading the stream failed: {_reason(e)}") from None

    def close(self):
        if self._response is not None:
            self._response.close()
        if self._client is not None:
            self._client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def get_json(url, headers, *, timeout=30.0, provider="provider", key_var=None, secrets=()):
    """GET a JSON document (a model list); ProviderError with one line on any failure."""
    keys = _secrets.ordered([*secrets, *_secrets.url_keys(url)])

    def fail(message):
        return ProviderError(_secrets.redact(f"{provider}: {message}", keys, keylike=True))

    try:
        with httpx.Client(timeout=httpx.Timeout(timeout, connect=min(timeout, CONNECT_CAP)),
                          follow_redirects=True, trust_env=True, verify=TLS) as client:
            with client.stream("GET", url, headers=headers) as resp:
                body = b""
                for piece in resp.iter_bytes():
                    body += piece
                    if len(body) > MAX_MODELS_BODY:
                        raise fail(f"the answer of {_where(url)} is larger than "
                                   f"{MAX_MODELS_BODY // 2**20} MB")
    except ImportError as e:
        raise fail(f"the proxy set in the environment needs a package panto does not install ({e})") from None
    except httpx.TimeoutException:
        raise fail(f"no response from {_where(url)} within {timeout:g} s (raise --timeout)") from None
    except httpx.HTTPError as e:
        raise fail(f"cannot reach {_where(url)}: {_reason(e)} (is the server running? "
                   "check the base URL)") from None
    if resp.status_code >= 300:
        detail = error_detail(body) if body else ""
        hint = {401: f" (check {key_var})", 403: f" (check {key_var})",
                404: " (this server has no model list there; check the base URL)"}.get(resp.status_code, "")
        if not key_var:
            hint = hint if resp.status_code == 404 else ""
        raise fail(f"HTTP {resp.status_code}" + (f": {detail}" if detail else "") + hint)
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise fail(f"the answer of {_where(url)} is not JSON: {one_line(body.decode('utf-8', 'replace'), 80)}") from None


def _where(url):
    """scheme://host:port of a URL: never its user info, path or query."""
    u = httpx.URL(url)
    return f"{u.scheme}://{u.host}" + (f":{u.port}" if u.port else "")


def _read_body(resp, limit=MAX_ERROR_BODY):
    """The start of an answer's body, up to `limit` bytes (empty if it cannot be read), then close it."""
    body = []
    try:
        for piece in resp.iter_bytes():
            body.append(piece)
            limit -= len(piece)
            if limit <= 0:
                break
    except httpx.HTTPError:
        pass
    finally:
        resp.close()
    data = b"".join(body)
    return data[:len(data) + min(0, limit)]


def _reason(e):
    """A short reason for an httpx error (the innermost OS error when there is one)."""
    inner = e
    while inner.__cause__ is not None or inner.__context__ is not None:
        inner = inner.__cause__ or inner.__context__
    if isinstance(inner, OSError) and inner.strerror:
        return inner.strerror.lower()
    text = str(e) or type(e).__name__
    return text.split("\n")[0]
