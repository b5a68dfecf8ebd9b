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
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from offline_eval.inference.store import Store
from offline_eval.report import write_report
from offline_eval.results.records import ResultsFolder
from offline_eval.results.summary import SCHEMA_VERSION, Summary, SweepProvenance
from offline_eval.runtime.enginelog import EngineLog
from offline_eval.runtime.errors import InputError
from offline_eval.runtime.fileio import write_json_atomic
from offline_eval.runtime.i18n import checked
from offline_eval.runtime.lock import OutputLock
from offline_eval.runtime.timings import Timings
from offline_eval.tasks import record_class

from . import provenance
from .build import execute, from_plan, summarize
from .config import SweepConfig
from .dryrun import print_plan
from .execute import Stage
from .executors import make_executor
from .options import Log, SweepOptions
from .plan import Plan, configured_keys, guard_connections, plan
from .state import State


def run_sweep(cfg: SweepConfig, options: SweepOptions | None = None) -> Summary:
    o = options or SweepOptions()
    lang = checked(o.lang or cfg.lang)  # before any engine starts: the report is written last
    source, out_dir, log = o.source, o.out_dir, o.log
    timings = o.timings or Timings()
    config_file = str(Path(source).resolve()) if Path(source).is_file() else None  # verify finds it from anywhere
    sweep_provenance = provenance.sweep(
        list(o.command) if o.command is not None else sys.argv,
        config_file,
        provenance.config_digest(config_file, cfg.model_dump(mode="json")),
    )
    out = Path(out_dir or cfg.output_dir)
    if problem := cfg.output_inside_input(out):
        raise InputError(problem, file=source if config_file else None, field="--out" if out_dir else "output_dir")
    with timings.stage("data"):
        sweep_plan = plan(cfg, source, o.only, o.only_tasks, o.limit)
    folder = ResultsFolder(out)
    with guard_connections(cfg, sweep_plan.tasks):
        if o.dry_run:
            print_plan(sweep_plan, source, log)
            return Summary(schema_version=SCHEMA_VERSION)
        if problem := folder.blocked(sweep_plan.keys()):
            raise InputError(f"{problem} (nothing has run yet)", field="--out" if out_dir else "output_dir")
        out.mkdir(parents=True, exist_ok=True)
        with OutputLock(out), EngineLog(folder.engine_log) if o.engine_log else nullcontext() as engine_log:
            if config_file is None:
                write_json_atomic(folder.config, cfg.model_dump(mode="json"))
            executor = make_executor(cfg.runner, o.ray, log, o.progress)
            try:
                store = Store(folder.store, move_aside_if_corrupt=o.fresh, log=log)
                stage = Stage(o, store, folder.store, executor, timings, cfg.runner.chunk_size, engine_log)
                try:
                    start = State.start(folder, {ld.run for ld in sweep_plan.loads}, configured_keys(cfg, source), log)
                    state = execute(stage, sweep_plan, start, source)
                finally:
                    store.close()
            finally:
                executor.close()
            return _conclude(cfg, sweep_plan, state, folder, sweep_provenance, timings, log, lang)


def _conclude(
    cfg: SweepConfig,
    sweep_plan: Plan,
    state: State,
    folder: ResultsFolder,
    sweep_provenance: SweepProvenance,
    timings: Timings,
    log: Log,
    lang: str,
) -> Summary:
    with timings.stage("records"):
        for key, recs in state.records.items():
            folder.write_records(key, recs)
        state.forget_dropped(folder)
    with timings.stage("summary"):
        provenance.finish(sweep_provenance)
        everything = state.everything(folder, {t.name: t.task for t in sweep_plan.tasks})
        summary = summarize(cfg, sweep_plan, state, everything, sweep_provenance)
    for task, lines in summary.calibration_notes.items():
        for line in lines:
            log(f"warning: {task} human labels: {line}")
    for m in summary.noninferiority:
        for c in m.comparisons:
            if c.scale_note:
                log(f"warning: verdict of {c.run} on {c.setting}: judges' scale: {c.scale_note}")
    try:
        with timings.stage("report"):
            # What summary.json holds, without reading it back, and the prompts and diffs only the items hold.
            write_report(folder.root, summary, from_plan(sweep_plan.tasks, everything), lang)
    finally:  # summary.json last, so its timings include the report's; written even if the report fails
        summary.timings = timings.to_dict()  # wall-clock: not reproducible, like each run's "throughput"
        summary.write(folder.summary, record_class)
    log(f"timings: {_timings_line(summary.timings)}")
    return summary


def _timings_line(t: dict[str, Any]) -> str:
    shown = ", ".join(f"{k} {v:.1f} s" for k, v in t["by_stage"].items())
    return f"{t['total_s']:.1f} s in all ({shown}); fixed overhead {t['fixed_s']:.1f} s"
