"""The second stage: each evaluator (an LLM judge) is loaded once, after every candidate, and runs over every
candidate output of this sweep for every task that lists it; the tasks then score their records with what it
said."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from offline_eval.inference.requests import Phase, Result
from offline_eval.models.spec import ModelSpec
from offline_eval.models.thinking import settings_of, solve
from offline_eval.results.records import EvaluatorRef, ItemRecord, Records, RunEntry, Throughput
from offline_eval.results.summary import Failure, LoadProvenance
from offline_eval.runtime.errors import OfflineEvalError
from offline_eval.runtime.memory import PeakMemory
from offline_eval.tasks.kit.evaluation import Evaluation

from .execute import Stage, failure, new_load_provenance, phase_timings, rate
from .plan import PlannedTask


@dataclass
class _Staged:
    """One task's evaluation: the runs it scores, their records, the evaluators' phase, and what each said."""

    task: PlannedTask
    stage: Evaluation[Any, ItemRecord]
    entries: list[RunEntry]
    records: Records[ItemRecord]
    phase: Phase
    results: dict[str, Sequence[Result]] = field(default_factory=dict)  # evaluator run -> its results
    timing: dict[str, Any] = field(default_factory=dict)


def run_evaluations(
    stage: Stage,
    tasks: list[PlannedTask],
    records: Records[ItemRecord],
    runs: list[RunEntry],
    failures: list[Failure],
) -> list[LoadProvenance]:
    """Updates `records` and the entries in `runs` in place; returns each evaluator load's provenance."""
    staged: list[_Staged] = []
    judges: dict[str, tuple[ModelSpec, list[_Staged]]] = {}
    for t in tasks:
        ev_stage = t.task.evaluation()
        entries = [r for r in runs if r.task == t.name and r.key in records]
        if ev_stage is None or not entries:
            continue
        mine = {r.key: records[r.key] for r in entries}
        staged.append(_Staged(t, ev_stage, entries, mine, ev_stage.phase(t.items, mine)))
        for ev in ev_stage.models():
            variant, ctx = ev.runs()[0]
            key = ev.run_name(variant, ctx) + "\0" + ev.model_dump_json()
            judges.setdefault(key, (ev, []))[1].append(staged[-1])
    loaded = [_evaluate(stage, ev, users, failures) for ev, users in judges.values()]
    for x in staged:
        with stage.timings.stage("scoring", setting=x.phase.name):
            evaluated = x.stage.finish(x.records, x.phase, x.results)
            for entry in x.entries:
                if entry.key not in evaluated:
                    continue
                records[entry.key] = evaluated[entry.key]
                entry.metrics = x.task.task.run_metrics(evaluated[entry.key], entry.options)
                entry.evaluator = EvaluatorRef(run=next(iter(x.results), None), runs=list(x.results))
                # Wall-clock lives under "throughput" and "timings" only: the rest of summary.json is reproducible.
                own = {r: Throughput.model_validate(t) for r, t in x.timing.items()}
                entry.throughput.evaluator = next(iter(own.values())) if len(own) == 1 else own
    return loaded


def _evaluate(stage: Stage, ev: ModelSpec, users: list[_Staged], failures: list[Failure]) -> LoadProvenance:
    variant, ctx = ev.runs()[0]
    run, log, timings = ev.run_name(variant, ctx), stage.log, stage.timings
    n = sum(len(x.phase.requests) for x in users)
    log(f"[evaluator] {run}: {n} outputs of {len({e.run for x in users for e in x.entries})} run(s)")
    mark = stage.mark()
    with timings.stage("prepare", run=run):
        spec = ev.load_spec(variant, ctx)
        engine = stage.engine(ev, spec, run, stage.store)
        prov = new_load_provenance(spec, run, "evaluator", stage.store)
        runner = stage.runner(engine, stage.store, f"evaluator:{variant}", stage.progress)
        settings = settings_of(ev, variant)
        prov.decoding = settings.describe()  # as a candidate's: None is greedy
        if settings.samples > 1:  # one judgement per output: its samples are the candidates' answers
            log(f"[evaluator] {run}: samples: {settings.samples} is for candidates; a judge answers each output once")
            settings = replace(settings, samples=1)
    try:
        for x in users:
            with PeakMemory() as mem:
                res, stats = solve(runner, x.phase, settings)  # a reasoning judge thinks, then answers
            phase_timings(timings, "evaluator_load", "evaluation", run, x.phase.name, stats)
            log(f"[{run}] {x.phase.name}: {rate(stats)}")
            x.results[run] = res
            x.timing[run] = {**stats.throughput(), "peak_rss_mb": round(mem.peak / 2**20, 1)}
    except OfflineEvalError as e:
        failures.append(failure(ev, variant, ctx, f"evaluator: {e}"))
        log(f"[{run}] FAILED: {e}")
        stage.engine_said(mark)
        for x in users:
            x.results.pop(run, None)
            x.timing.pop(run, None)
    finally:
        prov.engine_start = engine.engine_start()
        with timings.stage("close", run=run):
            engine.close()
    return prov
