"""Percentile bootstrap confidence intervals over items, seeded."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np


def bootstrap_ci(stat: Callable[..., float], *columns: Sequence[object], n_resamples: int = 1000,
                 confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Resample item indices with replacement; the CI is the (a/2, 1-a/2) percentiles of the statistic."""
    cols = [np.asarray(c) for c in columns]
    n = len(cols[0])
    if n == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_resamples, n))
    values = np.fromiter((stat(*(c[i] for c in cols)) for i in idx), dtype=float, count=n_resamples)
    a = (1 - confidence) / 2
    lo, hi = np.percentile(values, [100 * a, 100 * (1 - a)])
    return float(lo), float(hi)
