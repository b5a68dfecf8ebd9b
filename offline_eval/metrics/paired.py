"""Paired binary outcomes: two runs' correct/incorrect on the same items.

The difference of the two proportions gets Tango's (1998) score interval, which keeps an honest width at small n
and with no discordant pair (4 identical items: about +-0.49, where a bootstrap collapses to [0, 0]). Where the
items come in clusters (the statements of one exam question), the interval is widened by the estimated design
effect, never narrowed by it: the counts are divided by it before the score interval is solved (Rao and Scott
1992), the design effect being the ratio of the cluster-robust variance of the mean difference (Obuchowski
1998's clustered McNemar variance) to its variance with the items taken as independent. The two-sided test of no
difference is McNemar's exact test on the discordant pairs.

Tango T. (1998). Equivalence test and confidence interval for the difference in proportions for the paired-sample
design. Statistics in Medicine 17:891-908.
Obuchowski N.A. (1998). On the comparison of correlated proportions for clustered data. Statistics in Medicine
17:1495-1507.
Rao J.N.K., Scott A.J. (1992). A simple method for the analysis of clustered binary data. Biometrics 48:577-585.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from .bootstrap import Clusters

_BISECTIONS = 60  # each halves the bracket: 2^-60 of [-1, 1]


def _z(confidence: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(1 - (1 - confidence) / 2))


def tango_statistic(b: np.ndarray, c: np.ndarray, n: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Tango's score statistic for H0: p1 - p2 = delta, from the discordant counts b (first run right, second
    wrong) and c (the reverse) of n pairs; decreasing in delta. Counts may be fractional (design-effect scaled)."""
    a2, bq = 2 * n, -b - c + (2 * n - b + c) * delta
    cq = -c * delta * (1 - delta)
    q21 = (np.sqrt(np.maximum(bq * bq - 4 * a2 * cq, 0.0)) - bq) / (2 * a2)  # restricted MLE of the (0, 1) cell
    var = n * np.maximum(2 * q21 + delta * (1 - delta), 0.0)
    num = b - c - n * delta
    with np.errstate(invalid="ignore", divide="ignore"):
        t = num / np.sqrt(var)
    return np.where(var > 0, t, np.where(num > 0, np.inf, np.where(num < 0, -np.inf, 0.0)))


