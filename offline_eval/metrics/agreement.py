"""Judge-human agreement (LegalRikai Tables 5, 7, 8): Spearman's rho with p, MAE, Cohen's kappa; and
agreement among raters, Krippendorff's alpha (ordinal, from the `krippendorff` package).

Scores are on the [0, 1] scale after (s - min) / (max - min). A constant column makes rho and kappa
undefined: they are NaN, as the paper prints them ("nan").
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike


def normalise(score: float, lo: float, hi: float) -> float:
    """(s - min) / (max - min): a 3-point scale 1..3 maps to 0, 0.5, 1; a 2-point 1..2 to 0, 1."""
    if hi <= lo:
        raise ValueError("the scale needs max > min")
    return (score - lo) / (hi - lo)


def spearman(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Spearman's rho (average ranks for ties) and its two-sided p-value (t approximation, as scipy)."""
    from scipy import stats

    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(a) != len(b):
        raise ValueError("x and y differ in length")
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan"), float("nan")
    ra, rb = stats.rankdata(a), stats.rankdata(b)
    rho = float(np.corrcoef(ra, rb)[0, 1])
    n = len(a)
    if abs(rho) >= 1.0:
        return rho, 0.0
    t = rho * math.sqrt((n - 2) / (1 - rho * rho))
    return rho, float(2 * stats.t.sf(abs(t), n - 2))


def mae(x: Sequence[float], y: Sequence[float]) -> float:
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    return float(np.mean(np.abs(a - b))) if len(a) else float("nan")


def cohen_kappa(a: Sequence[object], b: Sequence[object]) -> float:
    """Unweighted Cohen's kappa between two annotators; NaN when chance agreement is 1 (one label only)."""
    if len(a) != len(b):
        raise ValueError("annotations differ in length")
    labels = sorted({*a, *b}, key=str)
    n = len(a)
    if n == 0:
        return float("nan")
    po = sum(1 for x, y in zip(a, b) if x == y) / n
    pe = sum((sum(1 for x in a if x == k) / n) * (sum(1 for y in b if y == k) / n) for k in labels)
    return float("nan") if pe == 1 else (po - pe) / (1 - pe)


def krippendorff_alpha(ratings: ArrayLike, values: Sequence[int]) -> float | None:
    """Krippendorff's alpha, ordinal, from the `krippendorff` package: `ratings` is raters x units with NaN where
    a rater gave no score, `values` the scale's points (so a point nobody used still counts as a distance).
    None where it is undefined: no unit with two ratings, or no disagreement to expect (one value only)."""
    import krippendorff

    data = np.asarray(ratings, dtype=float)
    if data.ndim != 2 or data.shape[0] < 2 or not np.any(np.sum(~np.isnan(data), axis=0) >= 2):
        return None
    if len(np.unique(data[~np.isnan(data)])) < 2:
        return None
    return float(krippendorff.alpha(reliability_data=data, value_domain=list(values), level_of_measurement="ordinal"))


def format_rho(rho: float, p: float) -> str:
    """As the paper's Table 7: the value, marked † when p < 0.05; "nan" when undefined."""
    if math.isnan(rho):
        return "nan"
    return f"{rho:.2f}" + ("†" if p < 0.05 else "")
