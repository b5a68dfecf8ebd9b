"""A model's own settings applied to every task's requests: its sampling, and for a reasoning model, thinking
before the answer (budget forcing), on any engine.

Phase 1 thinks: the prompt, the opening delimiter, then free generation stopped at the closing delimiter or at
`budget` tokens. Phase 2 answers: the prompt, the opening delimiter, the thinking and the closing delimiter (forced
where the budget ended the thinking), then the task's own request: its constraint, its method, its answer length.
Both phases go through the runner, so both are stored, and a killed sweep resumes with what is missing; phase 2's
request holds the thinking, so its key is phase 1's output. Only the answer reaches the task: only it is parsed.

A served model (an engine that reaches a server) thinks on the server, whose reasoning parser returns the thinking
apart from the answer; where it does not, a thinking block at the start of the answer is split off the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from offline_eval.inference.backends.chat import gguf_metadata
from offline_eval.inference.backends.registry import get_engine
from offline_eval.inference.requests import Carried, Phase, Request, Result
from offline_eval.inference.runner import PhaseStats, Runner
from offline_eval.runtime.errors import InputError
from offline_eval.runtime.i18n import kept

from .spec import ModelSpec, ReasoningSpec, SamplingSpec

# Where models.yaml's thinking differs from a paper's reasoning preset (ReasoningPreset.departures), as stored.
BUDGET = kept("a thinking budget of {budget} (the paper's: the context // {share}, {paper})")
RUN_OUT = kept("run_out: {run_out} (the paper's: {paper}, a thinking that runs out scores 0)")


@dataclass(frozen=True)
class Thinking:
    """One run's thinking: one budget and the delimiters; `served`: the server thinks."""

    budget: int
    open: str
    close: str
    served: bool = False
    end: str | None = None  # where the thinking ends, where not at the closing delimiter
    force: bool = True  # a thinking the budget ends is closed and answered; False: it has no answer

    @property
    def stop(self) -> str:
        return self.end or self.close.strip() or self.close


@dataclass(frozen=True)
class ModelSettings:
    """What a model's config changes in every request of every task it runs."""

    sampling: SamplingSpec | None = None
    reasoning: ReasoningSpec | None = None
    seed: int = 0
    served: bool = False
    samples: int = 1  # answers drawn per item, seeds seed..seed+k-1 (sampled decoding only)

    @property
    def greedy(self) -> bool:
        return self.sampling is None or self.sampling.temperature == 0

    def on_task(self, task_samples: int | None) -> ModelSettings:
        """These settings on one task: the task's `samples` where it gives one; a greedy model answers once
        (k greedy answers would be one answer k times)."""
        return replace(self, samples=1 if self.greedy else task_samples or self.samples)

    @property
    def thinking(self) -> Thinking | None:
        r = self.reasoning
        if r is None or not r.think:
            return None
        return Thinking(r.budgets()[0], r.open, r.close, self.served, r.stop, r.run_out != "no-answer")

    def describe(self) -> dict[str, Any] | None:
        """What the summary records of how the model decoded (None: greedy, no thinking, as every task asks)."""
        if self.sampling is None and self.reasoning is None:
            return None
        return {
            "sampling": self.sampling.model_dump() if self.sampling else None,
            # the preset and stop only where given: settings written before they existed read the same
            "reasoning": self.reasoning.model_dump(exclude_none=True) if self.reasoning else None,
        }

    def request(self, r: Request) -> Request:
        """The task's request with the model's sampling and chat-template keywords."""
        s = self.sampling
        if s is not None:
            r = replace(
                r,
                sampling=replace(
                    r.sampling,
                    temperature=s.temperature,
                    top_p=s.top_p,
                    top_k=s.top_k,
                    min_p=s.min_p,
                    seed=s.seed if s.seed is not None else self.seed,
                ),
            )
        if self.reasoning is not None and self.reasoning.template_kwargs:
            r = replace(r, template_kwargs=tuple(sorted(self.reasoning.template_kwargs.items())))
        return r


def explicit_settings(m: ModelSpec, variant: str) -> frozenset[str]:
    """What models.yaml itself sets of a variant's decoding: `sampling`, and the reasoning keys it names (the model's
    and the variant's), as opposed to their defaults."""
    keys = {"sampling"} if m.sampling_of(variant) is not None else set()
    keys |= set(m.reasoning.model_fields_set) if m.reasoning else set()
    return frozenset(keys | set(m.variants[variant].reasoning or {}))