def tango_interval(b: object, c: object, n: object, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Tango's score interval for p1 - p2, vectorised over arrays of counts: the deltas whose score statistic is
    within +-z, found by bisection."""
    z = _z(confidence)
    bb, cc, nn = (np.asarray(v, dtype=float) for v in (b, c, n))
    est = (bb - cc) / nn
    lo = [np.full_like(est, -1.0), est.copy()]  # the lower limit lies in [-1, est], the upper in [est, 1]
    hi = [est.copy(), np.full_like(est, 1.0)]
    for _ in range(_BISECTIONS):
        m = (lo[0] + lo[1]) / 2
        above = tango_statistic(bb, cc, nn, m) > z
        lo = [np.where(above, m, lo[0]), np.where(above, lo[1], m)]
        m = (hi[0] + hi[1]) / 2
        above = tango_statistic(bb, cc, nn, m) > -z
        hi = [np.where(above, m, hi[0]), np.where(above, hi[1], m)]
    return (lo[0] + lo[1]) / 2, (hi[0] + hi[1]) / 2


def paired_design_effect(d: ArrayLike, clusters: Clusters) -> np.ndarray:
    """Cluster-robust over independent-items variance of the mean of d = x - y (both with their small-sample
    factors, K/(K-1) and N/(N-1)), at least 1; 1 where d does not vary or every item is its own cluster; inf
    with one cluster of several items. Vectorised over leading axes: d is (..., items)."""
    da = np.asarray(d, dtype=float)
    n, k = da.shape[-1], clusters.n
    if k == n or n < 2:
        return np.ones(da.shape[:-1])
    if k < 2:
        return np.full(da.shape[:-1], np.inf)
    member = np.zeros((n, k))
    member[np.arange(n), clusters.index] = 1.0
    mean = da.mean(axis=-1, keepdims=True)
    totals = da @ member  # (..., k)
    v_cluster = k / (k - 1) * np.sum((totals - member.sum(axis=0) * mean) ** 2, axis=-1)
    v_items = n / (n - 1) * np.sum((da - mean) ** 2, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(v_items > 0, v_cluster / np.where(v_items > 0, v_items, 1.0), 1.0)
    return np.maximum(ratio, 1.0)


def guarded_design_effect(d: ArrayLike, clusters: Clusters) -> np.ndarray:
    """paired_design_effect with two pseudo-clusters of the mean cluster size among the clusters, one whose items
    all favour the first run and one the second (the worst case, ICC 1): where few clusters disagree, or none,
    the estimate is not the 1 that "no difference varies" would give, but near the mean cluster size, so a rare
    question that the two runs answer differently cannot hide behind the many they answer alike. Where many
    clusters disagree, the two weigh little. 1 where no cluster holds several items; inf with one cluster."""
    da = np.asarray(d, dtype=float)
    n = da.shape[-1]
    if not clusters.nested or clusters.n < 2:
        return paired_design_effect(da, clusters)
    size = max(1, round(n / clusters.n))
    pad = np.broadcast_to(np.repeat([1.0, -1.0], size), (*da.shape[:-1], 2 * size))
    index = np.concatenate([clusters.index, np.repeat([clusters.n, clusters.n + 1], size)])
    return paired_design_effect(np.concatenate([da, pad], axis=-1), Clusters(index, clusters.n + 2))


def clustered_interval(
    x: ArrayLike, y: ArrayLike, clusters: Clusters, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, low, high, design effect) of x - y for paired 0/1 outcomes, vectorised over leading axes
    ((..., items), one cluster structure for all): Tango's interval on the discordant counts and the number of
    pairs, each divided by the (guarded) design effect."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = xa.shape[-1]
    b = np.sum((xa == 1) & (ya == 0), axis=-1)
    c = np.sum((xa == 0) & (ya == 1), axis=-1)
    f = guarded_design_effect(xa - ya, clusters)
    finite = np.isfinite(f)
    g = np.where(finite, f, 1.0)
    lo, hi = tango_interval(b / g, c / g, n / g, confidence)
    # one cluster: nothing tells the items' agreement apart from their question's
    return (b - c) / n, np.where(finite, lo, -1.0), np.where(finite, hi, 1.0), f


def mcnemar_exact(x: ArrayLike, y: ArrayLike) -> float:
    """Two-sided exact McNemar p for paired 0/1 outcomes: the binomial test of the discordant pairs at 1/2."""
    from scipy.stats import binomtest

    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n10, n01 = int(np.sum((xa == 1) & (ya == 0))), int(np.sum((xa == 0) & (ya == 1)))
    return 1.0 if n10 + n01 == 0 else float(binomtest(n10, n10 + n01, 0.5).pvalue)


@dataclass(frozen=True)
class PairedBinary:
    """x - y over paired 0/1 outcomes, with its clustered score interval."""

    estimate: float
    low: float
    high: float
    b: int  # x right, y wrong
    c: int  # x wrong, y right
    n: int
    n_clusters: int
    design_effect: float

    def p_above(self, delta: float) -> float:
        """One-sided p of H0: x - y <= delta (the non-inferiority test at delta = -margin), from the same
        design-effect-scaled score statistic as the interval, so p < (1 - confidence) / 2 exactly when the
        interval's lower limit is above delta."""
        from scipy.stats import norm

        f = self.design_effect
        t = tango_statistic(np.array(self.b / f), np.array(self.c / f), np.array(self.n / f), np.array(delta))
        return float(norm.sf(float(t)))

    def items_to_decide(self, delta: float, confidence: float = 0.95, most: int = 10**7) -> int | None:
        """The fewest items whose score interval, at these discordance rates and this design effect, would not
        contain delta (None: the estimate sits on delta, or not even `most` items would do)."""
        if self.estimate == delta:
            return None

        def decided(m: int) -> bool:
            scale = m / self.n / self.design_effect
            lo, hi = tango_interval(self.b * scale, self.c * scale, m / self.design_effect, confidence)
            return bool(lo > delta or hi < delta)

        if not decided(most):
            return None
        lo, hi = self.n, most  # decided(hi) holds; find the first m in (lo, hi] where it does
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if decided(mid) else (mid, hi)
        return hi


# What one item's score is in a paired test, as its metric declares it (sections.Metric.paired): right or wrong
# (McNemar, Tango's interval) or graded (Wilcoxon, the cluster bootstrap). None: not declared, read off the values.
PairedKind = Literal["binary", "graded"] | None


def paired_binary(kind: PairedKind, *columns: ArrayLike) -> bool:
    """Whether a paired test treats these columns as right/wrong: never for a graded metric, even where its scores
    happen to be 0 and 1; for a binary one only where they are (an item's mean over k samples is graded)."""
    return kind != "graded" and is_binary(*columns)


def is_binary(*columns: ArrayLike) -> bool:
    arrays = [np.asarray(c, dtype=float) for c in columns]
    return all(a.size > 0 and set(np.unique(a).tolist()) <= {0.0, 1.0} for a in arrays)


def clustered_difference(
    x: ArrayLike, y: ArrayLike, clusters: Clusters | None = None, confidence: float = 0.95
) -> PairedBinary:
    """x - y for paired 0/1 outcomes of one comparison: Tango's interval on counts divided by the design effect."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    cl = clusters or Clusters.singletons(len(xa))
    est, lo, hi, f = clustered_interval(xa, ya, cl, confidence)
    b, c = int(np.sum((xa == 1) & (ya == 0))), int(np.sum((xa == 0) & (ya == 1)))
    return PairedBinary(float(est), float(lo), float(hi), b, c, len(xa), cl.n, float(f))
