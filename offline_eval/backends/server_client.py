"""HTTP to an OpenAI-compatible server: JSON in and out, retries with backoff on connection errors and 5xx,
a 4xx answered once with the server's own message. Proxies from the environment are ignored: the client
talks to the configured server and nowhere else.

A request the server accepted but did not answer within timeout_s is not sent again: the server may still be
working on it, and a server that runs one request at a time (llama-cpp-python's) would queue the copy behind
the original, so every retry waits longer than the last."""

from __future__ import annotations

import time
from typing import Any

from ..errors import EngineError


class Refused(Exception):
    """A 4xx answer: the request itself is wrong for this server; retrying will not help."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status, self.message = status, message


class ServerGone(EngineError):
    """The server did not answer (connection errors, timeouts, 5xx) after every retry."""


class ServerClient:
    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        timeout_s: float,
        retries: int,
        backoff_s: float = 0.5,
        concurrency: int = 16,
    ) -> None:
        import httpx

        self.base_url = base_url.rstrip("/")
        # /tokenize, /version and /props sit beside /v1, at the server's root
        self.root = self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        self.http = httpx.Client(timeout=timeout_s, headers=headers, trust_env=False, limits=limits)
        self.retries, self.backoff_s, self.timeout_s = retries, backoff_s, timeout_s

    def post(self, path: str, body: dict[str, Any], root: bool = False) -> dict[str, Any]:
        return self._call("POST", path, body, root)

    def get(self, path: str, root: bool = False) -> dict[str, Any] | None:
        """GET, or None where the server has no such endpoint (a 4xx other than a refused key)."""
        try:
            return self._call("GET", path, None, root)
        except Refused as e:
            if e.status in (401, 403):
                raise EngineError(
                    f"the server at {self.base_url} refused the API key (HTTP {e.status}: {e.message}); "
                    f"check the variable api_key_env names"
                ) from None
            return None

    def _call(self, method: str, path: str, body: dict[str, Any] | None, root: bool) -> dict[str, Any]:
        import httpx

        url = (self.root if root else self.base_url) + path
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                resp = self.http.request(method, url, json=body)
            except httpx.ReadTimeout:
                raise ServerGone(
                    f"the server at {self.base_url} sent no answer to {method} {path} within timeout_s="
                    f"{self.timeout_s:g} (not re-sent: it may still be working on it); raise timeout_s, or lower "
                    f"max_concurrency if the server answers one request at a time"
                ) from None
            except httpx.HTTPError as e:  # connection refused or reset, timeouts, a half-closed reply
                last = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                continue
            if resp.status_code >= 500:
                last = f"HTTP {resp.status_code}: {_message(resp)}"
                continue
            if resp.status_code >= 400:
                raise Refused(resp.status_code, _message(resp))
            try:
                data = resp.json()
            except ValueError:
                last = "the answer was not JSON"
                continue
            if not isinstance(data, dict):
                last = "the answer was not a JSON object"
                continue
            return data
        raise ServerGone(
            f"the server at {self.base_url} did not answer {method} {path} after {self.retries + 1} tries: {last}"
        )

    def close(self) -> None:
        self.http.close()


def _message(resp: Any) -> str:
    try:
        data = resp.json()
    except ValueError:
        return resp.text[:300]
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data.get("message", data)))
        if isinstance(err, dict):
            err = err.get("message", err)
        return str(err)[:300]
    return str(data)[:300]
