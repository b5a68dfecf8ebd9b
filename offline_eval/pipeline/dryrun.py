"""`sweep --dry-run`: the model loads, requests per task, prompt/output token estimates and overflows,
computed with each model's own tokenizer and chat template, without starting an engine."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from offline_eval.inference.backends.pool import shared_base
from offline_eval.inference.backends.registry import prompt_counter
from offline_eval.inference.backends.spec import LoadSpec, PromptCounter
from offline_eval.inference.backends.templates import model_prompt_format
from offline_eval.inference.fit import fits, place, tokens_needed
from offline_eval.inference.requests import Request
from offline_eval.modelfiles.quantization import folder_quantization
from offline_eval.models.thinking import planned, settings_of

from .departures import model_departures
from .plan import Load, Plan, PlannedTask


@dataclass
class PhasePlan:
    run: str
    setting: str
    requests: int
    prompt_tokens: int | None  # of the requests that fit (for a focused one, its fallback's); None: not countable
    max_output_tokens: int
    overflow_ids: list[str]
    focused_ids: list[str]


def prompt_format(spec: LoadSpec) -> str:
    """chat or plain, as the engine will prompt this model (read from its files, no engine started)."""

    return model_prompt_format(spec.chat_template, spec.backend, spec.path)


def phase_plans(loads: list[Load], tasks: list[PlannedTask]) -> list[PhasePlan]:
    out: list[PhasePlan] = []
    # (backend, path, chat template, setting) -> prompt lengths (None: the engine cannot count them locally)
    lengths: dict[tuple[str, ...], list[int] | None] = {}
    for ld in loads:
        spec, ctx = ld.spec(), ld.ctx
        count = _LazyCounter(spec)
        settings = settings_of(ld.model, ld.variant)  # once per load: `sampling: model` reads the weights' files
        for t in tasks:
            own = settings_of(ld.model, ld.variant, True) if t.task.model_sampling else settings
            k = own.on_task(t.task.samples).samples  # each item answered k times: k times the work
            for s in t.settings:
                name, phase = s.name, planned(s.phase, own)
                key = (spec.backend, spec.path or _served(spec), str(spec.chat_template), name, repr(own))
                if key not in lengths:
                    lengths[key] = count(phase.requests)
                counted = lengths[key]
                limit = ctx or count.context()  # 0: the length a server reports
                extra = [tokens_needed(0, r, phase.method) for r in phase.requests]
                if counted is None:
                    out.append(PhasePlan(ld.run, name, k * len(phase.requests), None, k * sum(extra), [], []))
                    continue
                n = list(counted)
                fbs = phase.fallbacks or [None] * len(n)
                placed = [
                    place(x, r, phase.method, limit, phase.overflow, f) for x, r, f in zip(n, phase.requests, fbs)
                ]
                ok = [p == "fits" for p in placed]
                focused = [False] * len(n)
                if "fallback" in placed:
                    fb_key = (*key, "fallbacks")
                    if fb_key not in lengths:
                        it = iter(count([f for f in fbs if f is not None]) or [])
                        lengths[fb_key] = [next(it) if f is not None else 0 for f in fbs]
                    fb_lengths = lengths[fb_key] or []
                    for i, f in enumerate(fbs):
                        if placed[i] == "fallback" and f is not None and fits(fb_lengths[i], f, phase.method, limit):
                            n[i], ok[i], focused[i] = fb_lengths[i], True, True
                out.append(
                    PhasePlan(
                        ld.run,
                        name,
                        k * len(phase.requests),
                        k * sum(x for x, f in zip(n, ok) if f),
                        k * sum(e for e, f in zip(extra, ok) if f),
                        [i for i, f in zip(phase.item_ids, ok) if not f],
                        [i for i, f in zip(phase.item_ids, focused) if f],
                    )
                )
        count.close()
    return out


def planned_tokens(ld: Load, tasks: list[PlannedTask], sample: int = 256) -> int | None:
    """The prompt tokens a load is planned to submit, every setting and sample, stored outputs included (None: the
    engine cannot count them locally). A setting of more than `sample` prompts is estimated from `sample` of them,
    evenly spaced: it only decides how an engine starts (the full-size JBE-QA at 0 and 4 shots: 1,345,960 estimated,
    1,342,284 counted)."""
    spec = ld.spec()
    count = _LazyCounter(spec)
    settings = settings_of(ld.model, ld.variant)
    total = 0.0
    try:
        for t in tasks:
            own = settings_of(ld.model, ld.variant, True) if t.task.model_sampling else settings
            k = own.on_task(t.task.samples).samples
            for s in t.settings:
                requests = planned(s.phase, own).requests
                some = requests[:: max(1, -(-len(requests) // sample))]
                counted = count(some) if some else []
                if counted is None:
                    return None
                total += k * sum(counted) * len(requests) / max(len(some), 1)
    finally:
        count.close()
    return round(total)


def _first_id(ids: Sequence[str]) -> str:
    return terminal_text(ids[0]) if ids else "(none: the setting has no items)"


def terminal_text(text: str) -> str:
    """Data as text on a terminal: control and format characters (escapes, bidirectional overrides) written as
    \\uXXXX, line breaks kept."""
    return "".join(c if c == "\n" or not unicodedata.category(c).startswith("C") else f"\\u{ord(c):04x}" for c in text)


def example_messages(requests: Sequence[Request]) -> list[str]:
    """The exact messages of a request (its prompt where it has no messages), each line of each one indented;
    few-shot turns between the system message and the last one are counted, not shown."""
    if not requests:
        return []
    r = requests[0]
    messages = list(r.messages) if r.messages is not None else [("prompt", r.prompt or "")]
    shown = [messages[0], messages[-1]] if len(messages) > 2 else messages
    out: list[str] = []
    for i, (role, content) in enumerate(shown):
        if i == 1 and len(messages) > 2:
            out.append(f"({len(messages) - 2} exemplar turns between)")
        lines = terminal_text(content).split("\n")
        out += [f"[{role}] {lines[0]}", *(f"    {x}" for x in lines[1:])]
    return out


def _served(spec: LoadSpec) -> str:
    """A served model has no path: its server, model and local tokenizer say which counts are its own."""
    o = spec.engine_options
    return f"{o.get('base_url')} {o.get('model')} {o.get('tokenizer')}"


class _LazyCounter:
    """Prompt lengths from the engine's counter, opened on first use (a load whose counts are all known
    from an earlier load of the same files opens nothing)."""

    def __init__(self, spec: LoadSpec) -> None:
        self.spec, self.opened = spec, False
        self.counter: PromptCounter | None = None

    def __call__(self, requests: Sequence[Request]) -> list[int] | None:
        if not self.opened:
            self.counter, self.opened = prompt_counter(self.spec), True
        return None if self.counter is None else [len(ids) for ids in self.counter.encode(requests)]

    def context(self) -> int:
        """The context length the counter's engine reports (a server's), 0 if none."""
        if not self.opened:
            self.counter, self.opened = prompt_counter(self.spec), True
        return int(getattr(self.counter, "max_model_len", 0) or 0)

    def close(self) -> None:
        if self.counter is not None:
            self.counter.close()


def print_plan(sweep_plan: Plan, source: str, log: Callable[[str], None]) -> list[PhasePlan]:
    loads, tasks = sweep_plan.loads, sweep_plan.tasks
    log(f"plan: {len(loads)} model load(s), {sum(len(t.settings) for t in tasks)} task setting(s) each")
    plans = phase_plans([ld for ld in loads if ld.problem(source) is None], tasks)
    for note in sweep_plan.notes:
        log(f"not checked: {note}")
    held: tuple[LoadSpec, str] | None = None  # the adapter load kept for the next adapter over its base
    for k, ld in enumerate(loads, 1):
        problem = ld.problem(source)
        note = f"will fail: {problem}" if problem else f"prompt format: {prompt_format(ld.spec())}"
        if not problem and (q := folder_quantization(ld.spec().path)):
            note += f", weights: {q.label}"
        base = None if problem else shared_base(ld.spec())
        if base is not None and held is not None and held[0] == base:
            note += f", adapter {ld.spec().adapter} on the engine {held[1]} started (no new load)"
        elif base is not None:
            held = (base, ld.run)
        if base is None and not problem:
            held = None
        log(f"[{k}/{len(loads)}] load {ld.run}  ({note})")
        for p in (p for p in plans if p.run == ld.run):
            over = f"{len(p.overflow_ids)} overflow" + (
                f" ({', '.join(p.overflow_ids[:5])}{', ...' if len(p.overflow_ids) > 5 else ''})"
                if p.overflow_ids
                else ""
            )
            foc = f", {len(p.focused_ids)} focused" if p.focused_ids else ""
            counted = (
                "prompt tokens not countable locally" if p.prompt_tokens is None else f"{p.prompt_tokens} prompt tokens"
            )
            log(
                f"    {p.setting}: {p.requests} requests, {counted}, "
                f"<= {p.max_output_tokens} output tokens, {over}{foc}"
            )
    for t in tasks:
        for s in t.settings:
            departing = "; ".join(t.task.departures(s.options))
            protocol = f"{t.task.protocol} protocol" + (f", departing: {departing}" if departing else "")
            log(f"{s.name} ({protocol}): what the model gets for item {_first_id(s.phase.item_ids)}")
            for ld in loads:
                for line in model_departures(t.task, ld.model, ld.variant, ld.ctx):
                    log(f"    departing: {line}")
            for line in example_messages(s.phase.requests[:1]):
                log(f"    {line}")
    for t in tasks:
        stage = t.task.evaluation()
        for ev in stage.models() if stage else []:
            v, c = ev.runs()[0]
            log(
                f"then {t.name}: evaluator {ev.run_name(v, c)} scores the outputs (loaded once; its prompts hold "
                f"the answers, so they are not counted here)"
            )
    total_p = sum(p.prompt_tokens or 0 for p in plans)
    total_o = sum(p.max_output_tokens for p in plans)
    log(f"total: {sum(p.requests for p in plans)} requests, {total_p} prompt tokens, <= {total_o} output tokens")
    return plans
