"""A scripted OpenAI-compatible server on 127.0.0.1 for the hostile probes: busy (429/503), refusing keys,
echoing the key, redirecting, trickling, oversized, malformed and non-finite replies, which no real server
produces on demand. Its successful replies are vLLM's own forms (the fields vLLM 0.32's OpenAI server writes
for /v1/models, /version, /tokenize and /v1/chat/completions, logprobs included); the real servers themselves
are tested in test_openai_server.py."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "hostile"


@dataclass
class Reply:
    status: int = 200
    body: bytes | Iterator[bytes] = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # before anything is sent
    header_trickle_s: float = 0.0  # the status line and headers one byte at a time, this far apart


@dataclass
class Seen:
    method: str
    path: str
    body: dict[str, Any] | None
    headers: dict[str, str]
    at: float


Behaviour = Callable[[Seen, int], Reply | None]  # (the request, how many came before it) -> a reply, or the default


def chat_reply(content: str = "1", logprobs: Any = None, usage: Any = None, finish: str = "stop") -> dict[str, Any]:
    """A chat completion as vLLM's server writes it."""
    return {
        "id": "chatcmpl-9d2c",
        "object": "chat.completion",
        "created": 1764547200,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "refusal": None,
                    "annotations": None,
                    "audio": None,
                    "function_call": None,
                    "tool_calls": [],
                    "reasoning_content": None,
                },
                "logprobs": logprobs,
                "finish_reason": finish,
                "stop_reason": None,
            }
        ],
        "service_tier": None,
        "system_fingerprint": None,
        "usage": usage
        if usage is not None
        else {"prompt_tokens": 40, "total_tokens": 41, "completion_tokens": 1, "prompt_tokens_details": None},
        "prompt_logprobs": None,
        "kv_transfer_params": None,
    }


def top_logprobs(values: dict[str, Any]) -> dict[str, Any]:
    """vLLM's chat logprobs for one generated token: the label tokens with the given log-probabilities."""
    tops = [{"token": t, "logprob": v, "bytes": list(t.encode())} for t, v in values.items()]
    first = tops[0]
    return {"content": [{**first, "top_logprobs": tops}]}


def as_json(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


class HostileServer:
    def __init__(self, behaviour: Behaviour | None = None, key: str | None = None) -> None:
        self.behaviour: Behaviour = behaviour or (lambda seen, n: None)
        self.key = key  # when set, every request must carry it as a bearer token
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                owner._handle(self, "GET")

            def do_POST(self) -> None:
                owner._handle(self, "POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def posts(self, path: str = "/v1/chat/completions") -> list[Seen]:
        return [s for s in self.seen if s.method == "POST" and s.path == path]

    def _default(self, seen: Seen) -> Reply:
        if self.key is not None and seen.headers.get("authorization") != f"Bearer {self.key}":
            return Reply(401, as_json({"error": {"message": "Invalid API key", "type": "invalid_request_error"}}))
        if seen.path == "/v1/models":
            entry = {"id": MODEL, "object": "model", "created": 1764547200, "owned_by": "vllm", "root": "/m/x"}
            return Reply(200, as_json({"object": "list", "data": [{**entry, "parent": None, "max_model_len": 4096}]}))
        if seen.path == "/version":
            return Reply(200, as_json({"version": "0.32.0"}))
        if seen.path == "/tokenize":
            return Reply(200, as_json({"count": 40, "max_model_len": 4096, "tokens": [1] * 40, "token_strs": None}))
        if seen.path == "/v1/chat/completions":
            body = seen.body or {}
            if body.get("logprobs"):
                return Reply(200, as_json(chat_reply("1", top_logprobs({"1": -0.2, "0": -1.7}))))
            return Reply(200, as_json(chat_reply("1")))
        return Reply(404, as_json({"detail": "Not Found"}))

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        length = int(h.headers.get("content-length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = h.path.split("?")[0]
        seen = Seen(method, path, body, {k.lower(): v for k, v in h.headers.items()}, time.monotonic())
        with self.lock:
            n = len(self.seen)
            self.seen.append(seen)
        reply = self.behaviour(seen, n) or self._default(seen)
        try:
            self._send(h, reply)
        except (BrokenPipeError, ConnectionResetError):
            pass

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, reply: Reply) -> None:
        if reply.delay_s:
            time.sleep(reply.delay_s)
        chunked = not isinstance(reply.body, bytes)
        head = f"HTTP/1.1 {reply.status} X\r\n"
        framing = {"transfer-encoding": "chunked"} if chunked else {"content-length": str(len(reply.body))}  # type: ignore[arg-type]
        headers = {"content-type": "application/json", **framing, **reply.headers}
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        if reply.header_trickle_s:
            for byte in head.encode("latin-1"):
                h.wfile.write(bytes([byte]))
                h.wfile.flush()
                time.sleep(reply.header_trickle_s)
        else:
            h.wfile.write(head.encode("latin-1"))
        if chunked:
            for part in reply.body:  # type: ignore[union-attr]
                h.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                h.wfile.flush()
            h.wfile.write(b"0\r\n\r\n")
        else:
            h.wfile.write(reply.body)  # type: ignore[arg-type]
        h.wfile.flush()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def trickle(data: bytes, every_s: float) -> Iterator[bytes]:
    for i in range(len(data)):
        time.sleep(every_s)
        yield data[i : i + 1]
