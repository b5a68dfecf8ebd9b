"""Paired tests for ablations (LegalEval-Q sections 5.1.2-5.1.4): normality, Wilcoxon, t, effect sizes,
multiple-comparison adjustments and the Hodges-Lehmann shift with a bootstrap CI.

scipy supplies the test distributions; the adjustments and the HL estimator are written out here (and
checked against hand-computed cases and scipy/statsmodels-style references in the tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np


def bonferroni(p: Sequence[float]) -> list[float]:
    """p * m, capped at 1, in input order."""
    m = len(p)
    return [min(1.0, float(x) * m) for x in p]


def holm(p: Sequence[float]) -> list[float]:
    """Holm step-down: the k-th smallest p times (m - k + 1), made monotone, capped at 1; input order."""
    m = len(p)
    order = np.argsort(p, kind="stable")
    out = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * float(p[i])))
        out[i] = running
    return out.tolist()


def benjamini_hochberg(p: Sequence[float]) -> list[float]:
    """BH q-values: the k-th smallest p times m / k, made monotone from the largest down, capped at 1."""
    m = len(p)
    order = np.argsort(p, kind="stable")
    out = np.empty(m)
    running = 1.0
    for rank in range(m - 1, -1, -1):
        i = order[rank]
        running = min(running, float(p[i]) * m / (rank + 1))
        out[i] = min(1.0, running)
    return out.tolist()


def _walsh_median(d: np.ndarray) -> float:
    i, j = np.triu_indices(len(d))
    return float(np.median((d[i] + d[j]) / 2.0))


def _walsh_median_of_counts(values: np.ndarray, counts: np.ndarray) -> float:
    """The median of the Walsh averages of a sample given as distinct values and their counts: the same number
    as `_walsh_median`, in O(k^2) for k distinct values instead of O(n^2) (0/1 scores give k <= 3)."""
    c = counts.astype(np.float64)
    k = len(values)
    i, j = np.triu_indices(k)
    averages = (values[i] + values[j]) / 2.0
    weights = np.where(i == j, c[i] * (c[i] + 1) / 2, c[i] * c[j])
    order = np.argsort(averages, kind="stable")
    averages, cum = averages[order], np.cumsum(weights[order])
    total = cum[-1]
    lo = np.searchsorted(cum, (total - 1) // 2, side="right")  # 0-based positions of the middle element(s)
    hi = np.searchsorted(cum, total // 2, side="right")
    return float((averages[lo] + averages[hi]) / 2.0)


def hodges_lehmann(
    x: Sequence[float],
    y: Sequence[float],
    *,
    paired: bool = True,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Hodges-Lehmann shift of x relative to y, with a percentile bootstrap CI.

    paired=True (ablations: the same items under two variants): the one-sample HL estimator of the paired
    differences d = x - y, i.e. the median of the Walsh averages (d_i + d_j) / 2 over i <= j. Items are
    resampled with replacement for the CI.
    paired=False: the two-sample estimator, the median of all differences x_i - y_j; each sample is
    resampled on its own.
    Returns (estimate, ci_low, ci_high).
    """
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    rng = np.random.default_rng(seed)
    if paired:
        if len(xa) != len(ya):
            raise ValueError("paired samples must have the same length")
        d = xa - ya
        values, inverse = np.unique(d, return_inverse=True)
        if len(values) <= 64:  # scores on a few levels (correct/incorrect, rubric points): count, don't pair
            est = _walsh_median_of_counts(values, np.bincount(inverse, minlength=len(values)))
            boots = [
                _walsh_median_of_counts(
                    values, np.bincount(inverse[rng.integers(0, len(d), len(d))], minlength=len(values))
                )
                for _ in range(n_resamples)
            ]
        else:
            est = _walsh_median(d)
            boots = [_walsh_median(d[rng.integers(0, len(d), len(d))]) for _ in range(n_resamples)]
    else:
        est = float(np.median(np.subtract.outer(xa, ya)))
        boots = [
            float(
                np.median(
                    np.subtract.outer(xa[rng.integers(0, len(xa), len(xa))], ya[rng.integers(0, len(ya), len(ya))])
                )
            )
            for _ in range(n_resamples)
        ]
    a = (1 - confidence) / 2
    lo, hi = np.percentile(boots, [100 * a, 100 * (1 - a)])
    return est, float(lo), float(hi)


@dataclass
class PairedResult:
    comparison: str
    n: int
    mean_diff: float
    shapiro_w: float | None
    shapiro_p: float | None
    wilcoxon_stat: float | None
    wilcoxon_p: float
    t_stat: float | None
    t_p: float | None
    cohens_d: float | None
    hl: float
    hl_low: float
    hl_high: float
    p_bonf: float | None = None
    p_holm: float | None = None
    q_bh: float | None = None

    def to_dict(self) -> dict[str, float | str | int | None]:
        return asdict(self)


def paired_pvalues(
    x: Sequence[float], y: Sequence[float]
) -> tuple[float | None, float, float | None, float | None, float | None]:
    """Two-sided Wilcoxon signed-rank (zero differences dropped) and paired t-test of x against y:
    (W, its p, t, its p, Cohen's d_z). All-zero differences give W None and p 1; no spread gives no t."""
    from scipy import stats

    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    d = xa - ya
    if np.any(d != 0):
        w = stats.wilcoxon(xa, ya)
        w_stat, w_p = float(w.statistic), float(w.pvalue)
    else:
        w_stat, w_p = None, 1.0
    sd = float(np.std(d, ddof=1)) if len(d) > 1 else 0.0
    if sd > 0:
        t = stats.ttest_rel(xa, ya)
        return w_stat, w_p, float(t.statistic), float(t.pvalue), float(np.mean(d) / sd)
    return w_stat, w_p, None, None, None


def paired_test(
    x: Sequence[float], y: Sequence[float], comparison: str = "", seed: int = 0, n_resamples: int = 2000
) -> PairedResult:
    """Shapiro-Wilk on the differences, Wilcoxon signed-rank (zero differences dropped, as scipy's default
    'wilcox'), paired t-test, Cohen's d_z = mean(d) / sd(d), and the paired HL shift with its CI."""
    from scipy import stats

    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    d = xa - ya
    n = len(d)
    sw = stats.shapiro(d) if n >= 3 and np.ptp(d) > 0 else None
    w_stat, w_p, t_stat, t_p, dz = paired_pvalues(xa.tolist(), ya.tolist())
    hl, lo, hi = hodges_lehmann(xa.tolist(), ya.tolist(), paired=True, seed=seed, n_resamples=n_resamples)
    return PairedResult(
        comparison,
        n,
        float(np.mean(d)) if n else 0.0,
        float(sw.statistic) if sw else None,
        float(sw.pvalue) if sw else None,
        w_stat,
        w_p,
        t_stat,
        t_p,
        dz,
        hl,
        lo,
        hi,
    )


def adjust_family(results: list[PairedResult]) -> list[PairedResult]:
    """Fill in Bonferroni, Holm and BH across one family of comparisons (on the Wilcoxon p-values)."""
    p = [r.wilcoxon_p for r in results]
    for r, b, h, q in zip(results, bonferroni(p), holm(p), benjamini_hochberg(p)):
        r.p_bonf, r.p_holm, r.q_bh = b, h, q
    return results
