"""The Python API, for notebooks and CI pipelines: the CLI's sweep as a function, and a finished sweep's folder as
a typed Summary whose runs' records read back typed (or as a pandas DataFrame)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from offline_eval.results.summary import Summary
from offline_eval.tasks import read_summary


def sweep(config: str | Path | dict[str, Any], check: bool = False, **options: Any) -> Summary:
    """`offline-eval sweep CONFIG` from Python: `config` is a models.yaml path, or the same mapping as a dict
    (relative paths then resolve against the working directory). `options` are SweepOptions' (the command's):
    out_dir, only, only_tasks, limit, fresh, dry_run, ray, progress (False: no progress bars), log (a function
    taking each line), engine_log (True: the engines' own output goes to OUT/engines.log, as under the CLI) and
    debug (True: an unexpected error in a run is raised, traceback and all, instead of failing that run).
    `check=True` raises SweepFailed listing every failed run or evaluator (default False: they are in
    `summary.failures`). An exception raised by `log` propagates as itself. The process is left as it was: no
    connection allow-list, no matplotlib setting and no thread outlive the call."""
    from dataclasses import fields

    from offline_eval.pipeline.config import load_config, parse_config
    from offline_eval.pipeline.options import SweepOptions
    from offline_eval.pipeline.orchestrate import run_sweep
    from offline_eval.runtime.errors import CallbackError, InputError, SweepFailed

    if isinstance(config, dict):
        cfg, source = parse_config(config, Path.cwd(), "config dict"), "config dict"
    elif isinstance(config, str | Path):
        cfg, source = load_config(config), str(config)
    else:
        raise InputError(f"takes a models.yaml path or a mapping, not {type(config).__name__}", field="config")
    known = {f.name for f in fields(SweepOptions)} - {"source", "command", "timings"}
    if unknown := sorted(set(options) - known):
        raise InputError(f"unknown option {unknown[0]!r}; the options are {', '.join(sorted(known))}", field=unknown[0])
    shown = ", ".join(f"{k}={v!r}" for k, v in options.items() if k != "log")
    command = [f"offline_eval.sweep({source!r}{', ' + shown if shown else ''})"]
    if "log" in options:
        options["log"] = _guarded(options["log"])
    try:
        summary = run_sweep(cfg, SweepOptions(source=source, command=command, **options))
    except CallbackError as e:  # the user's own exception, as itself: not a failed model
        raise e.original from None
    if check and summary.failures:
        raise SweepFailed("; ".join(f"{f.run}: {f.reason}" for f in summary.failures))
    return summary


def _guarded(log: Callable[[str], None]) -> Callable[[str], None]:
    from offline_eval.runtime.errors import CallbackError

    def call(msg: str) -> None:
        try:
            log(msg)
        except Exception as e:  # noqa: BLE001 - carried past the guards that fail a run, raised again as itself
            raise CallbackError(e) from e

    return call


def load(out_dir: str | Path) -> Summary:
    """A sweep's output folder: its summary.json, checked whole; `.records(run, setting)` and `.dataframe()`
    read its results files. Refused while a sweep writes into the folder; records read after another sweep
    rewrote it are refused too, so a summary and its records are always of one sweep."""
    from offline_eval.runtime.errors import InputError
    from offline_eval.runtime.lock import holder

    if who := holder(out_dir):
        raise InputError(
            f"a sweep is writing into this folder ({who}): load it once it has finished", file=str(out_dir)
        )
    return read_summary(Path(out_dir) / "summary.json")


def compare(old: str | Path, new: str | Path, **options: Any) -> Any:
    """`offline-eval compare OLD NEW` from Python: the typed Comparison of two sweep folders. `options`: mapping
    (old run -> new run, for runs of other names), margins (metric -> margin), seed, allow_changed_data,
    allow_protocol_change (pair runs of different protocols, refused by default), verify (both folders verified
    first, by default)."""
    from offline_eval.comparison import compare as run

    return run(old, new, **options)
