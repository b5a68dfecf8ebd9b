"""What tasks ask of a backend, and what comes back. Tasks build these; backends consume them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from .constraints import Constraint

Method = Literal["generate", "choice_logprobs"]


@dataclass(frozen=True)
class Sampling:
    """How to draw tokens. The fields added after top_p enter the store key only when set, so that the keys
    of every request made before them stay what they were."""

    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = 16
    top_p: float = 1.0
    top_k: int = 0  # 0: off
    min_p: float = 0.0
    stop: tuple[str, ...] = ()  # generation ends before the first of these; the text excludes it

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "top_p": self.top_p,
        }
        if self.top_k:
            d["top_k"] = self.top_k
        if self.min_p:
            d["min_p"] = self.min_p
        if self.stop:
            d["stop"] = list(self.stop)
        return d


@dataclass(frozen=True)
class Carried:
    """Tokens the model generated in an earlier phase, inside this request's prefill (its `text`, at `at`): an
    engine with the same tokenizer puts these ids there instead of encoding the text again, so the later phase
    continues the model's own sequence token for token (and reuses its cached prefix)."""

    at: int
    text: str
    ids: tuple[int, ...]


@dataclass(frozen=True)
class Request:
    """Chat `messages` (list of {role, content}) or a raw `prompt`, plus sampling and an optional constraint.

    `shared_chars`: where the part that differs between this request and its neighbours begins, in characters of
    the last message's content (or of `prompt`); everything before it (a judge's rubric, the gold answer) is the
    same for every candidate. An engine that evaluates prompts in batches starts one there, so that the shared part
    is reused whole (llama.cpp). Part of the store key when set: on llama.cpp, where a batch starts changes the
    rounding, so the same prompt with another split may answer differently."""

    messages: tuple[tuple[str, str], ...] | None = None
    prompt: str | None = None
    sampling: Sampling = field(default_factory=Sampling)
    constraint: Constraint | None = None
    shared_chars: int | None = None
    # The start of the model's own turn, continued rather than answered (a thinking block, then the answer).
    prefill: str | None = None
    template_kwargs: tuple[tuple[str, Any], ...] = ()  # passed to the chat template (enable_thinking, ...)
    reserve: int = 0  # tokens a later phase will generate after this one: the fit rule counts them
    carry: bool = False  # the generated token ids come back with the result, for a later phase
    carried: Carried | None = None

    @staticmethod
    def chat(
        messages: list[dict[str, str]],
        sampling: Sampling | None = None,
        constraint: Constraint | None = None,
        shared_chars: int | None = None,
    ) -> Request:
        return Request(
            messages=tuple((m["role"], m["content"]) for m in messages),
            sampling=sampling or Sampling(),
            constraint=constraint,
            shared_chars=shared_chars,
        )

    def shared_head(self, then: str = "") -> Request | None:
        """This request cut at `shared_chars`, `then` after the cut: the part its neighbours share (None: no hint)."""
        n = self.shared_chars
        if n is None:
            return None
        if self.messages is None:
            return replace(self, prompt=(self.prompt or "")[:n] + then, shared_chars=None)
        *head, (role, content) = self.messages
        return replace(self, messages=(*head, (role, content[:n] + then)), shared_chars=None)

    def message_dicts(self) -> list[dict[str, str]]:
        return [{"role": r, "content": c} for r, c in (self.messages or ())]

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "messages": [list(m) for m in self.messages] if self.messages is not None else None,
            "prompt": self.prompt,
            "sampling": self.sampling.to_dict(),
            "constraint": self.constraint.to_dict() if self.constraint else None,
        }
        if self.shared_chars is not None:  # where llama.cpp starts a batch changes its rounding: part of the key
            d["shared_chars"] = self.shared_chars
        if self.prefill is not None:
            d["prefill"] = self.prefill
        if self.template_kwargs:
            d["template_kwargs"] = dict(self.template_kwargs)
        if self.reserve:
            d["reserve"] = self.reserve
        if self.carry:
            d["carry"] = True
        if self.carried is not None:
            d["carried"] = {"at": self.carried.at, "ids": list(self.carried.ids)}
        return d

    def template_options(self) -> dict[str, Any]:
        return dict(self.template_kwargs)

    def continued(self, text: str) -> str:
        """The rendered prompt with this request's prefill after it."""
        return text + (self.prefill or "")


