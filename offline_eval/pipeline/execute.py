"""A unit of a sweep: one model load, every planned setting through one runner, each scored as it finishes.
What went wrong becomes the run's one failure record, built here and only here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offline_eval.inference.backends.base import Backend
from offline_eval.inference.backends.lazy import LazyBackend
from offline_eval.inference.backends.spec import LoadSpec
from offline_eval.inference.backends.templates import model_chat_template, model_prompt_format
from offline_eval.inference.runner import PhaseStats, Runner
from offline_eval.inference.store import Store
from offline_eval.metrics.ranking import has_score
from offline_eval.models.spec import ModelSpec
from offline_eval.models.thinking import explicit_settings, settings_of, solve
from offline_eval.results.records import ItemRecord, Records, RunEntry, RunKey, with_sample, with_thinking
from offline_eval.results.summary import Failure, LoadProvenance
from offline_eval.runtime.enginelog import EngineLog
from offline_eval.runtime.errors import InputError, OfflineEvalError, described
from offline_eval.runtime.memory import PeakMemory, weights_bytes
from offline_eval.runtime.timings import Timings

from . import provenance
from .departures import model_departures
from .dryrun import planned_tokens
from .executors import Executor
from .options import Log, SweepOptions
from .plan import Load, PlannedTask


@dataclass
class Stage:
    """What every unit of one sweep shares: its options, store, executor, timings, runner chunk and engine log."""

    options: SweepOptions
    store: Store
    store_path: Path
    executor: Executor
    timings: Timings
    chunk_size: int
    engine_log: EngineLog | None = None

    @property
    def log(self) -> Log:
        return self.options.log

    @property
    def progress(self) -> bool | None:
        return self.options.progress

    def runner(self, engine: LazyBackend, store: Store, variant: str, progress: bool | None) -> Runner:
        return Runner(engine, store, variant, chunk_size=self.chunk_size, fresh=self.options.fresh, progress=progress)

    def engine(
        self, m: ModelSpec, spec: LoadSpec, run: str, store: Store, plan: Callable[[], int | None] | None = None
    ) -> LoggingEngine:
        load = self.executor.loader(m, run, self.log)
        return LoggingEngine(spec, run, self.log, store, load, plan, self.executor.release)

    def mark(self) -> int:
        return self.engine_log.offset() if self.engine_log else 0

    def engine_said(self, mark: int) -> None:
        """What the engine wrote while it ran, for a failed load (it went to engines.log, not the terminal)."""
        said = self.engine_log.since(mark) if self.engine_log else ""
        if said and self.engine_log is not None:
            lines = "\n".join(f"    {line}" for line in said.split("\n"))
            self.log(f"  the engine's last lines ({self.engine_log.path}):\n{lines}")


@dataclass
class Unit:
    """What one engine load produced: its records and run entries, or why it failed."""

    run: str
    records: Records[ItemRecord] = field(default_factory=dict)
    runs: list[RunEntry] = field(default_factory=list)
    failure: Failure | None = None
    abort: InputError | None = None  # bad data, or an overflow under policy 'fail': stops the sweep
    load: LoadProvenance | None = None


def failure(m: ModelSpec, variant: str, ctx: int, reason: str) -> Failure:
    return Failure(
        run=m.run_name(variant, ctx), model=m.name, variant=variant, backend=m.backend, max_model_len=ctx, reason=reason
    )


def reason(e: BaseException) -> str:
    """Why a load failed, in one line."""
    if isinstance(e, OfflineEvalError):
        return str(e)
    if isinstance(e, MemoryError):
        return "out of memory"
    return described(e)


def attempt(stage: Stage, k: int, n: int, ld: Load, tasks: list[PlannedTask], source: str) -> Unit:
    """Unit k of n; a failure fails this run only, bad data (an InputError naming a record) stops the sweep."""
    unit = Unit(ld.run)
    stage.log(f"[{k}/{n}] {unit.run}")
    mark = stage.mark()
    # SQLite allows one connection per thread: a unit running beside others opens its own.
    store = Store(stage.store_path) if stage.executor.parallel else stage.store
    try:
        if problem := ld.problem(source):
            raise OfflineEvalError(problem)
        unit.load = run_model(stage, ld, tasks, store, unit)
    except InputError as e:
        if e.record is None:
            unit.failure = failure(ld.model, ld.variant, ld.ctx, reason(e))
        else:
            unit.abort = e  # bad data or an overflow under policy 'fail': the user must fix it first
    except Exception as e:  # noqa: BLE001 - a damaged model file can break any reader; fail this run only
        if stage.options.debug and not isinstance(e, (OfflineEvalError, MemoryError)):
            raise
        unit.failure = failure(ld.model, ld.variant, ld.ctx, reason(e))
    finally:
        if store is not stage.store:
            store.close()
    if unit.failure:
        stage.log(f"[{unit.run}] FAILED: {unit.failure.reason}")
        stage.engine_said(mark)
    return unit


def run_model(stage: Stage, ld: Load, tasks: list[PlannedTask], store: Store, unit: Unit) -> LoadProvenance:
    run, m, timings = ld.run, ld.model, stage.timings
    with timings.stage("prepare", run=run):  # the model files' hash (once per file: the store keeps it)
        spec = ld.spec()
        engine = stage.engine(m, spec, run, store, plan=lambda: planned_tokens(ld, tasks))
        prov = new_load_provenance(spec, run, "candidate", store)
        if prov.adapter and (warning := prov.adapter.get("base_mismatch")):
            stage.log(f"[{run}] warning: {warning}")
        size = weights_bytes(spec.path) if spec.path else 0  # a served model: no local weights
        runner = stage.runner(engine, store, ld.variant, False if stage.executor.parallel else stage.progress)
        settings = settings_of(m, ld.variant)
        if (decoding := settings.describe()) is not None:
            prov.decoding = decoding
    ended_well = False
    try:
        for t in tasks:
            own = settings_of(m, ld.variant, True) if t.task.model_sampling else settings
            if (preset := t.task.reasoning_preset) is not None:  # a paper's reasoning protocol, where models.yaml
                own = preset.apply(own, explicit_settings(m, ld.variant), ld.ctx)  # leaves it to the task
            if own is not settings and (how := own.describe()) != settings.describe():
                # a task whose protocol decodes as the weights' files say: the provenance names how, per task
                prov.decoding = prov.decoding or {}
                prov.decoding.setdefault("tasks", {})[t.name] = how
            mine = own.on_task(t.task.samples)
            for s in t.settings:
                with PeakMemory() as mem:
                    results, stats = solve(runner, s.phase, mine)
                phase_timings(timings, "engine_load", "phase", run, s.name, stats)
                with timings.stage("scoring", run=run, setting=s.name):
                    items = [it for _ in range(mine.samples) for it in s.items]  # the results are sample-major
                    scored = [with_thinking(t.task.score(it, r, s.options), r) for it, r in zip(items, results)]
                    if mine.samples > 1:
                        scored = [with_sample(r, i // len(s.items)) for i, r in enumerate(scored)]
                    unit.records[RunKey(run, s.name)] = scored
                    metrics = t.task.run_metrics(scored, s.options)
                unit.runs.append(
                    RunEntry(
                        model=m.name,
                        variant=ld.variant,
                        backend=m.backend,
                        run=run,
                        max_model_len=ld.ctx,
                        task=t.name,
                        setting=s.name,
                        options=s.options,
                        protocol=t.task.protocol,
                        departures=[*t.task.departures(s.options), *model_departures(t.task, m, ld.variant, ld.ctx)],
                        prompt_format=engine.prompt_format,
                        n_items=len(s.items),
                        primary_metric=t.task.primary_metric,
                        metrics=metrics,
                        weights_mb=round(size / 2**20, 2),
                        throughput={**stats.throughput(), "peak_rss_mb": round(mem.peak / 2**20, 1)},
                    )
                )
                shown = ", ".join(
                    [f"{x.name}={metrics[x.name]:.3f}" for x in t.task.metrics if has_score(metrics.get(x.name))][:3]
                )
                pending = "scored once its evaluators have run" if t.task.evaluation() else "no items scored"
                stage.log(f"[{run}] {s.name}: {shown or pending}  ({rate(stats)})")
        ended_well = True
    finally:
        prov.engine_start = engine.engine_start()
        with timings.stage("close", run=run):
            engine.close(keep=ended_well)  # an engine that failed a run serves no other
    return prov


def new_load_provenance(spec: LoadSpec, run: str, role: str, store: Store) -> LoadProvenance:
    """A load's provenance, from its files (hashed once: the store keeps their digests) and its chat template."""
    return provenance.load(spec, run, role, store, model_chat_template(spec.chat_template, spec.backend, spec.path))


