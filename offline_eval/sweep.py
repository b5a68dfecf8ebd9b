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
from .build import execute, summarize
from .config import SweepConfig
from .enginelog import EngineLog, terminal
from .errors import CallbackError, InputError, SweepFailed
from .executors import make_executor
from .fileio import write_json_atomic
from .lock import OutputLock
from .pipeline.execute import Stage
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
    config_file = str(Path(source).resolve()) if Path(source).is_file() else None  # verify finds it from anywhere
    facts = provenance.sweep(
        list(command) if command is not None else sys.argv,
        config_file,
        provenance.config_digest(config_file, cfg.model_dump(mode="json")),
    )
    out = Path(out_dir or cfg.output_dir)
    with timings.stage("data"):
        the = plan(cfg, source, only, only_tasks, limit)
    folder = ResultsFolder(out)
    with guard_connections(cfg, the.tasks):
        if dry_run:
            from .pipeline.dryrun import print_plan

            print_plan(the, source, log)
            return Summary(schema_version=SCHEMA_VERSION)
        if problem := folder.blocked(the.keys()):
            raise InputError(f"{problem} (nothing has run yet)", field="--out" if out_dir else "output_dir")
        out.mkdir(parents=True, exist_ok=True)
        with OutputLock(out), EngineLog(folder.engine_log) if engine_log else nullcontext() as noise:
            if config_file is None:
                write_json_atomic(folder.config, cfg.model_dump(mode="json"))
            executor = make_executor(cfg.runner, ray, log, progress)
            try:
                store = Store(folder.store, move_aside_if_corrupt=fresh, log=log)
                stage = Stage(
                    store, folder.store, executor, log, timings, cfg.runner.chunk_size, fresh, progress, noise
                )
                try:
                    state = execute(stage, the, State.start(folder, {ld.run for ld in the.loads}, log), source)
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
    with timings.stage("summary"):
        provenance.finish(facts)
        everything = state.everything(folder, {t.name: t.task for t in the.tasks})
        summary = summarize(cfg, the, state, everything, facts)
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


def _guarded(log: Log) -> Log:
    def call(msg: str) -> None:
        try:
            log(msg)
        except Exception as e:  # noqa: BLE001 - carried past the guards that fail a run, raised again as itself
            raise CallbackError(e) from e

    return call


def from_config(config: str | Path | dict[str, Any], check: bool = False, **options: Any) -> Summary:
    """offline_eval.api.sweep: a models.yaml path, or the same mapping as a dict (relative paths then resolve
    against the working directory), run with run_sweep's options. `check`: raise SweepFailed, listing them, when
    any run or evaluator failed (default: they are in summary.failures, as the CLI's exit code 1 says)."""
    from .config import load_config, parse_config

    if isinstance(config, dict):
        cfg, source = parse_config(config, Path.cwd(), "config dict"), "config dict"
    elif isinstance(config, str | Path):
        cfg, source = load_config(config), str(config)
    else:
        raise InputError(f"takes a models.yaml path or a mapping, not {type(config).__name__}", field="config")
    shown = ", ".join(f"{k}={v!r}" for k, v in options.items() if k != "log")
    command = [f"offline_eval.sweep({source!r}{', ' + shown if shown else ''})"]
    if "log" in options:
        options["log"] = _guarded(options["log"])
    try:
        summary = run_sweep(cfg, source=source, command=command, **options)
    except CallbackError as e:  # the user's own exception, as itself: not a failed model
        raise e.original from None
    if check and summary.failures:
        raise SweepFailed("; ".join(f"{f.run}: {f.reason}" for f in summary.failures))
    return summary


class _CallableModule(types.ModuleType):
    """`offline_eval.sweep(config, **options)` runs a sweep (the Python API, offline_eval.api.sweep): the module
    that orchestrates a sweep is also the function its name promises."""

    def __call__(self, config: str | Path | dict[str, Any], **options: Any) -> Summary:
        return from_config(config, **options)


sys.modules[__name__].__class__ = _CallableModule
