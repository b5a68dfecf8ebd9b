"""How one sweep runs: the options object every stage reads."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from offline_eval.runtime.enginelog import terminal
from offline_eval.runtime.timings import Timings

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
    `debug`: an unexpected error in a load is raised with its traceback instead of failing that run.
    `engine_log`: the engines' own output (library warnings, native logs, their child processes) goes to
    OUT/engines.log instead of the terminal, and a failed load shows its last lines. `command`: what started
    the sweep, for its provenance (default: this process's command line). `lang`: the report's language, instead of
    the config's `lang:` (default English)."""

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
    debug: bool = False
    command: Sequence[str] | None = None
    lang: str | None = None