def rate(stats: PhaseStats) -> str:
    """The phase's own rate (an engine start it triggered is shown apart), and what the prefix cache saved."""
    line = f"{stats.n_generated} generated, {stats.n_cached} cached"
    if stats.n_generated:  # a phase served from the store did no engine work: no rate to speak of
        line += f", {stats.throughput()['items_per_s']:.1f} items/s"
    reuse = stats.prefix_reuse()
    if reuse and reuse["ratio"]:
        line += f", prompt tokens computed 1/{reuse['ratio']:.1f} of submitted"
    return line + (f"; engine start {stats.load_s:.1f} s" if stats.load_s else "")


def phase_timings(timings: Timings, load: str, stage: str, run: str, setting: str, stats: PhaseStats) -> None:
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


class LoggingEngine(LazyBackend):
    """Loads on the first stored-output miss, says so, and turns engine crashes at load into one line."""

    def __init__(
        self,
        spec: LoadSpec,
        run: str,
        log: Log,
        store: Store,
        load: Callable[[LoadSpec], Backend],
        plan: Callable[[], int | None] | None = None,
        release: Callable[[Backend], None] | None = None,
    ) -> None:
        super().__init__(spec, store, load, plan, release)
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
                got = super().get()
            except OfflineEvalError:
                raise
            except Exception as e:  # noqa: BLE001 - engines raise anything on a bad model; keep it one line
                raise OfflineEvalError(f"the engine could not load {self.spec.path}: {described(e)}") from e
            if said := got.start_line():
                self.log(f"[{self.run}] {said}")
            return got
        return super().get()
