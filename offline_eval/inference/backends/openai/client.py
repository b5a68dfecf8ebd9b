"""HTTP to an OpenAI-compatible server: JSON in and out, and nothing taken for an answer that is not one.

- A 2xx with a JSON object is an answer. Anything else is not: a 3xx (redirects are never followed), a 4xx, a
  5xx, a body that is not JSON, or one past the size cap (generous, derived from max_tokens).
- 429 and 503 (the server is busy) and connection errors and other 5xx are retried with back-off, honouring
  Retry-After, up to `retries`; 401 and 403 stop the load in one line naming the key's variable; another 4xx
  fails that request (Refused), and the caller stores nothing for it, so a re-run asks again.
- `timeout_s` bounds each request's whole duration (a deadline), not each read: a server that trickles one
  byte at a time cannot hold a request, or the sweep, for ever. A request the server accepted but did not
  answer by its deadline is not sent again: the server may still be working on it, and a server that runs one
  request at a time (llama-cpp-python's) would queue the copy behind the original.
- The API key's value is removed from everything the server sends back (messages, bodies, answers) before it
  can reach an exception, a log, the store or a report. Proxies from the environment are ignored: the client
  talks to the configured server and nowhere else.
"""

from __future__ import annotations

import email.utils
import json
import re
import threading
import time
from typing import Any
from urllib.parse import quote

from offline_eval.runtime.errors import EngineError, described

BODY_BASE = 8 * 2**20  # bytes any answer may take (a /props with its chat template, a long /models list)
BODY_PER_TOKEN = 4096  # and per requested token: far above an answer's JSON, top logprobs included
REDACTED = "[api key removed]"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class Refused(Exception):
    """A 3xx or a 4xx other than a refused key: the request itself is wrong for this server; retrying will not
    help, and nothing is stored for it."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status, self.message = status, message


class KeyRefused(EngineError):
    """401 or 403: the load stops, naming the variable that holds the key."""


class ServerGone(EngineError):
    """The server did not answer (connection errors, 5xx, a busy server, the deadline) after every retry."""


class BadReply(EngineError):
    """The server sent something that is not an answer: not JSON, not an object, too large, or missing what an
    answer has. Nothing is stored for the request."""


_deadline = threading.local()  # the monotonic time the request running in this thread must end by


class ServerClient:
    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        timeout_s: float,
        retries: int,
        backoff_s: float = 0.5,
        concurrency: int = 16,
        api_key_env: str | None = None,
    ) -> None:
        import httpx

        self.base_url = base_url.rstrip("/")
        # /tokenize, /version and /props sit beside /v1, at the server's root
        self.root = self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url
        self.secrets = [s for s in {api_key, quote(api_key or "", safe="")} if s]
        self.api_key_env = api_key_env
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        self.http = httpx.Client(
            timeout=timeout_s,
            headers=headers,
            trust_env=False,
            follow_redirects=False,
            transport=_deadline_transport(limits),
        )
        self.retries, self.backoff_s, self.timeout_s = retries, backoff_s, timeout_s

    def redact(self, text: str) -> str:
        """The text with the key's value removed, and any lone surrogate (a JSON escape that is not a
        character, which no terminal, store or file could take) made U+FFFD."""
        for s in self.secrets:
            text = text.replace(s, REDACTED)
        return _LONE_SURROGATE.sub("\ufffd", text)

    def _clean(self, data: Any) -> Any:
        """The reply with the key's value removed from every string in it (keys and values)."""
        if isinstance(data, str):
            return self.redact(data)
        if isinstance(data, dict):
            return {self._clean(k): self._clean(v) for k, v in data.items()}
        if isinstance(data, list):
            return [self._clean(v) for v in data]
        return data

    def post(self, path: str, body: dict[str, Any], root: bool = False) -> dict[str, Any]:
        return self._call("POST", path, body, root)

    def get(self, path: str, root: bool = False) -> dict[str, Any] | None:
        """GET, or None where the server has no such endpoint (a 4xx other than a refused key)."""
        try:
            return self._call("GET", path, None, root)
        except Refused:
            return None

    def _call(self, method: str, path: str, body: dict[str, Any] | None, root: bool) -> dict[str, Any]:
        import httpx

        url = (self.root if root else self.base_url) + path
        limit = BODY_BASE + BODY_PER_TOKEN * int((body or {}).get("max_tokens") or 0)
        last, wait = "", 0.0
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(max(wait, self.backoff_s * 2 ** (attempt - 1)))
            wait = 0.0
            _deadline.at = time.monotonic() + self.timeout_s
            try:
                status, headers, raw = self._send(method, url, body, limit)
            except httpx.TimeoutException as e:
                if isinstance(e, httpx.ConnectTimeout):
                    last = f"no connection within timeout_s={self.timeout_s:g}"
                    continue
                raise ServerGone(
                    f"the server at {self.base_url} sent no complete answer to {method} {path} within timeout_s="
                    f"{self.timeout_s:g} (not re-sent: it may still be working on it); raise timeout_s, or lower "
                    f"max_concurrency if the server answers one request at a time"
                ) from None
            except httpx.HTTPError as e:  # connection refused or reset, a half-closed reply
                last = self.redact(described(e))
                continue
            finally:
                _deadline.at = None
            message = self.redact(_message(raw))
            if status in (429, 503) or status >= 500:
                last = f"HTTP {status}: {message}"
                wait = min(_retry_after(headers.get("retry-after")), self.timeout_s)
                continue
            if status in (401, 403):
                raise KeyRefused(
                    f"the server at {self.base_url} refused the API key (HTTP {status}: {message}); check the "
                    f"environment variable {self.api_key_env or 'that api_key_env names'}"
                    + ("" if self.api_key_env else " (no api_key_env is set: the server may want a key)")
                )
            if not 200 <= status < 300:
                what = "a redirect, which is never followed" if 300 <= status < 400 else message
                raise Refused(status, what)
            try:
                data = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                last = "the answer was not JSON"
                continue
            if not isinstance(data, dict):
                last = f"the answer was not a JSON object (got {type(data).__name__})"
                continue
            return self._clean(data)
        raise ServerGone(
            f"the server at {self.base_url} did not answer {method} {path} after {self.retries + 1} tries: {last}"
        )

    def _send(self, method: str, url: str, body: dict[str, Any] | None, limit: int) -> tuple[int, Any, bytes]:
        """One request: the status, the headers and the body, read up to `limit` bytes (decoded size)."""
        with self.http.stream(method, url, json=body) as resp:
            declared = resp.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                raise BadReply(self._too_large(url, int(declared), limit))
            chunks, size = [], 0
            for chunk in resp.iter_bytes():
                size += len(chunk)
                if size > limit:
                    raise BadReply(self._too_large(url, size, limit))
                chunks.append(chunk)
            return resp.status_code, resp.headers, b"".join(chunks)

    def _too_large(self, url: str, size: int, limit: int) -> str:
        return (
            f"the server at {self.base_url} sent more than {limit / 2**20:.0f} MiB for {url[len(self.root) :]} "
            f"({size / 2**20:.1f} MiB so far; the cap is 8 MiB plus 4 KiB per requested token): not an answer"
        )

    def close(self) -> None:
        self.http.close()


