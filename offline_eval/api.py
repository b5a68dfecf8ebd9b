"""The Python API, for notebooks and CI pipelines: the CLI's sweep as a function, and a finished sweep's folder as
a typed Summary whose runs' records read back typed (or as a pandas DataFrame)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .summary import Summary


def sweep(config: str | Path | dict[str, Any], **options: Any) -> Summary:
    """`offline-eval sweep CONFIG` from Python: `config` is a models.yaml path, or the same mapping as a dict
    (relative paths then resolve against the working directory). `options` are the command's: out_dir, only,
    only_tasks, limit, fresh, dry_run, ray, progress (False: no progress bars), log (a function taking each line)
    and engine_log (True: the engines' own output goes to OUT/engines.log, as under the CLI). `check=True` raises
    SweepFailed listing every failed run or evaluator (default False: they are in `summary.failures`). An
    exception raised by `log` propagates as itself. The process is left as it was: no connection allow-list, no
    matplotlib setting and no thread outlive the call."""
    from .sweep import from_config

    return from_config(config, **options)


def load(out_dir: str | Path) -> Summary:
    """A sweep's output folder: its summary.json, checked whole; `.records(run, setting)` and `.dataframe()`
    read its results files. Refused while a sweep writes into the folder; records read after another sweep
    rewrote it are refused too, so a summary and its records are always of one sweep."""
    from .errors import InputError
    from .lock import holder

    if who := holder(out_dir):
        raise InputError(
            f"a sweep is writing into this folder ({who}): load it once it has finished", file=str(out_dir)
        )
    return Summary.read(Path(out_dir) / "summary.json")