@dataclass(frozen=True)
class ReasoningPreset:
    """A paper's decoding of reasoning models, where models.yaml leaves it to the protocol: sampled at `temperature`
    and `top_k`, thinking up to the context length // `share`, and a thinking the budget ends left unanswered
    (`run_out`)."""

    temperature: float
    top_k: int
    share: int
    run_out: str
    source: str

    def budget(self, ctx: int) -> int:
        return ctx // self.share

    def apply(self, s: ModelSettings, explicit: frozenset[str], ctx: int) -> ModelSettings:
        """The settings a thinking model runs under this preset: what models.yaml sets stays (a departure)."""
        r = s.reasoning
        if r is None or not r.think:
            return s
        sampling = s.sampling
        if "sampling" not in explicit:
            sampling = SamplingSpec(temperature=self.temperature, top_k=self.top_k)
        update: dict[str, Any] = {}
        if "budget" not in explicit:
            update["budget"] = self.budget(ctx)
        if "run_out" not in explicit:
            update["run_out"] = self.run_out
        return replace(s, sampling=sampling, reasoning=r.model_copy(update=update))

    def departures(self, r: ReasoningSpec, explicit: frozenset[str], ctx: int) -> list[str]:
        """Where models.yaml's thinking settings are not the preset's, one phrase each."""
        out = []
        if "budget" in explicit and r.budgets() != [self.budget(ctx)]:
            out.append(BUDGET.format(budget=r.budget, share=self.share, paper=self.budget(ctx)))
        if "run_out" in explicit and (r.run_out or "force") != self.run_out:
            out.append(RUN_OUT.format(run_out=r.run_out, paper=self.run_out))
        return out


def settings_of(m: ModelSpec, variant: str, own_sampling: bool = False) -> ModelSettings:
    """`own_sampling`: a task's protocol decodes as the weights' files say where the model declares no sampling of
    its own (as `sampling: model`; a served model's server decides)."""
    sampling = m.sampling_of(variant)
    path = m.variants[variant].file or m.path
    if sampling == "model" or (own_sampling and sampling is None and path and not get_engine(m.backend).remote):
        sampling = recommended(path)
    return ModelSettings(sampling, m.reasoning_of(variant), m.seed, get_engine(m.backend).remote, m.samples or 1)


_GGUF_SAMPLING = {"temperature": "general.sampling.temp", "top_p": "general.sampling.top_p",
                  "top_k": "general.sampling.top_k", "min_p": "general.sampling.min_p"}  # fmt: skip


HF_SAMPLING_DEFAULTS = {"temperature": 1.0, "top_k": 50}


def recommended(path: str) -> SamplingSpec:
    """`sampling: model`: the settings the model's makers recommend, from an HF folder's generation_config.json
    (greedy where do_sample is false; transformers' defaults for what it leaves out) or a GGUF's general.sampling.* keys; greedy where the files say nothing."""
    if not path:
        raise InputError("sampling: model reads the model's own files; a served model has none here", field="sampling")
    p = Path(path)
    if p.is_dir():
        f = p / "generation_config.json"
        try:
            cfg = json.loads(f.read_text(encoding="utf-8")) if f.is_file() else {}
        except (OSError, ValueError) as e:
            raise InputError(f"{f}: unreadable ({e})", field="sampling") from None
        if not cfg.get("do_sample"):
            return SamplingSpec()
        found = {k: cfg[k] for k in ("temperature", "top_p", "top_k", "min_p") if cfg.get(k) is not None}
        # What generate() samples with where the file names no value: transformers' GenerationConfig defaults
        # (an explicit null turns the warper off there, and here).
        found |= {k: v for k, v in HF_SAMPLING_DEFAULTS.items() if k not in cfg}
    else:
        meta = gguf_metadata(path, set(_GGUF_SAMPLING.values()))
        found = {k: meta[key] for k, key in _GGUF_SAMPLING.items() if key in meta}
    try:
        return SamplingSpec.model_validate(found)
    except ValueError as e:
        raise InputError(
            f"{path}: the model's recommended sampling {found} is not usable ({e})", field="sampling"
        ) from None


def solve(runner: Runner, phase: Phase, settings: ModelSettings) -> tuple[list[Result], PhaseStats]:
    """The phase's results under the model's settings: one phase, or think-then-answer for a reasoning model."""
    if settings.sampling is None and settings.reasoning is None:
        return runner.run(phase)  # every request exactly as the task made it: the keys of before
    phase = _mapped(phase, settings.request)
    if settings.samples > 1:
        phase = repeated(phase, settings.samples)
    t = settings.thinking
    if t is None:
        results, stats = runner.run(phase)
        if settings.reasoning is not None:  # a no-thinking template may still write an (empty) block
            results = [split_block(r, settings.reasoning.open, settings.reasoning.close) for r in results]
        return results, count_thinking(stats, results)
    if t.served:
        results, stats = runner.run(_mapped(phase, lambda r: _served(r, t)))
        results = [split_block(r, t.open, t.close) for r in results]
        return results, count_thinking(stats, results)
    return _two_phases(runner, phase, t)


