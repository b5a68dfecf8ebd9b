"""A sweep: every model x variant x task setting, through one runner and store, into the output layout.

OUT/store.sqlite                      every engine output, keyed by (model, variant, request)
OUT/results/<run>/<setting>.jsonl     one record per item
OUT/summary.json                      the typed Summary: runs, their metrics and throughput, the analyses
OUT/report.md, OUT/report.html

The stages run in order, records staying in memory between them (pipeline/): plan -> execute (each model load)
-> evaluate (judges) -> analyses -> summary -> report. The store is the crash-safe layer; each output file is
written once, at the end.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from . import provenance
from .analyses import analyse
from .config import SweepConfig
from .enginelog import EngineLog, terminal
from .errors import InputError
from .executors import make_executor
from .lock import OutputLock
from .pipeline.evaluate import run_evaluations
from .pipeline.execute import Stage, attempt
from .pipeline.plan import Plan, guard_connections, plan
from .pipeline.state import State
from .results import ResultsFolder
from .store import Store
from .summary import SCHEMA_VERSION, Summary, SweepProvenance
from .timings import Timings

Log = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(msg, file=terminal(), flush=True)


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
    with timings.stage("data"):
        the = plan(cfg, source, only, only_tasks, limit)
    guard_connections(cfg, the.tasks)
    if dry_run:
        from .pipeline.dryrun import print_plan

        print_plan(the, source, log)
        return Summary(schema_version=SCHEMA_VERSION)
    folder = ResultsFolder(out)
    if problem := folder.blocked(the.keys()):
        raise InputError(f"{problem} (nothing has run yet)", field="--out" if out_dir else "output_dir")
    out.mkdir(parents=True, exist_ok=True)
    with OutputLock(out), EngineLog(folder.engine_log) if engine_log else nullcontext() as noise:
        executor = make_executor(cfg.runner, ray, log, progress)
        try:
            store = Store(folder.store, move_aside_if_corrupt=fresh, log=log)
            stage = Stage(store, folder.store, executor, log, timings, cfg.runner.chunk_size, fresh, progress, noise)
            try:
                state = _execute(stage, the, folder, source)
            finally:
                store.close()
        finally:
            executor.close()
        return _conclude(cfg, the, state, folder, facts, timings, log)


def _execute(stage: Stage, the: Plan, folder: ResultsFolder, source: str) -> State:
    """Every model load (serially, or beside one another on the executor), then the evaluators."""
    state = State.start(folder, {ld.run for ld in the.loads}, stage.log)
    units = list(enumerate(the.loads, 1))
    n = len(units)
    for unit in stage.executor.run_units(
        units, lambda u: attempt(stage, u[0], n, u[1], the.tasks, source), lambda u: u.failure is not None
    ):
        if unit.abort is not None:
            raise unit.abort
        if unit.failure:
            state.failed(unit.failure)
            continue
        state.records.update(unit.records)
        if unit.load is not None:
            state.loads.append(unit.load)
        for entry in unit.runs:
            state.put(entry)
    state.loads += run_evaluations(stage, the.tasks, state.records, state.runs, state.failures)
    return state


def _conclude(
    cfg: SweepConfig,
    the: Plan,
    state: State,
    folder: ResultsFolder,
    facts: SweepProvenance,
    timings: Timings,
    log: Log,
) -> Summary:
    with timings.stage("records"):
        for key, recs in state.records.items():
            folder.write_records(key, recs)
    with timings.stage("summary"):
        known = {t.name: t.task for t in the.tasks}
        everything = state.everything(folder, known)
        provenance.finish(facts)
        summary = Summary(
            schema_version=SCHEMA_VERSION,
            provenance=state.provenance(facts, the.settings),
            runs=state.runs,
            failures=state.failures,
            **analyse(cfg.models, cfg.margin, state.runs, everything, known),
        )
    try:
        with timings.stage("report"):
            from .report import write_report
            from .report.inputs import from_plan

            # What summary.json holds, without reading it back, and the prompts and diffs only the items hold.
            write_report(folder.root, summary, from_plan(the.tasks, everything))
    finally:  # summary.json last, so its timings include the report's; written even if the report fails
        summary.timings = timings.to_dict()  # wall-clock: not reproducible, like each run's "throughput"
        summary.write(folder.summary)
    log(f"timings: {_timings_line(summary.timings)}")
    return summary


def _timings_line(t: dict[str, Any]) -> str:
    shown = ", ".join(f"{k} {v:.1f} s" for k, v in t["by_stage"].items())
    return f"{t['total_s']:.1f} s in all ({shown}); fixed overhead {t['fixed_s']:.1f} s"


def from_config(config: str | Path | dict[str, Any], **options: Any) -> Summary:
    """offline_eval.api.sweep: a models.yaml path, or the same mapping as a dict (relative paths then resolve
    against the working directory), run with run_sweep's options."""
    from .config import load_config, parse_config

    if isinstance(config, dict):
        cfg, source = parse_config(config, Path.cwd(), "config dict"), "config dict"
    else:
        cfg, source = load_config(config), str(config)
    shown = ", ".join(f"{k}={v!r}" for k, v in options.items() if k != "log")
    command = [f"offline_eval.sweep({source!r}{', ' + shown if shown else ''})"]
    return run_sweep(cfg, source=source, command=command, **options)


class _CallableModule(types.ModuleType):
    """`offline_eval.sweep(config, **options)` runs a sweep (the Python API, offline_eval.api.sweep): the module
    that orchestrates a sweep is also the function its name promises."""

    def __call__(self, config: str | Path | dict[str, Any], **options: Any) -> Summary:
        return from_config(config, **options)


sys.modules[__name__].__class__ = _CallableModule
