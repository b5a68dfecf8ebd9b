"""What a leaderboard ranks: a finite number; a run without one ranks last (analyses.leaderboards.rank_runs)."""

from __future__ import annotations

import math
from typing import Any


def has_score(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