def _retry_after(value: str | None) -> float:
    """Retry-After in seconds: a number, or an HTTP date (0 when absent or unreadable)."""
    if not value:
        return 0.0
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return 0.0
    return max(0.0, when.timestamp() - time.time())


def _message(raw: bytes) -> str:
    """What a refusal says: its error message where the body is JSON, else the start of the body."""
    text = raw.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except ValueError:
        return text[:300]
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data.get("message", data)))
        if isinstance(err, dict):
            err = err.get("message", err)
        return str(err)[:300]
    return str(data)[:300]


def _deadline_transport(limits: Any) -> Any:
    """httpx's own transport, its connections' every read, write and connect bounded by the deadline of the
    request running in the calling thread (httpx's timeouts bound each read, not the request)."""
    import httpcore
    import httpx

    class Stream(httpcore.NetworkStream):
        def __init__(self, inner: httpcore.NetworkStream) -> None:
            self.inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return self.inner.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self.inner.write(buffer, _bounded(timeout, httpcore.WriteTimeout))

        def close(self) -> None:
            self.inner.close()

        def start_tls(self, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
            return Stream(self.inner.start_tls(*args, **kwargs))

        def get_extra_info(self, info: str) -> Any:
            return self.inner.get_extra_info(info)

    class Backend(httpcore.NetworkBackend):
        def __init__(self) -> None:
            self.inner = httpcore.SyncBackend()

        def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Any = None,
        ) -> httpcore.NetworkStream:
            bounded = _bounded(timeout, httpcore.ConnectTimeout)
            return Stream(self.inner.connect_tcp(host, port, bounded, local_address, socket_options))

        def connect_unix_socket(
            self, path: str, timeout: float | None = None, socket_options: Any = None
        ) -> httpcore.NetworkStream:
            bounded = _bounded(timeout, httpcore.ConnectTimeout)
            return Stream(self.inner.connect_unix_socket(path, bounded, socket_options))

        def sleep(self, seconds: float) -> None:
            self.inner.sleep(seconds)

    transport = httpx.HTTPTransport(limits=limits, trust_env=False)
    transport._pool._network_backend = Backend()  # httpcore's pool takes a network backend; httpx does not pass one
    return transport


def _bounded(timeout: float | None, error: type[Exception]) -> float | None:
    at = getattr(_deadline, "at", None)
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise error("the request's deadline (timeout_s) passed")
    return left if timeout is None else min(timeout, left)
