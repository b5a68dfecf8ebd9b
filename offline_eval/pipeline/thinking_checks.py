"""What the plan refuses of a reasoning model before any engine starts: delimiters its vocabulary lacks (they would
be written into the prompt as plain text) and a thinking budget that leaves no item room in the context, each
counted with the engine's own tokenizer-only counter."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from offline_eval.inference.backends.registry import get_engine, prompt_counter
from offline_eval.inference.fit import fits, place, tokens_needed
from offline_eval.inference.requests import Phase, Request
from offline_eval.models.decoding import PRESETS
from offline_eval.models.spec import ModelSpec, ReasoningSpec
from offline_eval.models.thinking import planned, settings_of
from offline_eval.runtime.errors import InputError, described

# The markup in a delimiter that is meant as one control token: <think>, </think>, <|end|>, [THINK]
_MARKUP = re.compile(r"<[^<>\s]+>|\[/?[A-Z_]+\]")


@dataclass(frozen=True)
class Vocabulary:
    """A model's tokenizer and chosen chat template, from its engine's tokenizer-only counter."""

    encode: Callable[[str], list[int]]  # text to ids, special tokens parsed, none added
    template: str  # the chat template the engine prompts with ("" for the plain format)
    vocab_bytes: Callable[[], Any] | None = None

    @classmethod
    def of(cls, counter: object) -> Vocabulary | None:
        """The counter's tokenizer: an engine's own (`encode_text`: llama.cpp's vocab-only GGUF) or an HF folder's
        (vLLM's and transformers' counter); None: a counter of lengths only (a server's)."""
        encode = getattr(counter, "encode_text", None)
        tok = getattr(counter, "tok", None)
        if encode is None and tok is not None:

            def encode(text: str) -> list[int]:
                return list(tok.encode(text, add_special_tokens=False))

        if encode is None:
            return None
        template = getattr(counter, "chat_template", None) or getattr(counter, "template", None) or ""
        return cls(encode, str(template), getattr(counter, "vocab_bytes", None))

    def knows(self, s: str) -> bool:
        """One token, or text the chat template itself writes (the model was trained on it as written)."""
        core = s.strip()
        return len(self.encode(s)) == 1 or bool(core) and (len(self.encode(core)) == 1 or core in self.template)

    def as_text(self, s: str) -> str | None:
        """The part of a delimiter the model would read as plain text (None: none): the whole string where it is
        neither one token nor in the template, unless it is built of markup that is (harmony's closing
        delimiter: <|end|><|start|>assistant<|channel|>final<|message|>, each <|...|> one token)."""
        if self.knows(s):
            return None
        pieces = _MARKUP.findall(s)
        bad = next((p for p in pieces if not self.knows(p)), None) if pieces else s
        if bad is not None and self.vocab_bytes is not None and all(len(b) <= 1 for b in self.vocab_bytes()):
            return None  # a vocabulary of bytes (the fake engine) has no control tokens: every delimiter is text
        return bad


def delimiter_problem(r: ReasoningSpec, vocab: Vocabulary) -> tuple[str, str, str] | None:
    """(key, delimiter, the part read as text) of the first delimiter the tokenizer would read as plain text."""
    for key in ("open", "close", "stop"):
        s = getattr(r, key)
        if s is not None and (bad := vocab.as_text(s)) is not None:
            return key, s, bad
    return None


def _chars(r: Request) -> int:
    text = sum(len(m[1]) for m in r.messages) if r.messages is not None else len(r.prompt or "")
    return text + len(r.prefill or "")


def least_needed(phase: Phase, count: Callable[[Request], int], ctx: int) -> tuple[int, int] | None:
    """None where some item of the (thinking) phase fits `ctx` (itself or, under 'focus', its fallback); else
    (tokens the shortest needs, its prompt tokens). The prompts are counted shortest text first, so a setting
    that fits is usually settled by its first."""
    least: tuple[int, int] | None = None
    fbs = phase.fallbacks or [None] * len(phase.requests)
    for i in sorted(range(len(phase.requests)), key=lambda i: _chars(phase.requests[i])):
        r, fb = phase.requests[i], fbs[i]
        n = count(r)
        placed = place(n, r, phase.method, ctx, phase.overflow, fb)
        if placed == "fits" or placed == "fallback" and fb is not None and fits(count(fb), fb, phase.method, ctx):
            return None
        need = tokens_needed(n, r, phase.method)
        least = min(least or (need, n), (need, n))
    return least


@dataclass(frozen=True)
class ThinkingRun:
    """A load the plan checks: a model's variant at one context length, and where the config declares it."""

    model: ModelSpec
    variant: str
    ctx: int
    field: str  # models.0, tasks.legalrikai.judges.0 (an evaluator: its prompts hold answers, only its delimiters)
    settings: tuple[tuple[str, Phase], ...] = ()  # (setting name, the task's phase) whose items must fit


def check_thinking(runs: list[ThinkingRun], source: str) -> list[str]:
    """Refuses (InputError, one line naming the model, the field and the string or the budget and the context) a
    reasoning run whose delimiters the model's tokenizer would read as plain text (neither one token nor text of
    its chat template) or whose budget leaves no item of a setting room in its context. Counts with the engine's
    tokenizer-only counter. Returns what it could not check: a served model (its tokenizer is its server's), a
    tokenizer that cannot be read here (an engine not installed, a damaged file: its run fails as before)."""
    notes: list[str] = []
    counters: dict[tuple[str, str, str], Any] = {}
    try:
        for run in runs:
            r = run.model.reasoning_of(run.variant)
            if r is None or not r.think:
                continue
            name = run.model.run_name(run.variant, run.ctx)
            if get_engine(run.model.backend).remote:
                notes.append(f"{name}: a served model thinks on its server, whose tokenizer is not read here: its "
                             "delimiters and thinking budget are not checked against it")  # fmt: skip
                continue
            try:
                refusal = _refusal(run, r, counters, source)
            except Exception as e:  # noqa: BLE001 - the run meets it again when it loads, and fails alone
                notes.append(f"{name}: its tokenizer could not be read here ({described(e, 200)}): its thinking "
                             "delimiters and budget are not checked")  # fmt: skip
                continue
            if isinstance(refusal, InputError):
                raise refusal
            if refusal:
                notes.append(f"{name}: {refusal}")
    finally:
        for c in counters.values():
            if c is not None:
                c.close()
    return notes


def _refusal(
    run: ThinkingRun, r: ReasoningSpec, counters: dict[tuple[str, str, str], Any], source: str
) -> InputError | str | None:
    """The error refusing one reasoning run, or why it cannot be checked, or None: it may run."""
    m = run.model
    spec = m.load_spec(run.variant, run.ctx)
    key = (spec.backend, spec.path, str(spec.chat_template))
    if key not in counters:
        counters[key] = None  # closed once, even if opening fails
        counters[key] = prompt_counter(spec)
    counter = counters[key]
    vocab = Vocabulary.of(counter) if counter is not None else None
    if vocab is None:
        return f"the {m.backend} engine reads no tokenizer before it loads: its delimiters and budget are not checked"
    if bad := delimiter_problem(r, vocab):
        return _delimiter_error(run, r, *bad, source)
    settings = settings_of(m, run.variant)
    for name, phase in run.settings:
        least = least_needed(planned(phase, settings), _lengths(counter), run.ctx)
        if least is not None:
            return _budget_error(run, r, name, *least, source)
    return None


def _lengths(counter: Any) -> Callable[[Request], int]:
    return lambda r: len(counter.encode([r])[0])


def _where(run: ThinkingRun, key: str) -> str:
    """The field a reasoning key is set in: the variant's own block where it sets it, else the model's."""
    base = re.sub(r"\.think\d+$", "", run.variant)  # a budget of a list: the variant's run, not a config key
    own = run.model.variants[run.variant].reasoning or {}
    if key in own and not (key == "budget" and base != run.variant):
        return f"{run.field}.variants.{base}.reasoning.{key}"
    return f"{run.field}.reasoning.{key}"


def _delimiter_error(run: ThinkingRun, r: ReasoningSpec, key: str, s: str, bad: str, source: str) -> InputError:
    m = run.model
    field, origin = _where(run, key), ""
    if key not in (m.variants[run.variant].reasoning or {}):
        if r.preset is not None and PRESETS[r.preset].get(key) == s:
            field, origin = _where(run, "preset"), f" (preset {r.preset})"
        elif m.reasoning is None or key not in m.reasoning.model_fields_set:
            origin = " (the default)"
    part = f" holds '{bad}', which" if bad != s else ""
    return InputError(
        f"model '{m.name}' ({m.variants[run.variant].file or m.path}): the thinking {key} delimiter '{s}'{origin}"
        f"{part} is neither one token of the model's vocabulary nor text of its chat template, so the model would "
        f"read it as plain text: give the model's own delimiters (open, close), or no `reasoning` block",
        file=source,
        field=field,
    )


def _budget_error(run: ThinkingRun, r: ReasoningSpec, setting: str, need: int, prompt: int, source: str) -> InputError:
    m, budget = run.model, r.budgets()[0]
    return InputError(
        f"model '{m.name}' ({m.run_name(run.variant, run.ctx)}): a thinking budget of {budget} tokens leaves no item "
        f"of {setting} room in max_model_len {run.ctx}: the shortest needs {need} tokens ({prompt} prompt, "
        f"{budget} thinking, {need - prompt - budget} answer and closing delimiter): give a smaller budget or a "
        "longer max_model_len",
        file=source,
        field=_where(run, "budget"),
    )