def planned(phase: Phase, settings: ModelSettings) -> Phase:
    """The phase whose requests must fit the context first: the thinking phase of a reasoning model (its prompt,
    budget and answer), else the phase as it runs. The runner and `sweep --dry-run` check the same."""
    if settings.sampling is None and settings.reasoning is None:
        return phase
    phase = _mapped(phase, settings.request)
    t = settings.thinking
    if t is None:
        return phase
    if t.served:
        return _mapped(phase, lambda r: _served(r, t))
    return _thinking_phase(phase, t)


def repeated(phase: Phase, k: int) -> Phase:
    """The phase k times over, sample i's requests seeded seed + i: its results are sample-major (k x items)."""

    def seeded(r: Request, i: int) -> Request:
        return replace(r, sampling=replace(r.sampling, seed=r.sampling.seed + i))

    fallbacks = phase.fallbacks
    return replace(
        phase,
        requests=[seeded(r, i) for i in range(k) for r in phase.requests],
        item_ids=[x for _ in range(k) for x in phase.item_ids],
        fallbacks=[seeded(r, i) if r else None for i in range(k) for r in fallbacks] if fallbacks else None,
    )


def _thinking_phase(phase: Phase, t: Thinking) -> Phase:
    answer_tokens = max((r.sampling.max_tokens for r in phase.requests), default=0) if phase.method == "generate" else 1
    think = _mapped(phase, lambda r: _think(r, t, answer_tokens))
    return replace(think, name=f"{phase.name} (thinking)", method="generate", choices=None)


def _two_phases(runner: Runner, phase: Phase, t: Thinking) -> tuple[list[Result], PhaseStats]:
    if runner.cached_sequences != 1 or len(phase.requests) < 2:
        return _think_then_answer(runner, phase, t)
    # A cache of one sequence (llama.cpp) holds the last prompt only: each item answers right after it thought.
    quiet, bar = runner.quiet(), runner.bar(len(phase.requests), phase.name)
    results: list[Result] = []
    parts: list[PhaseStats] = []
    try:
        for i in range(len(phase.requests)):
            got, stats = _think_then_answer(quiet, _one(phase, i), t)
            results += got
            parts.append(stats)
            bar.update(1)
    finally:
        bar.close()
    return results, count_thinking(summed(parts), results)


def _one(phase: Phase, i: int) -> Phase:
    return replace(
        phase,
        requests=[phase.requests[i]],
        item_ids=[phase.item_ids[i]],
        fallbacks=[phase.fallbacks[i]] if phase.fallbacks else None,
    )


def _think_then_answer(runner: Runner, phase: Phase, t: Thinking) -> tuple[list[Result], PhaseStats]:
    thoughts, s1 = runner.run(_thinking_phase(phase, t))
    answers: list[Request] = []
    for i, (r, th) in enumerate(zip(phase.requests, thoughts)):
        fb = phase.fallbacks[i] if th.focused and phase.fallbacks else None
        base = fb if fb is not None else r
        head = (base.prefill or "") + t.open
        ids = th.token_ids
        answers.append(
            replace(
                base,
                prefill=head + th.text + t.close,
                # the thinking as the model's own tokens, where the engine gave ids that spell it
                carried=Carried(len(head), th.text, ids) if ids is not None else None,
            )
        )
    # An item whose thinking did not fit has no answer phase, nor one whose budget ended it where that means no
    # answer (run_out: no-answer); one whose answer no longer fits overflows.
    todo = [
        i
        for i, th in enumerate(thoughts)
        if th.finish_reason != "overflow" and (t.force or th.finish_reason != "length")
    ]
    answer = Phase(
        name=phase.name,
        requests=[answers[i] for i in todo],
        item_ids=[phase.item_ids[i] for i in todo],
        method=phase.method,
        choices=phase.choices,
        overflow="fail" if phase.overflow == "fail" else "skip",
    )
    said, s2 = runner.run(answer) if todo else ([], PhaseStats())
    got = dict(zip(todo, said))
    results = []
    for i, th in enumerate(thoughts):
        if i not in got and th.finish_reason == "length":  # the budget ended it: no answer, scored as none
            results.append(
                replace(
                    th,
                    text="",
                    token_ids=None,
                    reasoning=th.text,
                    reasoning_tokens=th.output_tokens,
                    reasoning_cut=True,
                    output_tokens=0,
                )
            )
            continue
        if i not in got:
            results.append(replace(th, token_ids=None))
            continue
        a = got[i]
        results.append(
            replace(
                a,
                reasoning=th.text,
                reasoning_tokens=th.output_tokens,
                reasoning_cut=th.finish_reason == "length",
                latency_s=round(th.latency_s + a.latency_s, 6),
                focused=th.focused,
            )
        )
    stats = merged(s1, s2, len(phase.requests))
    stats.answer_submitted, stats.answer_computed = s2.prompt_submitted, s2.prompt_computed
    return results, count_thinking(stats, results)


