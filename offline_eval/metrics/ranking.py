"""One ranking rule for every leaderboard: higher is better, and a run with no score ranks last."""

from __future__ import annotations

import math
from typing import Any


def has_score(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def rank_key(value: Any, *tiebreak: Any) -> tuple[Any, ...]:
    """Sort key: scored runs first, best first; then runs without a score ("no items"); ties by name."""
    return (0, -value, *tiebreak) if has_score(value) else (1, 0, *tiebreak)
