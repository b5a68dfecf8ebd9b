"""A sweep: every model x variant x task setting, through one runner and store, into the output layout.

OUT/store.sqlite                      every engine output, keyed by (model, variant, request)
OUT/results/<run>/<setting>.jsonl     one record per item
OUT/summary.json                      {"runs": [...]} with metrics and throughput per run
OUT/report.md, OUT/report.html
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import provenance
from .backends.base import Backend, LazyBackend
from .backends.chat import model_chat_template, model_prompt_format
from .backends.spec import LoadSpec
from .config import SweepConfig, data_path_problems
from .consistency import ConsistencyRow
from .datafiles import reading
from .enginelog import EngineLog, terminal
from .errors import InputError, OfflineEvalError
from .executors import Executor, make_executor
from .lock import OutputLock
from .memory import PeakMemory, weights_bytes
from .metrics.ranking import has_score, rank_runs
from .modelspec import ModelSpec
from .requests import Phase, Result
from .results import ItemRecord, Records, ResultsFolder, RunEntry, RunKey
from .runner import PhaseStats, Runner
from .store import Store
from .summary import (
    SCHEMA_VERSION,
    Failure,
    LeaderboardRow,
    LoadProvenance,
    Provenance,
    SettingProvenance,
    Summary,
    SweepProvenance,
)
from .tasks import load_items, make_task
from .tasks.base import Item, Task
from .timings import Timings
from .verdicts import build as build_verdicts

if TYPE_CHECKING:
    from .report.inputs import ItemInputs

Log = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(msg, file=terminal(), flush=True)


@dataclass
class PlannedTask:
    name: str
    task: Task
    items: list[Item]
    data_files: list[str] = field(default_factory=list)  # every data file or folder the task read


def plan_tasks(cfg: SweepConfig, only_tasks: list[str] | None, limit: int | None, source: str) -> list[PlannedTask]:
    """Build and load every task before any engine starts, so bad data fails in seconds, not after a model."""
    out = []
    for name, opts in cfg.tasks.items():
        if only_tasks and name not in only_tasks:
            continue
        opts = dict(opts)
        if limit is not None:
            opts["limit"] = limit
        task = make_task(name, opts, source)
        with reading() as files:
            items = load_items(task, source)
        out.append(PlannedTask(name, task, items, files))
    if only_tasks:
        unknown = set(only_tasks) - {p.name for p in out}
        if unknown:
            raise InputError(f"--tasks names tasks not in the config: {', '.join(sorted(unknown))}")
    return out


def run_sweep(
    cfg: SweepConfig,
    *,
    source: str,
    out_dir: str | None = None,
    only: list[str] | None = None,
    only_tasks: list[str] | None = None,
    limit: int | None = None,
    fresh: bool = False,
    dry_run: bool = False,
    progress: bool | None = None,
    log: Log = _stderr,
    ray: str | None = None,
    timings: Timings | None = None,
    engine_log: bool = False,
    command: Sequence[str] | None = None,
) -> Summary:
    """`engine_log`: the engines' own output (library warnings, native logs, their child processes) goes to
    OUT/engines.log instead of the terminal, and a failed load shows its last lines. `command`: what started the
    sweep, for its provenance (default: this process's command line)."""
    timings = timings or Timings()
    config_file = source if Path(source).is_file() else None
    facts = provenance.sweep(
        list(command) if command is not None else sys.argv,
        config_file,
        provenance.config_digest(config_file, cfg.model_dump(mode="json")),
    )
    out = Path(out_dir or cfg.output_dir)
    models = [m for m in cfg.models if not only or m.name in only]
    if only and len(models) != len(set(only)):
        missing = set(only) - {m.name for m in models}
        raise InputError(f"--only names models not in the config: {', '.join(sorted(missing))}")
    with timings.stage("data"):
        data_problems = data_path_problems(cfg, source)
        if data_problems:
            raise InputError(data_problems[0])
        tasks = plan_tasks(cfg, only_tasks, limit, source)
        settings = [x for t in tasks for x in setting_provenance(t)]
    index = {id(m): i for i, m in enumerate(cfg.models)}
    loads = [(m, v, c) for m in models for v, c in m.runs()]
    guard_connections(cfg, tasks)
    if dry_run:
        from .plan import print_plan

        print_plan(loads, tasks, source, index, log)
        return Summary(schema_version=SCHEMA_VERSION)

    field = "--out" if out_dir else "output_dir"
    keys = [
        RunKey(m.run_name(v, c), t.task.setting_name(s)) for m, v, c in loads for t in tasks for s in t.task.settings()
    ]
    if problem := ResultsFolder(out).blocked(keys):
        raise InputError(f"{problem} (nothing has run yet)", field=field)
    out.mkdir(parents=True, exist_ok=True)
    with OutputLock(out), EngineLog(ResultsFolder(out).engine_log) if engine_log else nullcontext() as noise:
        executor = make_executor(cfg.runner, ray, log, progress)
        try:
            return _sweep_locked(
                cfg, out, loads, tasks, index, source, fresh, progress, log, executor, timings, noise, facts, settings
            )
        finally:
            executor.close()


@dataclass
class _Unit:
    """What one engine load produced: its records and run entries, or why it failed."""

    run: str
    records: Records[ItemRecord] = field(default_factory=dict)
    runs: list[RunEntry] = field(default_factory=list)
    failure: Failure | None = None
    abort: InputError | None = None  # bad data, or an overflow under policy 'fail': stops the sweep
    load: LoadProvenance | None = None


def _sweep_locked(
    cfg: SweepConfig,
    out: Path,
    loads: list[tuple[ModelSpec, str, int]],
    tasks: list[PlannedTask],
    index: dict[int, int],
    source: str,
    fresh: bool,
    progress: bool | None,
    log: Log,
    executor: Executor,
    timings: Timings,
    noise: EngineLog | None,
    facts: SweepProvenance,
    settings: list[SettingProvenance],
) -> Summary:
    """generate -> evaluate -> compare -> write: records stay in memory between the stages; the store is the
    crash-safe layer, and each output file is written once, at the end."""
    folder = ResultsFolder(out)
    store = Store(folder.store, move_aside_if_corrupt=fresh, log=log)
    earlier = _load_summary(folder, log)
    runs = list(earlier.runs)
    records: Records[ItemRecord] = {}
    attempted = {m.run_name(v, c) for m, v, c in loads}
    # A run not attempted this time keeps its earlier failure; an attempted one gets its state from this sweep.
    failures = [f for f in earlier.failures if f.run not in attempted]
    load_facts: list[LoadProvenance] = []
    unit_progress = False if executor.parallel else progress  # parallel units: the executor's status lines

    def attempt(k: int, m: ModelSpec, variant: str, ctx: int) -> _Unit:
        unit = _Unit(m.run_name(variant, ctx))
        log(f"[{k}/{len(loads)}] {unit.run}")
        mark = noise.offset() if noise else 0
        problem = m.path_problem(variant, source, index[id(m)])
        # SQLite allows one connection per thread: a unit running beside others opens its own.
        unit_store = Store(folder.store) if executor.parallel else store
        try:
            if problem:
                raise OfflineEvalError(problem)
            unit.load = _run_model(
                m,
                variant,
                ctx,
                tasks,
                unit_store,
                unit.records,
                unit.runs,
                cfg.runner.chunk_size,
                fresh,
                unit_progress,
                log,
                executor.loader(m, unit.run, log),
                timings,
            )
        except InputError as e:
            if e.record is not None:
                unit.abort = e  # bad data or an overflow under policy 'fail': the user must fix it first
            else:
                unit.failure = _failure(m, variant, ctx, str(e))
        except OfflineEvalError as e:
            unit.failure = _failure(m, variant, ctx, str(e))
        except MemoryError:
            unit.failure = _failure(m, variant, ctx, "out of memory")
        except Exception as e:  # noqa: BLE001 - a damaged model file can break any reader; fail this run only
            if os.environ.get("OFFLINE_EVAL_DEBUG"):
                raise
            first = str(e).splitlines()[0] if str(e) else ""
            unit.failure = _failure(m, variant, ctx, f"{type(e).__name__}: {first}")
        finally:
            if unit_store is not store:
                unit_store.close()
        if unit.failure:
            log(f"[{unit.run}] FAILED: {unit.failure.reason}")
            _engine_said(noise, mark, log)
        return unit

    try:
        units = [(k, m, v, c) for k, (m, v, c) in enumerate(loads, 1)]
        for unit in executor.run_units(units, lambda u: attempt(*u), lambda u: u.failure is not None):
            if unit.abort is not None:
                raise unit.abort
            if unit.failure:
                failures.append(unit.failure)
                # One current state per run: a failed run leaves the leaderboard, whatever an earlier
                # sweep stored for it (its outputs stay in the store, so a fixed re-run costs nothing).
                runs = [r for r in runs if r.run != unit.run]
                continue
            records.update(unit.records)
            if unit.load is not None:
                load_facts.append(unit.load)
            for entry in unit.runs:
                _put_run(runs, entry)
        load_facts += _run_evaluations(
            tasks, records, store, runs, cfg.runner.chunk_size, fresh, progress, log, failures, executor, timings, noise
        )
    finally:
        store.close()
    with timings.stage("records"):
        for key, recs in records.items():
            folder.write_records(key, recs)
    with timings.stage("summary"):
        everything = _with_earlier_runs(folder, runs, records, {t.name: t.task for t in tasks})
        known = {t.name: t.task for t in tasks}
        provenance.finish(facts)
        summary = Summary(
            schema_version=SCHEMA_VERSION,
            provenance=_provenance(facts, load_facts, settings, earlier, runs),
            runs=runs,
            failures=failures,
            task_reports=task_reports(runs, everything, tasks),
            ablations=build_ablations(everything, runs, known),
            noninferiority=build_verdicts(cfg.models, cfg.margin, everything, runs, known),
            consistency=build_consistency(cfg, everything, runs, tasks),
            leaderboards=leaderboards(runs),
        )
    try:
        with timings.stage("report"):
            from .report import write_report

            # What summary.json holds, without reading it back, and the prompts and diffs only the items hold.
            write_report(out, summary, browser_inputs(tasks, everything))
    finally:  # summary.json last, so its timings include the report's; written even if the report fails
        summary.timings = timings.to_dict()  # wall-clock: not reproducible, like each run's "throughput"
        summary.write(folder.summary)
    log(f"timings: {_timings_line(summary.timings)}")
    return summary


def _provenance(
    facts: SweepProvenance,
    loads: list[LoadProvenance],
    settings: list[SettingProvenance],
    earlier: Summary,
    runs: list[RunEntry],
) -> Provenance:
    """This sweep's, and an earlier sweep's for the runs and settings it carried over."""
    here = {x.run for x in loads}
    kept = {r.run for r in runs} | {x.run for x in loads}
    before = earlier.provenance
    if before is not None:
        loads = loads + [x for x in before.loads if x.run not in here and x.run in kept]
        planned = {x.setting for x in settings}
        settings = settings + [x for x in before.settings if x.setting not in planned]
    return Provenance(sweep=facts, loads=loads, settings=settings)


def setting_provenance(t: PlannedTask) -> list[SettingProvenance]:
    """Each setting of a planned task: its data, prompt template and constraints (its phase built once here)."""
    out = []
    for setting in t.task.settings():
        items = t.task.setting_items(t.items, setting)
        phase = t.task.build(items, setting)
        constraint = phase.requests[0].constraint if phase.requests else None
        evaluation = t.task.evaluation_constraint(setting)
        out.append(
            provenance.setting(
                t.name,
                t.task.setting_name(setting),
                t.task.options.model_dump(mode="json"),
                t.data_files,
                len(items),
                t.task.prompt_template(setting),
                constraint.to_dict() if constraint else None,
                evaluation.to_dict() if evaluation else None,
            )
        )
    return out


def _engine_said(noise: EngineLog | None, mark: int, log: Log) -> None:
    """What the engine wrote while it ran, for a failed load (it went to engines.log, not the terminal)."""
    said = noise.since(mark) if noise else ""
    if said and noise is not None:
        log(f"  the engine's last lines ({noise.path}):\n" + "\n".join(f"    {line}" for line in said.split("\n")))


def _timings_line(t: dict[str, Any]) -> str:
    shown = ", ".join(f"{k} {v:.1f} s" for k, v in t["by_stage"].items())
    return f"{t['total_s']:.1f} s in all ({shown}); fixed overhead {t['fixed_s']:.1f} s"


def browser_inputs(tasks: list[PlannedTask], records: Records[ItemRecord]) -> ItemInputs:
    """Each setting's prompts (built again: the same for every run) and the tasks' diffs, for the report's item
    browser; never written to the results files."""
    from .report.inputs import ItemInputs

    inputs = ItemInputs()
    for t in tasks:
        for setting in t.task.settings():
            name = t.task.setting_name(setting)
            keys = [k for k in records if k.setting == name]
            if not keys:
                continue
            items = t.task.setting_items(t.items, setting)
            ids = [str(it["id"]) for it in items]
            inputs.add_phase(name, ids, t.task.build(items, setting))
            by_id = dict(zip(ids, items))
            for key in keys:
                for rec in records[key]:
                    item = by_id.get(str(rec.id))
                    if item is not None:
                        inputs.add_diffs(key, str(rec.id), t.task.browser_diffs(item, rec))
    return inputs


def _with_earlier_runs(
    folder: ResultsFolder, runs: list[RunEntry], records: Records[ItemRecord], tasks: dict[str, Task]
) -> Records[ItemRecord]:
    """This sweep's records, plus those of runs an earlier sweep into this folder produced (read once)."""
    out = dict(records)
    for entry in runs:
        key = entry.key
        if key not in out and entry.task in tasks:
            earlier = folder.read_records(key, tasks[entry.task].Record.from_json)
            if earlier is not None:
                out[key] = earlier
    return out


def leaderboards(runs: list[RunEntry]) -> dict[str, list[LeaderboardRow]]:
    """Per task setting, the runs ranked by the task's primary metric, honouring which way is better (best first;
    no score last). The report's every ranking reads these."""
    from .tasks import get_task_class, task_names

    out: dict[str, list[LeaderboardRow]] = {}
    for setting in sorted({r.setting for r in runs}):
        group = [r for r in runs if r.setting == setting]
        metric = group[0].primary_metric or "mean"
        task = get_task_class(group[0].task) if group[0].task in task_names() else Task
        declared = next((m for m in task.metrics if m.name == metric), None)
        rows = []
        for r in rank_runs(group, metric, declared.higher_is_better if declared else True):
            value = r.metrics.get(metric)
            row: dict[str, Any] = {"run": r.run, "metric": metric, "value": value}
            if value is None or not has_score(value):
                row["value"], row["note"] = None, "no items"
            else:
                row.update(task.leaderboard_row(value))
            rows.append(LeaderboardRow.model_validate(row))
        out[setting] = rows
    return out


def build_consistency(
    cfg: SweepConfig, records: Records[ItemRecord], runs: list[RunEntry], tasks: list[PlannedTask]
) -> list[ConsistencyRow]:
    """Runs of models declared `same_weights_as` one another, compared item by item per task setting."""
    from .consistency import build

    specs = {m.name: m for m in cfg.models}

    def declared(model: str, variant: str) -> str | None:
        m = specs.get(model)
        return m.declared_twin(variant) if m is not None and variant in m.variants else None

    known = {t.name: t.task for t in tasks}
    entries = [r for r in runs if r.task in known]
    return build(entries, records, known, declared)


def build_ablations(records: Records[ItemRecord], runs: list[RunEntry], tasks: dict[str, Task]) -> list[dict[str, Any]]:
    from .ablations import build

    known = [r for r in runs if r.task in tasks]
    return build(records, known, lambda task: tasks[task].item_score, lambda task: tasks[task].cluster)


def _failure(m: ModelSpec, variant: str, ctx: int, reason: str) -> Failure:
    return Failure(
        run=m.run_name(variant, ctx), model=m.name, variant=variant, backend=m.backend, max_model_len=ctx, reason=reason
    )


def guard_connections(cfg: SweepConfig, tasks: list[PlannedTask]) -> None:
    """A config that names servers: from here on this process connects to their hosts and nowhere else."""
    from .netguard import allow_only

    specs = [*cfg.models, *(ev for t in tasks for ev in t.task.evaluator_models())]
    urls = [url for m in specs for url in m.server_urls()]
    if urls:
        allow_only(urls)


def _run_model(
    m: ModelSpec,
    variant: str,
    ctx: int,
    tasks: list[PlannedTask],
    store: Store,
    records: Records[ItemRecord],
    runs: list[RunEntry],
    chunk_size: int,
    fresh: bool,
    progress: bool | None,
    log: Log,
    load: Callable[[LoadSpec], Backend],
    timings: Timings,
) -> LoadProvenance:
    run = m.run_name(variant, ctx)
    with timings.stage("prepare", run=run):  # the model files' hash (once per file: the store keeps it)
        spec = m.load_spec(variant, ctx)
        engine = _LoggingEngine(spec, run, log, store, load)
        facts = _load_facts(spec, run, "candidate", store)
        size = weights_bytes(spec.path) if spec.path else 0  # a served model: no local weights
        runner = Runner(engine, store, variant, chunk_size=chunk_size, fresh=fresh, progress=progress)
    try:
        for t in tasks:
            for setting in t.task.settings():
                name = t.task.setting_name(setting)
                items = t.task.setting_items(t.items, setting)
                phase = t.task.build(items, setting)
                with PeakMemory() as mem:
                    results, stats = runner.run(phase)
                _phase_timings(timings, "engine_load", "phase", run, name, stats)
                with timings.stage("scoring", run=run, setting=name):
                    scored = [t.task.score(it, r, setting) for it, r in zip(items, results)]
                    records[RunKey(run, name)] = scored
                    metrics = t.task.run_metrics(scored, setting)
                entry = RunEntry(
                    model=m.name,
                    variant=variant,
                    backend=m.backend,
                    run=run,
                    max_model_len=ctx,
                    task=t.name,
                    setting=name,
                    options=setting,
                    prompt_format=engine.prompt_format,
                    n_items=len(scored),
                    primary_metric=t.task.primary_metric,
                    metrics=metrics,
                    weights_mb=round(size / 2**20, 2),
                    throughput={**stats.throughput(), "peak_rss_mb": round(mem.peak / 2**20, 1)},
                )
                _put_run(runs, entry)
                shown = ", ".join(
                    [f"{m.name}={metrics[m.name]:.3f}" for m in t.task.metrics if has_score(metrics.get(m.name))][:3]
                )
                pending = "scored once its evaluators have run" if t.task.evaluator_models() else "no items scored"
                log(f"[{run}] {name}: {shown or pending}  ({_rate(stats)})")
    finally:
        with timings.stage("close", run=run):
            engine.close()
    return facts


def _load_facts(spec: LoadSpec, run: str, role: str, store: Store) -> LoadProvenance:
    """A load's provenance, from its files (hashed once: the store keeps their digests) and its chat template."""
    return provenance.load(spec, run, role, store, model_chat_template(spec.chat_template, spec.backend, spec.path))


def _rate(stats: PhaseStats) -> str:
    """The phase's own rate (an engine start it triggered is shown apart), and what the prefix cache saved."""
    line = f"{stats.n_generated} generated, {stats.n_cached} cached"
    if stats.n_generated:  # a phase served from the store did no engine work: no rate to speak of
        line += f", {stats.throughput()['items_per_s']:.1f} items/s"
    reuse = stats.prefix_reuse()
    if reuse and reuse["ratio"]:
        line += f", prompt tokens computed 1/{reuse['ratio']:.1f} of submitted"
    return line + (f"; engine start {stats.load_s:.1f} s" if stats.load_s else "")


def _phase_timings(timings: Timings, load: str, stage: str, run: str, setting: str, stats: PhaseStats) -> None:
    if stats.load_s:
        timings.add(load, stats.load_s, run=run)
    info: dict[str, Any] = {
        "items": stats.n_requests,
        "generated": stats.n_generated,
        "items_per_s": stats.throughput()["items_per_s"],
    }
    if (reuse := stats.prefix_reuse()) is not None:
        info["prefix_reuse"] = reuse
    timings.add(stage, stats.wall_s, run=run, setting=setting, **info)


class _LoggingEngine(LazyBackend):
    """Loads on the first stored-output miss, says so, and turns engine crashes at load into one line."""

    def __init__(self, spec: Any, run: str, log: Log, store: Store, load: Callable[[LoadSpec], Backend]) -> None:
        super().__init__(spec, store, load)
        self.run, self.log = run, log
        try:
            self.prompt_format: str | None = model_prompt_format(spec.chat_template, spec.backend, spec.path)
        except InputError:
            self.prompt_format = None  # an unreadable model file: loading the engine names the problem in its run
        if self.prompt_format == "plain" and spec.chat_template is None:
            log(f"[{run}] the model has no chat template: prompts use the plain format (chat_template: auto)")

    def get(self) -> Any:
        if not self.loaded:
            self.log(f"[{self.run}] loading {self.spec.backend} model from {self.spec.path}")
            try:
                return super().get()
            except OfflineEvalError:
                raise
            except Exception as e:  # noqa: BLE001 - engines raise anything on a bad model; keep it one line
                first = str(e).splitlines()[0] if str(e) else ""
                raise OfflineEvalError(
                    f"the engine could not load {self.spec.path}: {type(e).__name__}: {first}"
                ) from e
        return super().get()


def _run_evaluations(
    tasks: list[PlannedTask],
    records: Records[ItemRecord],
    store: Store,
    runs: list[RunEntry],
    chunk_size: int,
    fresh: bool,
    progress: bool | None,
    log: Log,
    failures: list[Failure],
    executor: Executor,
    timings: Timings,
    noise: EngineLog | None = None,
) -> list[LoadProvenance]:
    """The second stage: each evaluator (judge) is loaded once, after every candidate, and runs over every
    candidate output of this sweep for every task that lists it. Returns each evaluator load's provenance."""
    staged: list[tuple[PlannedTask, list[RunEntry], Records[ItemRecord], Phase]] = []
    judges: dict[str, tuple[ModelSpec, list[int]]] = {}
    for t in tasks:
        evs = t.task.evaluator_models()
        entries = [r for r in runs if r.task == t.name and r.key in records]
        if not evs or not entries:
            continue
        mine = {r.key: records[r.key] for r in entries}
        staged.append((t, entries, mine, t.task.evaluation_phase(t.items, mine)))
        for ev in evs:
            variant, ctx = ev.runs()[0]
            key = ev.run_name(variant, ctx) + "\0" + ev.model_dump_json()
            judges.setdefault(key, (ev, []))[1].append(len(staged) - 1)
    results: list[dict[str, Sequence[Result]]] = [{} for _ in staged]
    timing: list[dict[str, Any]] = [{} for _ in staged]
    loaded: list[LoadProvenance] = []
    for ev, users in judges.values():
        variant, ctx = ev.runs()[0]
        run = ev.run_name(variant, ctx)
        n = sum(len(staged[i][3].requests) for i in users)
        log(f"[evaluator] {run}: {n} outputs of {len({e.run for i in users for e in staged[i][1]})} run(s)")
        mark = noise.offset() if noise else 0
        with timings.stage("prepare", run=run):
            spec = ev.load_spec(variant, ctx)
            engine = _LoggingEngine(spec, run, log, store, executor.loader(ev, run, log))
            loaded.append(_load_facts(spec, run, "evaluator", store))
            runner = Runner(
                engine, store, f"evaluator:{variant}", chunk_size=chunk_size, fresh=fresh, progress=progress
            )
        try:
            for i in users:
                with PeakMemory() as mem:
                    res, stats = runner.run(staged[i][3])
                _phase_timings(timings, "evaluator_load", "evaluation", run, staged[i][3].name, stats)
                log(f"[{run}] {staged[i][3].name}: {_rate(stats)}")
                results[i][run] = res
                timing[i][run] = {**stats.throughput(), "peak_rss_mb": round(mem.peak / 2**20, 1)}
        except OfflineEvalError as e:
            failures.append(_failure(ev, variant, ctx, f"evaluator: {e}"))
            log(f"[{run}] FAILED: {e}")
            _engine_said(noise, mark, log)
            for i in users:
                results[i].pop(run, None)
                timing[i].pop(run, None)
        finally:
            with timings.stage("close", run=run):
                engine.close()
    for (t, entries, staged_records, phase), by_evaluator, times in zip(staged, results, timing):
        with timings.stage("scoring", setting=phase.name):
            evaluated = t.task.finish_evaluation(staged_records, phase, by_evaluator)
            for entry in entries:
                if entry.key not in evaluated:
                    continue
                records[entry.key] = evaluated[entry.key]
                entry.metrics = t.task.run_metrics(evaluated[entry.key], entry.options)
                entry.evaluator = {"run": next(iter(by_evaluator), None), "runs": list(by_evaluator)}
                # Wall-clock lives under "throughput" and "timings" only: the rest of summary.json is reproducible.
                entry.throughput["evaluator"] = next(iter(times.values())) if len(times) == 1 else times
    return loaded


def task_reports(
    runs: list[RunEntry], records: Records[ItemRecord], tasks: list[PlannedTask]
) -> dict[str, dict[str, Any]]:
    reports = {}
    for t in tasks:
        entries = [r for r in runs if r.task == t.name]
        mine = {r.key: records[r.key] for r in entries if r.key in records}
        rep = t.task.sweep_report(entries, mine) if entries else None
        if rep is not None:
            reports[t.name] = rep.to_json()
    return reports


def _load_summary(folder: ResultsFolder, log: Log) -> Summary:
    """An earlier sweep's summary in this folder, whose runs this one carries over; one this version cannot read
    whole is set aside (its runs are made again from the store), never half-read."""
    if not folder.summary.exists():
        return Summary(schema_version=SCHEMA_VERSION)
    try:
        return Summary.read(folder.summary)
    except InputError as e:
        log(f"{e}; its runs are not carried over (this sweep's are written, and the store keeps every output)")
        return Summary(schema_version=SCHEMA_VERSION)


def _put_run(runs: list[RunEntry], entry: RunEntry) -> None:
    """This sweep's entry replaces an earlier one of the same run and setting; runs stay sorted."""
    runs[:] = sorted([r for r in runs if r.key != entry.key] + [entry], key=lambda r: r.key)


class _CallableModule(types.ModuleType):
    """`offline_eval.sweep(config, **options)` runs a sweep (the Python API: offline_eval.api.sweep): the module
    that orchestrates a sweep is also the function its name promises."""

    def __call__(self, config: str | Path | dict[str, Any], **options: Any) -> Summary:
        from .api import sweep

        return sweep(config, **options)


sys.modules[__name__].__class__ = _CallableModule
