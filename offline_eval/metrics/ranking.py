"""One ranking rule for every leaderboard: best first (which way is better being the metric's), a run with no score
last, ties by name. The sweep ranks once; the report reads its ranking from summary.json."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from offline_eval.results import RunEntry


def has_score(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def rank_runs(runs: Sequence[RunEntry], metric: str, higher_is_better: bool = True) -> list[RunEntry]:
    """Run entries best first by `metric`; runs without a score last; ties by run and setting."""
    sign = 1 if higher_is_better else -1

    def key(r: RunEntry) -> tuple[Any, ...]:
        v: Any = r.metrics.get(metric)
        return (0, -sign * v, r.run, r.setting) if has_score(v) else (1, 0, r.run, r.setting)

    return sorted(runs, key=key)
