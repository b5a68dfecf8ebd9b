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
    and engine_log (True: the engines' own output goes to OUT/engines.log, as under the CLI)."""
    from .sweep import from_config

    return from_config(config, **options)


def load(out_dir: str | Path) -> Summary:
    """A sweep's output folder: its summary.json, checked whole; `.records(run, setting)` and `.dataframe()`
    read its results files."""
    return Summary.read(Path(out_dir) / "summary.json")
