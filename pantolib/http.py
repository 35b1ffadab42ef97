"""The only module that imports httpx: one streaming POST with timeouts,
bounded retries, provider error messages and API keys kept out of them.

Import it only after the command line is parsed (httpx costs ~100 ms).
"""
import email.utils
import random
import re
import time

import httpx
import orjson

from pantolib.errors import ProviderError

RETRY_STATUSES = frozenset((408, 409, 429, 500, 502, 503, 504, 520, 522, 524, 529))
RETRY_AFTER_CAP = 30.0      # seconds: a longer retry-after fails the turn at once
BACKOFF_BASE = 0.5          # seconds, doubled every attempt
BACKOFF_CAP = 8.0
CONNECT_CAP = 15.0          # seconds to connect, at most
MAX_ERROR_BODY = 64 * 1024
REDACTED = "[redacted]"
# Tokens that look like API keys, in case a server echoes a masked or other key.
_KEYLIKE = re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_\-*.]{8,}")


class StatusError(ProviderError):
    """An HTTP error status, with the provider's own message."""

    def __init__(self, message, status, detail):
        super().__init__(message)
        self.status, self.detail = status, detail


def redact(text, secrets=()):
    """Replace every secret (and anything shaped like an API key) in text."""
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, REDACTED)
    return _KEYLIKE.sub(REDACTED, text)


def error_detail(body):
    """The provider's own message from an error body (OpenAI or Anthropic shape)."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = body.decode("utf-8", "replace").strip()
        return " ".join(text.split())[:300]
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
    return " ".join(body.decode("utf-8", "replace").split())[:300]


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
        self.key_var, self.secrets, self.on_retry = key_var, tuple(secrets), on_retry
        self._client = self._response = None

    def _fail(self, message):
        return ProviderError(redact(f"{self.provider}: {message}", self.secrets))

    def open(self):
        """Send the request (retrying 429/5xx); returns once a 2xx response has begun."""
        t = self.timeout
        try:
            self._client = httpx.Client(timeout=httpx.Timeout(t, connect=min(t, CONNECT_CAP)),
                                        follow_redirects=False, trust_env=True)
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
            if resp.status_code < 300:  # a JSON answer to a streaming request is an error
                body = _read_body(resp)
                detail = redact(error_detail(body), self.secrets) if body else "an empty answer"
                raise self._fail(f"expected an event stream, got JSON: {detail}")
            body = _read_body(resp)
            wait = self._retry_wait(resp, attempt)
            if wait is None:
                raise self._status_error(resp.status_code, body, resp.headers)
            attempt += 1
            if self.on_retry:
                self.on_retry(redact(f"{self.provider}: HTTP {resp.status_code}, retrying in {wait:.1f} s "
                                     f"({attempt}/{self.retries})", self.secrets))
            time.sleep(wait)

    def _where(self):
        u = httpx.URL(self.url)
        return f"{u.scheme}://{u.host}" + (f":{u.port}" if u.port else "")

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
        detail = redact(error_detail(body), self.secrets) if body else ""
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
                hint = f"gave up after {self.retries} retries"
        if hint:
            msg += f" ({hint})"
        err = StatusError(redact(f"{self.provider}: {msg}", self.secrets), status, detail)
        return err

    def chunks(self):
        """The response body as byte chunks; network failures become ProviderError."""
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


def _read_body(resp):
    """The start of an error answer's body (empty if it cannot be read), then close it."""
    try:
        return resp.read()[:MAX_ERROR_BODY]
    except httpx.HTTPError:
        return b""
    finally:
        resp.close()


def _reason(e):
    """A short reason for an httpx error (the innermost OS error when there is one)."""
    inner = e
    while inner.__cause__ is not None or inner.__context__ is not None:
        inner = inner.__cause__ or inner.__context__
    if isinstance(inner, OSError) and inner.strerror:
        return inner.strerror.lower()
    text = str(e) or type(e).__name__
    return text.split("\n")[0]
