"""A model served by an OpenAI-compatible server (vLLM's, llama.cpp's, llama-cpp-python's): offline-eval is
the client. Chat requests go to /v1/chat/completions, raw prompts to /v1/completions, up to max_concurrency
at a time. Constraints are sent the way each server takes them (vLLM: `structured_outputs`; llama.cpp: a GBNF
`grammar`), and the runner checks every constrained answer again, because servers ignore what they cannot
parse. The store key holds the URL, the served model id and what the server reports about it, plus a
declared weights_sha256: a URL alone cannot prove which weights answered.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

from offline_eval.inference.backends.base import Backend, Progress
from offline_eval.inference.backends.declare import Declared
from offline_eval.inference.backends.openai.client import BadReply, KeyRefused, Refused, ServerClient, ServerGone
from offline_eval.inference.backends.openai.reply import Reply, top_alternatives
from offline_eval.inference.backends.spec import LoadSpec, PromptCounter
from offline_eval.inference.constraints import Choice, Constraint, JsonSchema
from offline_eval.inference.requests import Request, Result
from offline_eval.modelfiles.fingerprint import HashCache
from offline_eval.runtime.errors import EngineError, InputError, PartialFailure, is_url, missing


class OpenAIOptions(BaseModel):
    """The models.yaml keys of `backend: openai`."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(description="e.g. http://10.0.0.5:8000/v1")
    model: str = Field(description="the served model name")
    api_key_env: str | None = Field(None, description="the environment variable that holds the API key")
    max_concurrency: StrictInt | None = Field(
        None,
        ge=1,
        description="requests in flight; default: 16 for vLLM, llama.cpp's slots (/props total_slots), "
        "1 for llama-cpp-python's server (it answers one at a time)",
    )
    timeout_s: float = Field(600.0, gt=0)
    retries: StrictInt = Field(3, ge=0)
    tokenizer: str | None = Field(None, description="a local HF folder or GGUF file to count prompt tokens with")
    server: Literal["auto", "vllm", "llamacpp"] = "auto"
    weights_sha256: str | None = Field(
        None, pattern=r"^[0-9a-f]{64}$", description="the sha256 of the served weights, as you know them"
    )
    top_logprobs: StrictInt = Field(20, ge=1, description="logprob mode: how many alternatives to ask for")

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        from urllib.parse import urlsplit

        u = urlsplit(v)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("expected http://host:port/v1 (or https://)")
        if u.username or u.password:
            raise ValueError("no credentials in the URL; name an environment variable in api_key_env")
        return v.rstrip("/")

    @field_validator("tokenizer")
    @classmethod
    def _local(cls, v: str | None) -> str | None:
        if v is not None and is_url(v):
            raise ValueError("URLs are refused, give a local path")
        return v

    def connects_to(self) -> list[str]:
        return [self.base_url]


ENGINE = Declared(
    name="openai",
    backend_class="OpenAIBackend",
    requires="httpx",
    extra="server",
    weights="remote",
    options=OpenAIOptions,
    path_options=("tokenizer",),
    libraries=("httpx",),
)


def _options(spec: LoadSpec) -> OpenAIOptions:
    return OpenAIOptions.model_validate(spec.engine_options)


def _client(o: OpenAIOptions) -> ServerClient:
    key = None
    if o.api_key_env:
        key = os.environ.get(o.api_key_env)
        if not key:
            raise InputError(f"the environment variable {o.api_key_env} is not set", field="api_key_env")
    return ServerClient(
        o.base_url,
        key,
        o.timeout_s,
        o.retries,
        concurrency=o.max_concurrency or _VLLM_CONCURRENCY,
        api_key_env=o.api_key_env,
    )


def _models_entry(client: ServerClient, model: str) -> dict[str, Any]:
    listed = client.get("/models") or {}
    for m in listed.get("data") or []:
        if isinstance(m, dict) and m.get("id") == model:
            return m
    names = ", ".join(str(m.get("id")) for m in listed.get("data") or [] if isinstance(m, dict))
    raise EngineError(f"the server at {client.base_url} does not serve model '{model}' (it serves: {names or 'none'})")


# Requests in flight when max_concurrency is not set, for a server that batches them (vLLM's).
_VLLM_CONCURRENCY = 16

# Fields of /v1/models that describe the model, not this server process (ids and timestamps change per start).
_STABLE = ("id", "root", "parent", "max_model_len", "owned_by")


