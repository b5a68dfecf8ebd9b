"""A deterministic in-process engine for fast tests of offline-eval's own logic (never of an engine).

`path` is any existing file or folder (its bytes still key the store). `engine_args` script it:

    answers:  {substring: answer}   the first substring found in the rendered prompt picks the answer; a list
                                    of answers is sampled: the request's seed picks one (seed mod length)
                                    at temperature > 0, the first at temperature 0
    default:  "1"                   otherwise

An answer is the model's whole turn, thinking included ("<think>…</think>1"). A request with a prefill (the turn
begun) is answered by the rest of the turn where the turn starts with it, else by what follows the turn's last
"</think>" (the answer, after thinking the fake did not script).
    logprobs: {"0": -1.2, "1": -0.4}  choice_logprobs' scores (default: uniform)

Prompts are rendered in the plain format (or the chat template given) and tokenized one token per UTF-8
byte, so token counts are exact and predictable. A constrained answer always satisfies its constraint: a
scripted answer that does not is replaced by the first choice, or by the smallest instance of the schema.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from offline_eval.inference.backends.base import Progress, TokenizingBackend, carried_ids, check_engine_args
from offline_eval.inference.backends.chat import choose_template, render_request
from offline_eval.inference.backends.declare import Declared
from offline_eval.inference.backends.spec import LoadSpec, PromptCount, PromptCounter
from offline_eval.inference.constraints import Choice, Constraint, JsonSchema, Regex
from offline_eval.inference.requests import Request, Result

ENGINE = Declared(
    name="fake",
    backend_class="FakeBackend",
    requires="json",
    extra="test",
    weights="any",
    constraint_backends=("xgrammar",),
)

_ARGS = {"answers", "default", "logprobs"}


class FakeBackend(TokenizingBackend):
    name = "fake"
    cached_sequences = 1  # as llama.cpp's

    @classmethod
    def prompt_counter(cls, spec: LoadSpec) -> PromptCounter:
        return cls(spec)

    @classmethod
    def constraint_text(cls, c: Constraint, library: str | None) -> str | None:
        return None  # its answers follow from the request alone: nothing is compiled

    def __init__(self, spec: LoadSpec) -> None:
        super().__init__(spec)
        check_engine_args(spec, _ARGS, {})
        args = spec.engine_args
        self.answers: dict[str, str | list[str]] = dict(args.get("answers") or {})
        self.default: str = str(args.get("default", "1"))
        self.logprobs: dict[str, float] = dict(args.get("logprobs") or {})
        self.template = choose_template(spec.chat_template, None)
        self.calls: list[int] = []  # batch sizes, so tests can check batching
        self.prompt_count = self._count = PromptCount()
        self._previous = b""  # a one-sequence cache as llama.cpp keeps: the prefix shared with it is not computed

    def render(self, request: Request) -> str:
        return render_request(request, self.template or None)

    def encode_text(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def encode(self, requests: Sequence[Request]) -> list[list[int]]:
        out = []
        for r in requests:
            full = self.render(r)
            got = carried_ids(full, r, self.encode_text, self.encode_text)
            out.append(got if got is not None else self.encode_text(full))
        return out

    def vocab_bytes(self) -> list[bytes]:
        return [bytes([i]) for i in range(256)]

    def _answer(self, prompt: str, r: Request) -> str:
        a = next((a for key, a in self.answers.items() if key in prompt), self.default)
        if isinstance(a, list):
            return str(a[r.sampling.seed % len(a)] if r.sampling.temperature > 0 else a[0])
        return a

    def generate(
        self, requests: Sequence[Request], encoded: Sequence[list[int]] | None = None, progress: Progress = None
    ) -> list[Result]:
        self.calls.append(len(requests))
        out = []
        for r in requests:
            prompt = self.render(r)
            self._cache(prompt.encode("utf-8"))
            text = _constrained(_continued(self._answer(prompt, r), r.prefill), r)
            text, finish, n = _ended(text, r.sampling.max_tokens, r.sampling.stop)
            out.append(
                Result(
                    text=text,
                    finish_reason=finish,
                    prompt_tokens=len(prompt.encode("utf-8")),
                    output_tokens=n,
                    token_ids=tuple(text.encode("utf-8")) if r.carry else None,
                )
            )
            if progress:
                progress(1)
        return out

    def choice_logprobs(
        self,
        requests: Sequence[Request],
        choices: Sequence[str],
        encoded: Sequence[list[int]] | None = None,
        progress: Progress = None,
    ) -> list[Result]:
        self.calls.append(len(requests))
        scores = {c: float(self.logprobs.get(c, -math.log(len(choices)))) for c in choices}
        out = []
        for r in requests:
            self._cache(self.render(r).encode("utf-8"))
            out.append(
                Result(
                    text=max(choices, key=lambda c: scores[c]),
                    prompt_tokens=len(self.render(r).encode("utf-8")),
                    logprobs=dict(scores),
                )
            )
            if progress:
                progress(1)
        return out

    def _cache(self, prompt: bytes) -> None:
        shared = next(
            (i for i, (a, b) in enumerate(zip(self._previous, prompt)) if a != b), min(len(self._previous), len(prompt))
        )
        self._count.add(len(prompt), len(prompt) - min(shared, max(len(prompt) - 1, 0)))
        self._previous = prompt


def _continued(turn: str, prefill: str | None) -> str:
    if not prefill:
        return turn
    if turn.startswith(prefill):
        return turn[len(prefill) :]
    return turn.rsplit("</think>", 1)[-1]


def _ended(text: str, max_tokens: int, stop: Sequence[str]) -> tuple[str, str, int]:
    """(text, finish_reason, tokens) of generation that ends at the first stop string or at max_tokens bytes; the
    stop string's bytes are counted, not returned."""
    at = [(i, s) for s in stop if s and (i := text.find(s)) >= 0]
    if at:
        i, s = min(at)
        n = len(text[:i].encode("utf-8")) + len(s.encode("utf-8"))
        if n <= max_tokens:
            return text[:i], "stop", n
    ids = text.encode("utf-8")
    if len(ids) > max_tokens:
        return ids[:max_tokens].decode("utf-8", errors="ignore"), "length", max_tokens
    return text, "stop", len(ids)


def _constrained(text: str, r: Request) -> str:
    c = r.constraint
    if isinstance(c, Choice):
        return text if text in c.choices else c.choices[0]
    if isinstance(c, Regex):
        return text if re.fullmatch(c.pattern, text) else ""
    if isinstance(c, JsonSchema):
        import json

        import jsonschema

        try:
            jsonschema.validate(json.loads(text), c.schema)
            return text
        except (ValueError, jsonschema.ValidationError):
            return json.dumps(_instance(c.schema), ensure_ascii=False, separators=(",", ":"))
    return text


def _instance(schema: dict[str, Any]) -> Any:
    """The smallest value valid under the simple schemas our tasks use (objects, strings, bounded ints, enums)."""
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {k: _instance(props[k]) for k in schema.get("required", props)}
    if kind == "array":
        return [_instance(schema.get("items", {})) for _ in range(schema.get("minItems", 0))]
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    return "x" * int(schema.get("minLength", 0))
