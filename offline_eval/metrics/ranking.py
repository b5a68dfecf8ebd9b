"""One ranking rule for every leaderboard: higher is better, and a run with no score ranks last."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from ..results import RunEntry


def has_score(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def rank_key(value: Any, *tiebreak: Any) -> tuple[Any, ...]:
    """Sort key: scored runs first, best first; then runs without a score ("no items"); ties by name."""
    return (0, -value, *tiebreak) if has_score(value) else (1, 0, *tiebreak)


Ranked = TypeVar("Ranked", "RunEntry", dict[str, Any])


def rank_runs(runs: Sequence[Ranked], metric: str, higher_is_better: bool = True) -> list[Ranked]:
    """Run entries (typed, or as summary.json holds them), best first by `metric`; runs without a score last;
    ties by run and setting."""
    sign = 1 if higher_is_better else -1

    def key(r: Ranked) -> tuple[Any, ...]:
        if isinstance(r, dict):
            metrics, run, setting = r["metrics"], r["run"], r.get("setting", "")
        else:
            metrics, run, setting = r.metrics, r.run, r.setting
        v = metrics.get(metric)
        return rank_key(sign * v if has_score(v) else None, run, setting)

    return sorted(runs, key=key)
