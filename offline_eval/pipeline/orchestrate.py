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
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offline_eval.inference.store import Store
from offline_eval.results.records import ResultsFolder
from offline_eval.results.summary import SCHEMA_VERSION, Summary, SweepProvenance
from offline_eval.runtime.enginelog import EngineLog, terminal
from offline_eval.runtime.errors import InputError
from offline_eval.runtime.fileio import write_json_atomic
from offline_eval.runtime.lock import OutputLock
from offline_eval.runtime.timings import Timings
from offline_eval.tasks import record_class

from . import provenance
from .build import execute, summarize
from .config import SweepConfig
from .execute import Stage
from .executors import make_executor
from .plan import Plan, configured_keys, guard_connections, plan
from .state import State

Log = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(msg, file=terminal(), flush=True)


@dataclass(frozen=True, kw_only=True)
class SweepOptions:
    """How one sweep runs, whoever starts it (the CLI, offline_eval.sweep, a test).

    `source`: where the config came from (a models.yaml path, which `verify` finds from anywhere).
    `out_dir`: instead of the config's output_dir. `only`, `only_tasks`: these models (runs) and tasks.
    `limit`: the first N items of each task. `fresh`: answer again, the store aside. `dry_run`: print the plan.
    `progress`: False, no progress bars. `log`: a function taking each line. `ray`: a Ray cluster's address.
    `engine_log`: the engines' own output (library warnings, native logs, their child processes) goes to
    OUT/engines.log instead of the terminal, and a failed load shows its last lines. `command`: what started
    the sweep, for its provenance (default: this process's command line)."""

    source: str = "config dict"
    out_dir: str | None = None
    only: list[str] | None = None
    only_tasks: list[str] | None = None
    limit: int | None = None
    fresh: bool = False
    dry_run: bool = False
    progress: bool | None = None
    log: Log = _stderr
    ray: str | None = None
    timings: Timings | None = None
    engine_log: bool = False
    command: Sequence[str] | None = None


def run_sweep(cfg: SweepConfig, options: SweepOptions | None = None) -> Summary:
    o = options or SweepOptions()
    source, out_dir, log, progress, fresh = o.source, o.out_dir, o.log, o.progress, o.fresh
    timings = o.timings or Timings()
    config_file = str(Path(source).resolve()) if Path(source).is_file() else None  # verify finds it from anywhere
    facts = provenance.sweep(
        list(o.command) if o.command is not None else sys.argv,
        config_file,
        provenance.config_digest(config_file, cfg.model_dump(mode="json")),
    )
    out = Path(out_dir or cfg.output_dir)
    with timings.stage("data"):
        the = plan(cfg, source, o.only, o.only_tasks, o.limit)
    folder = ResultsFolder(out)
    with guard_connections(cfg, the.tasks):
        if o.dry_run:
            from .dryrun import print_plan

            print_plan(the, source, log)
            return Summary(schema_version=SCHEMA_VERSION)
        if problem := folder.blocked(the.keys()):
            raise InputError(f"{problem} (nothing has run yet)", field="--out" if out_dir else "output_dir")
        out.mkdir(parents=True, exist_ok=True)
        with OutputLock(out), EngineLog(folder.engine_log) if o.engine_log else nullcontext() as noise:
            if config_file is None:
                write_json_atomic(folder.config, cfg.model_dump(mode="json"))
            executor = make_executor(cfg.runner, o.ray, log, progress)
            try:
                store = Store(folder.store, move_aside_if_corrupt=fresh, log=log)
                stage = Stage(
                    store, folder.store, executor, log, timings, cfg.runner.chunk_size, fresh, progress, noise
                )
                try:
                    start = State.start(folder, {ld.run for ld in the.loads}, configured_keys(cfg, source), log)
                    state = execute(stage, the, start, source)
                finally:
                    store.close()
            finally:
                executor.close()
            return _conclude(cfg, the, state, folder, facts, timings, log)


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
        state.forget_dropped(folder)
    with timings.stage("summary"):
        provenance.finish(facts)
        everything = state.everything(folder, {t.name: t.task for t in the.tasks})
        summary = summarize(cfg, the, state, everything, facts)
    try:
        with timings.stage("report"):
            from offline_eval.report import write_report

            from .build import from_plan

            # What summary.json holds, without reading it back, and the prompts and diffs only the items hold.
            write_report(folder.root, summary, from_plan(the.tasks, everything))
    finally:  # summary.json last, so its timings include the report's; written even if the report fails
        summary.timings = timings.to_dict()  # wall-clock: not reproducible, like each run's "throughput"
        summary.write(folder.summary, record_class)
    log(f"timings: {_timings_line(summary.timings)}")
    return summary


def _timings_line(t: dict[str, Any]) -> str:
    shown = ", ".join(f"{k} {v:.1f} s" for k, v in t["by_stage"].items())
    return f"{t['total_s']:.1f} s in all ({shown}); fixed overhead {t['fixed_s']:.1f} s"
