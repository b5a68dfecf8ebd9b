"""One ranking rule for every leaderboard: higher is better, and a run with no score ranks last."""

from __future__ import annotations

import math
from typing import Any


def has_score(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def rank_key(value: Any, *tiebreak: Any) -> tuple[Any, ...]:
    """Sort key: scored runs first, best first; then runs without a score ("no items"); ties by name."""
    return (0, -value, *tiebreak) if has_score(value) else (1, 0, *tiebreak)


def rank_runs(runs: list[dict[str, Any]], metric: str, higher_is_better: bool = True) -> list[dict[str, Any]]:
    """Summary run entries, best first by `metric`; runs without a score last; ties by run and setting."""
    sign = 1 if higher_is_better else -1

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        v = r["metrics"].get(metric)
        return rank_key(sign * v if has_score(v) else None, r["run"], r.get("setting", ""))

    return sorted(runs, key=key)
