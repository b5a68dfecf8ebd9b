"""LegalEval-Q's AdjScore and per-model score summaries."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def adj_score(scores: Sequence[float]) -> float:
    """AdjScore = mu^2 / (mu + sigma) over 0-100 scores, sigma the population std (ddof=0).

    It rewards a high mean and penalises spread: two models with the same mean rank by consistency."""
    a = np.asarray(scores, dtype=float)
    if a.size == 0:
        return float("nan")
    mu, sigma = float(a.mean()), float(a.std(ddof=0))
    return 0.0 if mu + sigma == 0 else mu * mu / (mu + sigma)


def tier(score: float) -> str:
    """>= 90 high, 70-90 mid, < 70 low."""
    return "high" if score >= 90 else ("mid" if score >= 70 else "low")


def summarize(scores: Sequence[float]) -> dict[str, float | str]:
    a = np.asarray(scores, dtype=float)
    adj = adj_score(a.tolist())
    return {
        "mean": float(a.mean()),
        "std": float(a.std(ddof=0)),
        "median": float(np.median(a)),
        "adj_score": adj,
        "tier": tier(adj),
        "n": int(a.size),
    }
