"""Paired tests for ablations (LegalEval-Q sections 5.1.2-5.1.4): normality, Wilcoxon, t, effect sizes,
multiple-comparison adjustments and the Hodges-Lehmann shift with a bootstrap CI.

scipy supplies the test distributions; the adjustments and the HL estimator are written out here (and
checked against hand-computed cases and scipy/statsmodels-style references in the tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel

from offline_eval.runtime.i18n import kept

from .bootstrap import MEAN, MIN_CLUSTERS, Clusters, bootstrap_p, canonical, percentile, resample, weights
from .paired import PairedKind, mcnemar_exact, paired_binary, paired_design_effect

# Why a paired test gives no p or design effect (PairedResult.undefined), stored in English (i18n.said shows it).
UNDEFINED = (
    kept("one cluster: no cluster bootstrap (p, HL CI) and no design effect"),
    kept("n too small: {n} clusters; a design effect needs at least {least}"),
)


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


def _walsh_medians(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The median of the Walsh averages of samples given as distinct values and, per row, their counts: the same
    number as the median over every pair i <= j of the sample's items, in O(k^2) for k distinct values instead of
    O(n^2) (0/1 scores give k <= 3). counts: (samples, k); one median per sample."""
    c = np.atleast_2d(np.asarray(counts, dtype=np.float64))
    i, j = np.triu_indices(len(values))
    averages = (values[i] + values[j]) / 2.0
    order = np.argsort(averages, kind="stable")
    averages, i, j = averages[order], i[order], j[order]
    out = np.empty(len(c))
    step = max(1, 2_000_000 // max(len(i), 1))  # rows at a time: (rows, pairs) floats stay about 16 MB
    for start in range(0, len(c), step):
        part = c[start : start + step]
        pairs = np.where(i == j, part[:, i] * (part[:, i] + 1) / 2, part[:, i] * part[:, j])
        cum = np.cumsum(pairs, axis=1)
        total = cum[:, -1:]
        lo = np.argmax(cum > (total - 1) // 2, axis=1)  # 0-based positions of the middle element(s)
        hi = np.argmax(cum > total // 2, axis=1)
        out[start : start + step] = (averages[lo] + averages[hi]) / 2.0
    return out


def cluster_hodges_lehmann(
    d: np.ndarray, clusters: Clusters, *, n_resamples: int = 2000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """The one-sample HL estimator of paired differences d (the median of the Walsh averages), with a percentile
    CI that resamples clusters: each resample's items are counted per distinct difference, so a resample costs
    O(k^2) for k distinct values, whatever the number of items."""
    values, inverse = np.unique(np.asarray(d, dtype=float), return_inverse=True)
    counts = np.zeros((clusters.n, len(values)))
    np.add.at(counts, (clusters.index, inverse), 1)
    (counts,) = canonical(counts)  # the draws depend on the clusters' contents, not on the items' order
    est = float(_walsh_medians(values, counts.sum(axis=0))[0])
    boots = np.concatenate([_walsh_medians(values, w @ counts) for w in weights(clusters.n, n_resamples, seed)])
    lo, hi = percentile(boots, confidence)
    return est, lo, hi


def hodges_lehmann(
    x: Sequence[float],
    y: Sequence[float],
    *,
    paired: bool = True,
    clusters: Clusters | None = None,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Hodges-Lehmann shift of x relative to y, with a percentile bootstrap CI.

    paired=True (ablations: the same items under two variants): the one-sample HL estimator of the paired
    differences d = x - y, i.e. the median of the Walsh averages (d_i + d_j) / 2 over i <= j. Clusters of items
    (each item its own by default) are resampled with replacement for the CI.
    paired=False: the two-sample estimator, the median of all differences x_i - y_j; each sample is
    resampled on its own.
    Returns (estimate, ci_low, ci_high).
    """
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if paired:
        if len(xa) != len(ya):
            raise ValueError("paired samples must have the same length")
        cl = clusters or Clusters.singletons(len(xa))
        return cluster_hodges_lehmann(xa - ya, cl, n_resamples=n_resamples, confidence=confidence, seed=seed)
    rng = np.random.default_rng(seed)
    est = float(np.median(np.subtract.outer(xa, ya)))
    boots = [
        float(
            np.median(np.subtract.outer(xa[rng.integers(0, len(xa), len(xa))], ya[rng.integers(0, len(ya), len(ya))]))
        )
        for _ in range(n_resamples)
    ]
    lo, hi = percentile(np.asarray(boots), confidence)
    return est, lo, hi


class PairedResult(BaseModel):
    comparison: str
    n: int
    mean_diff: float
    test: str  # mcnemar (0/1 outcomes on both sides, exact) or wilcoxon (graded scores): two-sided, no difference
    p: float  # that test's p; the family's adjustments are of this p
    # The cluster bootstrap's two-sided p of no mean difference, beside it; None (undefined) with one cluster.
    bootstrap_p: float | None
    n_clusters: int
    # Clustered over independent-items variance of the mean difference; None (undefined) with fewer than
    # MIN_CLUSTERS clusters of several items.
    design_effect: float | None
    hl: float
    hl_low: float | None  # None (undefined) with one cluster
    hl_high: float | None
    undefined: str | None = None  # why bootstrap_p, design_effect or the HL CI is None
    discordant: list[int] | None = None  # mcnemar: [first right only, second right only]
    # graded scores only
    shapiro_w: float | None = None
    shapiro_p: float | None = None
    wilcoxon_stat: float | None = None
    wilcoxon_p: float | None = None
    t_stat: float | None = None
    t_p: float | None = None
    cohens_d: float | None = None
    p_bonf: float | None = None
    p_holm: float | None = None
    q_bh: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()


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
    x: Sequence[float],
    y: Sequence[float],
    comparison: str = "",
    seed: int = 0,
    n_resamples: int = 2000,
    clusters: Clusters | None = None,
    kind: PairedKind = None,
) -> PairedResult:
    """Two-sided paired tests of x against y on the same items, in `clusters` (each item its own by default):
    McNemar's exact test where both are right/wrong (`kind`, as the metric declares: paired.paired_binary), else the Wilcoxon signed-rank test (zero differences dropped, as
    scipy's default 'wilcox') with Shapiro-Wilk on the differences, the paired t-test and Cohen's d_z =
    mean(d) / sd(d); for both, the cluster bootstrap's p of no mean difference and the paired HL shift with a
    cluster-bootstrap CI."""
    from scipy import stats

    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    d = xa - ya
    n = len(d)
    cl = clusters or Clusters.singletons(n)
    boots = resample(MEAN.of, MEAN.columns(d), cl, n_resamples, seed)
    hl, lo, hi = cluster_hodges_lehmann(d, cl, seed=seed, n_resamples=n_resamples)
    res = PairedResult(
        comparison=comparison,
        n=n,
        mean_diff=float(np.mean(np.sort(d))) if n else 0.0,  # summed in one order, whatever the items'
        test="mcnemar",
        p=1.0,
        bootstrap_p=bootstrap_p(boots),
        n_clusters=cl.n,
        design_effect=round(float(paired_design_effect(d, cl)), 6),
        hl=hl,
        hl_low=lo,
        hl_high=hi,
    )
    if cl.n < 2 and n > 1:  # every resample is the data itself
        res.bootstrap_p = res.design_effect = res.hl_low = res.hl_high = None
        res.undefined = UNDEFINED[0]
    elif cl.nested and cl.n < MIN_CLUSTERS:
        res.design_effect = None
        res.undefined = UNDEFINED[1].format(n=cl.n, least=MIN_CLUSTERS)
    if paired_binary(kind, xa, ya):
        res.p, res.discordant = mcnemar_exact(xa, ya), [int(np.sum(d > 0)), int(np.sum(d < 0))]
        return res
    sw = stats.shapiro(d) if n >= 3 and np.ptp(d) > 0 else None
    res.test = "wilcoxon"
    res.wilcoxon_stat, res.wilcoxon_p, res.t_stat, res.t_p, res.cohens_d = paired_pvalues(xa.tolist(), ya.tolist())
    res.p = res.wilcoxon_p
    if sw:
        res.shapiro_w, res.shapiro_p = float(sw.statistic), float(sw.pvalue)
    return res


def adjust_family(results: list[PairedResult]) -> list[PairedResult]:
    """Fill in Bonferroni, Holm and BH across one family of comparisons (on each comparison's test p)."""
    p = [r.p for r in results]
    for r, b, h, q in zip(results, bonferroni(p), holm(p), benjamini_hochberg(p)):
        r.p_bonf, r.p_holm, r.q_bh = b, h, q
    return results