def shared_chars(render: Callable[[str], str]) -> int:
    """Where the part that differs begins in a text that `render(differing part)` builds."""
    return render("\x00").index("\x00")


UNANSWERED = ("length", "overflow", "error", "violation", "malformed")


@dataclass
class Result:
    text: str = ""
    # stop | length (cut off) | overflow (never sent) | violation (the answer broke its constraint) | malformed
    # (an answer with a non-finite logprob: a parse failure) | error (an older version's record of a refusal:
    # never stored or served now)
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    logprobs: dict[str, float] | None = None  # choice -> log-probability, for choice_logprobs
    focused: bool = False  # the request overflowed and its shorter fallback (overflow policy 'focus') ran
    # A reasoning model's thinking (None: it did not think), its tokens, and whether the budget ended it.
    reasoning: str | None = None
    reasoning_tokens: int = 0
    reasoning_cut: bool = False
    # The generated token ids, where the request asked to carry them and they spell `text` exactly (None: not
    # asked, or the engine cannot give ids that decode to the text: a later phase encodes the text again).
    token_ids: tuple[int, ...] | None = None

    @property
    def answered(self) -> bool:
        """The text is a complete answer a task may parse: not cut off, refused, skipped or off-constraint."""
        return self.finish_reason not in UNANSWERED

    def to_dict(self) -> dict[str, Any]:
        d = {
            "text": self.text,
            "finish_reason": self.finish_reason,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "latency_s": self.latency_s,
            "logprobs": self.logprobs,
        }
        if self.focused:
            d["focused"] = True
        if self.reasoning is not None:
            d.update(reasoning=self.reasoning, reasoning_tokens=self.reasoning_tokens, reasoning_cut=self.reasoning_cut)
        if self.token_ids is not None:
            d["token_ids"] = list(self.token_ids)
        return d


def request_json(request: Request) -> str:
    """Canonical JSON of a request: hashed into the store key and kept beside the output for inspection."""
    return json.dumps(request.to_dict(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def request_key(
    fingerprint: str,
    request: Request | str,
    method: Method,
    choices: tuple[str, ...] | None = None,
    grammar: str | None = None,
) -> str:
    """sha256 over what the engine computes: the model fingerprint (weights, engine version, the load options that
    change outputs), the method, choices and the full request incl. sampling and constraint, and for a constrained
    request `grammar`, the digest of the text its library compiles (Backend.constraint_text). No run or variant
    name: renaming a variant, or giving it a list of budgets, finds every output it stored before."""
    rj = request if isinstance(request, str) else request_json(request)
    fields: list[object] = [fingerprint, method, list(choices) if choices else None]
    head = json.dumps(fields if grammar is None else [*fields, grammar], separators=(",", ":"))
    return hashlib.sha256(f"{head}\n{rj}".encode()).hexdigest()


def legacy_request_key(
    fingerprint: str, variant: str, request: Request | str, method: Method, choices: tuple[str, ...] | None = None
) -> str:
    """The key a store written before 2026-12-05 holds an output under: request_key's, with the variant's name in
    it. Looked up where request_key finds nothing, so older stores still serve every output they hold."""
    rj = request if isinstance(request, str) else request_json(request)
    head = json.dumps([fingerprint, variant, method, list(choices) if choices else None], separators=(",", ":"))
    return hashlib.sha256(f"{head}\n{rj}".encode()).hexdigest()


@dataclass
class Phase:
    """One batch of work a task hands the runner: requests of one kind, with the item each belongs to."""

    name: str
    requests: list[Request]
    item_ids: list[str]
    method: Method = "generate"
    choices: tuple[str, ...] | None = None
    overflow: Literal["skip", "fail", "focus"] = "skip"
    # Policy 'focus': for each request, a shorter one to run instead when it does not fit (None: skip it).
    fallbacks: list[Request | None] | None = None