class OpenAIBackend(Backend):
    name = "openai"

    @classmethod
    def weights_identity(cls, spec: LoadSpec, cache: HashCache | None = None) -> dict[str, Any]:
        o = _options(spec)
        client = _client(o)
        try:
            entry = _models_entry(client, o.model)
            props = client.get("/props", root=True) or {}
            version = client.get("/version", root=True) or {}
        finally:
            client.close()
        reported = {k: entry.get(k) for k in _STABLE if k in entry}
        settings = props.get("default_generation_settings") or {}
        return {
            "server": {
                "base_url": o.base_url,
                "model": o.model,
                "reported": reported,
                "props": {k: props.get(k) for k in ("model_path", "chat_template") if k in props}
                | ({"n_ctx": settings.get("n_ctx")} if "n_ctx" in settings else {}),
                "version": version.get("version"),
                "weights_sha256": o.weights_sha256,
            }
        }

    @classmethod
    def prompt_counter(cls, spec: LoadSpec) -> PromptCounter | None:
        backend = cls(spec)
        if backend.prompt_lengths([]) is None:
            backend.close()
            return None
        return _Counter(backend)

    def __init__(self, spec: LoadSpec) -> None:
        super().__init__(spec)
        if spec.chat_template is not None:
            raise InputError(
                "a served model is prompted with the server's own chat template; set it on the server, not here",
                field="chat_template",
            )
        self.o = _options(spec)
        self.client = _client(self.o)
        entry = _models_entry(self.client, self.o.model)
        self.kind = self.o.server if self.o.server != "auto" else self._detect()
        # llama.cpp's llama-server has /props; vLLM's and llama-cpp-python's servers have not
        props = (self.client.get("/props", root=True) or {}) if self.kind == "llamacpp" else {}
        self.concurrency = self.o.max_concurrency or _default_concurrency(self.kind, props)
        reported = entry.get("max_model_len")
        if not spec.max_model_len and not reported:
            reported = (props.get("default_generation_settings") or {}).get("n_ctx")
        self.max_model_len = spec.max_model_len or int(reported or 0)
        if not self.max_model_len:
            raise InputError(
                f"the server at {self.o.base_url} does not report its context length; set max_model_len",
                field="max_model_len",
            )
        self._local = self._local_counter()

    def _detect(self) -> Literal["vllm", "llamacpp"]:
        version = self.client.get("/version", root=True)
        return "vllm" if version and "version" in version else "llamacpp"

    def _local_counter(self) -> PromptCounter | None:
        if not self.o.tokenizer:
            return None
        from dataclasses import replace

        path = self.o.tokenizer
        if why := missing(path):
            raise InputError(f"path {why}: {path}", field="tokenizer")
        backend = "llamacpp" if path.endswith(".gguf") else "transformers"
        local = replace(self.spec, backend=backend, path=path, chat_template=None, engine_options={})
        counter = self.counter_of(local)
        if counter is None:
            raise InputError(f"cannot count tokens with {path}", field="tokenizer")
        return counter

    # ---- prompt lengths
    def prompt_lengths(self, requests: Sequence[Request]) -> list[int] | None:
        if self._local is not None:
            return [len(ids) for ids in self._local.encode(requests)]
        if self.kind == "llamacpp" and any(r.messages is not None for r in requests):
            return None  # llama.cpp's /tokenize takes text only: chat needs the local `tokenizer`
        if not requests:
            return [] if self.kind == "vllm" else None
        return self._map(self._count, requests, None)

    def _count(self, r: Request) -> int:
        if self.kind == "vllm":
            body: dict[str, Any] = {"model": self.o.model}
            if r.messages is not None:
                body.update(messages=r.message_dicts(), add_generation_prompt=True)
            else:
                body["prompt"] = r.prompt or ""
            return int(self.client.post("/tokenize", body, root=True)["count"])
        try:
            got = self.client.post("/tokenize", {"content": r.prompt or ""}, root=True)  # llama.cpp's server
        except Refused:
            got = self.client.post("/extras/tokenize", {"model": self.o.model, "input": r.prompt or ""}, root=True)
        return len(got["tokens"])

    # ---- generation
    def generate(
        self, requests: Sequence[Request], encoded: Sequence[list[int]] | None = None, progress: Progress = None
    ) -> list[Result]:
        return self._map(self._generate_one, requests, progress)

    def _body(self, r: Request, max_tokens: int) -> tuple[str, dict[str, Any]]:
        s = r.sampling
        body: dict[str, Any] = {
            "model": self.o.model,
            "max_tokens": max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
        }
        if s.temperature > 0:
            body["seed"] = s.seed
        body.update({k: v for k, v in (("top_k", s.top_k), ("min_p", s.min_p)) if v})
        if s.stop:
            body["stop"] = list(s.stop)
        if r.messages is not None:
            chat = {**body, "messages": r.message_dicts()}
            if r.template_kwargs:  # vLLM's and llama.cpp's servers pass these to the chat template
                chat["chat_template_kwargs"] = r.template_options()
            if r.prefill is not None:  # the model's turn, continued (both servers take a last assistant message)
                chat["messages"].append({"role": "assistant", "content": r.prefill})
                if self.kind == "vllm":
                    chat.update(continue_final_message=True, add_generation_prompt=False)
            return "/chat/completions", chat
        return "/completions", {**body, "prompt": r.continued(r.prompt or "")}

    def constraint_fields(self, c: Constraint | None) -> dict[str, Any]:
        """The request body's fields that carry a constraint, the way this server takes them."""
        if c is None:
            return {}
        if self.kind == "vllm":
            if isinstance(c, Choice):
                return {"structured_outputs": {"choice": list(c.choices)}}
            if isinstance(c, JsonSchema):
                # Sending our hardened grammar instead (structured_outputs.grammar) stalled the vLLM 0.32 CPU
                # server in our test; what `json` lets through that strict JSON refuses, the re-check catches.
                return {"structured_outputs": {"json": c.schema}}
            return {"structured_outputs": {"regex": c.pattern}}
        from offline_eval.inference.constrained.grammars import choice_grammar, gbnf

        if isinstance(c, Choice):
            return {"grammar": choice_grammar(c)}
        try:
            return {"grammar": gbnf(c)}  # our hardened GBNF (strict JSON strings, bounded lengths)
        except ImportError:
            if isinstance(c, JsonSchema):
                return {"json_schema": c.schema}
            raise EngineError(
                "a regex constraint on a llama.cpp server needs llama-cpp-python installed here "
                "(to write its GBNF): pip install 'offline-eval[llamacpp]'"
            ) from None

    def _generate_one(self, r: Request) -> Result:
        """One answer, or an exception: a refusal or a reply that is not an answer is never a Result, so the
        runner stores nothing for it and a re-run asks again."""
        path, body = self._body(r, r.sampling.max_tokens)
        body.update(self.constraint_fields(r.constraint))
        t0 = time.perf_counter()
        resp = self.client.post(path, body)
        reply = Reply(resp, self.o.base_url, path)
        ch = reply.choice()
        text, reasoning = reply.answer(ch)
        finish = ch.get("finish_reason")
        if finish is not None and not isinstance(finish, str):
            raise reply.bad("choices[0].finish_reason is not a string", finish)
        return Result(
            text=text or "",
            finish_reason=finish or "stop",
            prompt_tokens=reply.tokens("prompt_tokens"),
            output_tokens=reply.tokens("completion_tokens"),
            latency_s=round(time.perf_counter() - t0, 6),
            reasoning=reasoning,
            reasoning_tokens=reply.reasoning_tokens() if reasoning is not None else 0,
        )

    # ---- logprob mode
    def choice_logprobs(
        self,
        requests: Sequence[Request],
        choices: Sequence[str],
        encoded: Sequence[list[int]] | None = None,
        progress: Progress = None,
    ) -> list[Result]:
        return self._map(lambda r: self._logprobs_one(r, tuple(choices)), requests, progress)

    def _logprobs_one(self, r: Request, choices: tuple[str, ...]) -> Result:
        path, body = self._body(r, 1)
        k = self.o.top_logprobs
        if r.messages is not None:
            body.update(logprobs=True, top_logprobs=k)
        else:
            body["logprobs"] = k
        if self.kind == "vllm":
            # vLLM returns the logprobs after the choice mask: every label's tokens are then among the top
            # alternatives, and their ratios are those of the unconstrained model.
            body.update(self.constraint_fields(Choice(list(choices))))
        t0 = time.perf_counter()
        try:
            resp = self.client.post(path, body)
        except Refused as e:  # a refused key is KeyRefused, raised before this: this one is about logprobs
            raise EngineError(
                f"the {self.kind} server at {self.o.base_url} refused logprobs ({e.message}); "
                f"use mode 'constrained' instead"
            ) from None
        reply = Reply(resp, self.o.base_url, path)
        alternatives = top_alternatives(reply.choice())
        if not alternatives:
            raise EngineError(
                f"the {self.kind} server at {self.o.base_url} returned no top logprobs; use mode 'constrained' instead"
            )
        scores = {}
        for c in choices:
            same = [lp for tok, lp in alternatives if tok == c]
            if same and not all(math.isfinite(x) for x in same):
                scores[c] = math.nan  # the runner makes this a parse failure
                continue
            if not same:
                raise EngineError(
                    f"the {self.kind} server at {self.o.base_url} did not return '{c}' among its top "
                    f"{k} logprobs; use mode 'constrained' instead (or raise top_logprobs)"
                )
            m = max(same)
            scores[c] = m + math.log(sum(math.exp(x - m) for x in same))
        return Result(
            text=max(choices, key=lambda c: scores[c]),
            prompt_tokens=reply.tokens("prompt_tokens"),
            latency_s=round(time.perf_counter() - t0, 6),
            logprobs=scores,
        )

    # ---- concurrency
    def _map(self, fn: Callable[[Request], Any], requests: Sequence[Request], progress: Progress) -> list[Any]:
        """fn over the requests, max_concurrency at a time. A request the server refuses, or answers with
        something that is not an answer, fails alone: the others go on, and the answers in are handed to the
        runner (PartialFailure), which stores them before the run fails; the failed ones are asked again by a
        re-run. If the server goes away or refuses the key, the rest are cancelled."""
        out: dict[int, Any] = {}
        refused: list[Exception] = []
        with ThreadPoolExecutor(self.concurrency) as pool:
            futures: dict[Future[Any], int] = {pool.submit(fn, r): i for i, r in enumerate(requests)}
            pending = set(futures)
            while pending:
                finished, pending = wait(pending, return_when=FIRST_EXCEPTION)
                failed = None
                for f in finished:
                    e = f.exception()
                    if e is None:
                        out[futures[f]] = f.result()
                        if progress:
                            progress(1)
                    elif isinstance(e, Refused | BadReply):
                        refused.append(e)
                    elif failed is None:
                        failed = e
                if failed is not None:
                    for f in pending:
                        f.cancel()
                    rest, _ = wait(pending)
                    out.update({futures[f]: f.result() for f in rest if not f.cancelled() and f.exception() is None})
                    if isinstance(failed, KeyRefused):
                        raise failed
                    if isinstance(failed, ServerGone | EngineError):
                        raise PartialFailure(f"{failed} ({len(out)} of {len(requests)} answers kept)", out)
                    raise failed
        if refused:
            first = refused[0]
            why = f"refused it ({first})" if isinstance(first, Refused) else f"sent no answer: {first}"
            raise PartialFailure(
                f"{len(refused)} of {len(requests)} requests got no answer: the server at {self.o.base_url} {why}; "
                f"nothing was stored for them, and a re-run asks again ({len(out)} answers kept)",
                out,
            )
        return [out[i] for i in range(len(requests))]

    def close(self) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            client.close()
        local = getattr(self, "_local", None)
        if local is not None:
            local.close()


def _default_concurrency(kind: str, props: dict[str, Any]) -> int:
    """vLLM batches what is in flight; llama.cpp's llama-server runs as many requests as it has slots; the
    server of llama-cpp-python (no /props) holds one lock over its model and answers one request at a time,
    so more in flight only makes each wait in its queue, against its timeout."""
    if kind == "vllm":
        return _VLLM_CONCURRENCY
    slots = props.get("total_slots")
    return slots if isinstance(slots, int) and slots > 0 else 1


class _Counter:
    """The dry-run planner's counter: prompt lengths from the server (or the local tokenizer)."""

    def __init__(self, backend: OpenAIBackend) -> None:
        self.backend = backend
        self.max_model_len = backend.max_model_len

    def encode(self, requests: Sequence[Request]) -> list[list[int]]:
        lengths = self.backend.prompt_lengths(requests) or []
        return [[0] * n for n in lengths]

    def close(self) -> None:
        self.backend.close()
