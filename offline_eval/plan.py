"""`sweep --dry-run`: the model loads, requests per task, prompt/output token estimates and overflows,
computed with each model's own tokenizer and chat template, without starting an engine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .backends.base import LoadSpec
from .config import ModelSpec
from .requests import Request


@dataclass
class PhasePlan:
    run: str
    setting: str
    requests: int
    prompt_tokens: int  # of the requests that fit (for a focused one, its fallback's)
    max_output_tokens: int
    overflow_ids: list[str]
    focused_ids: list[str]


class PromptCounter:
    """Token ids of rendered prompts, from the tokenizer alone (a GGUF is opened vocab-only)."""

    def __init__(self, spec: LoadSpec) -> None:
        self.spec = spec
        if spec.backend == "llamacpp":
            from .backends.llamacpp_backend import LlamaCppBackend

            from .quiet import native_stderr_silenced

            vocab_only = LoadSpec(**{**spec.__dict__, "engine_args": {**spec.engine_args, "vocab_only": True}})
            with native_stderr_silenced():
                self._backend: Any = LlamaCppBackend(vocab_only)
            self.encode = self._backend.encode
        else:
            from transformers import AutoTokenizer

            from .backends.chat import choose_template, hf_own_template

            self.tok = AutoTokenizer.from_pretrained(spec.path, trust_remote_code=spec.trust_remote_code)
            self.template = choose_template(spec.chat_template, hf_own_template(self.tok))

    def encode(self, requests: Sequence[Request]) -> list[list[int]]:  # type: ignore[no-redef]
        from .backends.chat import hf_encode

        return hf_encode(self.tok, self.template, requests)

    def close(self) -> None:
        if self.spec.backend == "llamacpp":
            self._backend.close()


def prompt_format(spec: LoadSpec) -> str:
    """chat or plain, as the engine will prompt this model (read from its files, no engine started)."""
    from .backends.chat import model_prompt_format

    return model_prompt_format(spec.chat_template, spec.backend, spec.path)


def plan(loads: list[tuple[ModelSpec, str, int]], tasks: list[Any]) -> list[PhasePlan]:
    out: list[PhasePlan] = []
    # (backend, path, chat template, setting) -> prompt lengths
    lengths: dict[tuple[str, str, str | None, str], list[int]] = {}
    for m, variant, ctx in loads:
        spec = m.load_spec(variant, ctx)
        counter = None
        for t in tasks:
            for setting in t.task.settings():
                name = t.task.setting_name(setting)
                phase = t.task.build(t.task.setting_items(t.items, setting), setting)
                key = (spec.backend, spec.path, spec.chat_template, name)
                fb_key = (*key, "fallbacks")
                if key not in lengths:
                    counter = counter or PromptCounter(spec)
                    lengths[key] = [len(ids) for ids in counter.encode(phase.requests)]
                extra = [r.sampling.max_tokens if phase.method == "generate" else 1 for r in phase.requests]
                n = list(lengths[key])
                fits = [x + e <= ctx for x, e in zip(n, extra)]
                focused = [False] * len(n)
                if phase.overflow == "focus" and phase.fallbacks and not all(fits):
                    if fb_key not in lengths:
                        counter = counter or PromptCounter(spec)
                        fbs = [f for f in phase.fallbacks if f is not None]
                        it = iter(counter.encode(fbs))
                        lengths[fb_key] = [len(next(it)) if f is not None else 0 for f in phase.fallbacks]
                    for i, f in enumerate(phase.fallbacks):
                        if not fits[i] and f is not None and lengths[fb_key][i] + extra[i] <= ctx:
                            n[i], fits[i], focused[i] = lengths[fb_key][i], True, True
                out.append(PhasePlan(m.run_name(variant, ctx), name, len(phase.requests),
                                     sum(x for x, f in zip(n, fits) if f),
                                     sum(e for e, f in zip(extra, fits) if f),
                                     [i for i, f in zip(phase.item_ids, fits) if not f],
                                     [i for i, f in zip(phase.item_ids, focused) if f]))
        if counter is not None:
            counter.close()
    return out


def print_plan(loads: list[tuple[ModelSpec, str, int]], tasks: list[Any], source: str, index: dict[int, int],
               log: Callable[[str], None]) -> list[PhasePlan]:
    log(f"plan: {len(loads)} model load(s), {sum(len(t.task.settings()) for t in tasks)} task setting(s) each")
    ok = [(m, v, c) for m, v, c in loads if m.path_problem(v, source, index[id(m)]) is None]
    plans = plan(ok, tasks)
    for k, (m, v, c) in enumerate(loads, 1):
        run = m.run_name(v, c)
        problem = m.path_problem(v, source, index[id(m)])
        note = f"will fail: {problem}" if problem else f"prompt format: {prompt_format(m.load_spec(v, c))}"
        log(f"[{k}/{len(loads)}] load {run}  ({note})")
        for p in (p for p in plans if p.run == run):
            over = f"{len(p.overflow_ids)} overflow" + (f" ({', '.join(p.overflow_ids[:5])}"
                                                       f"{', ...' if len(p.overflow_ids) > 5 else ''})"
                                                       if p.overflow_ids else "")
            foc = f", {len(p.focused_ids)} focused" if p.focused_ids else ""
            log(f"    {p.setting}: {p.requests} requests, {p.prompt_tokens} prompt tokens, "
                f"<= {p.max_output_tokens} output tokens, {over}{foc}")
    for t in tasks:
        for ev in t.task.evaluator_models():
            v, c = ev.runs()[0]
            log(f"then {t.name}: evaluator {ev.run_name(v, c)} scores the outputs (loaded once; its prompts hold "
                f"the answers, so they are not counted here)")
    total_p = sum(p.prompt_tokens for p in plans)
    total_o = sum(p.max_output_tokens for p in plans)
    log(f"total: {sum(p.requests for p in plans)} requests, {total_p} prompt tokens, <= {total_o} output tokens")
    return plans