def _think(r: Request, t: Thinking, answer_tokens: int) -> Request:
    return replace(
        r,
        prefill=(r.prefill or "") + t.open,
        constraint=None,
        sampling=replace(r.sampling, max_tokens=t.budget, stop=(t.stop,)),
        reserve=answer_tokens + len(t.close),  # the answer, and the closing delimiter (no longer than its bytes)
        carry=True,
    )


def _served(r: Request, t: Thinking) -> Request:
    """A served model thinks and answers in one request: its length covers both."""
    return replace(r, sampling=replace(r.sampling, max_tokens=r.sampling.max_tokens + t.budget))


def _mapped(phase: Phase, fn: Callable[[Request], Request]) -> Phase:
    return replace(
        phase,
        requests=[fn(r) for r in phase.requests],
        fallbacks=[fn(r) if r is not None else None for r in phase.fallbacks] if phase.fallbacks else None,
    )


def split_block(r: Result, open_: str, close: str) -> Result:
    """A result whose text starts with a thinking block (a server without a reasoning parser, a template that
    writes an empty one), as thinking and answer. A block that never closed is all thinking, cut, with no answer:
    it is never parsed as an answer."""
    if r.reasoning is not None:  # a server's reasoning parser split it: cut where the length ran out inside it
        return replace(r, reasoning_cut=True) if r.finish_reason == "length" and not r.text.strip() else r
    text = r.text.lstrip()
    if not text.startswith(open_.strip()):
        return r
    body = text[len(open_.strip()) :]
    end = body.find(close.strip())
    if end < 0:
        return replace(r, text="", reasoning=body, reasoning_cut=True, finish_reason="length")
    return replace(r, text=body[end + len(close.strip()) :].lstrip(), reasoning=body[:end])


def count_thinking(stats: PhaseStats, results: list[Result]) -> PhaseStats:
    thought = [r for r in results if r.reasoning is not None]
    stats.n_thought = len(thought)
    stats.thinking_tokens = sum(r.reasoning_tokens for r in thought)
    stats.n_thinking_cut = sum(1 for r in thought if r.reasoning_cut)
    return stats


def summed(parts: list[PhaseStats]) -> PhaseStats:
    """Many items' settings-long stats as one (each part: one item, both its phases)."""

    def add(xs: list[int | None]) -> int | None:
        return None if all(x is None for x in xs) else sum(x or 0 for x in xs)

    out = PhaseStats()
    for f in ("n_requests", "n_cached", "n_generated", "n_overflow", "n_violations", "prompt_tokens", "output_tokens",
              "engine_calls"):  # fmt: skip
        setattr(out, f, sum(getattr(p, f) for p in parts))
    out.wall_s, out.load_s = sum(p.wall_s for p in parts), sum(p.load_s for p in parts)
    for f in ("prompt_submitted", "prompt_computed", "answer_submitted", "answer_computed"):
        setattr(out, f, add([getattr(p, f) for p in parts]))
    return out


def merged(a: PhaseStats, b: PhaseStats, n_items: int) -> PhaseStats:
    """Two phases' work as one setting's: requests and tokens of both, the items counted once."""

    def add(x: int | None, y: int | None) -> int | None:
        return None if x is None and y is None else (x or 0) + (y or 0)

    return PhaseStats(
        n_requests=n_items,
        n_cached=a.n_cached + b.n_cached,
        n_generated=a.n_generated + b.n_generated,
        n_overflow=a.n_overflow + b.n_overflow,
        n_violations=b.n_violations,
        wall_s=a.wall_s + b.wall_s,
        load_s=a.load_s + b.load_s,
        prompt_tokens=a.prompt_tokens + b.prompt_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        engine_calls=a.engine_calls + b.engine_calls,
        prompt_submitted=add(a.prompt_submitted, b.prompt_submitted),
        prompt_computed=add(a.prompt_computed, b.prompt_computed),
    )
