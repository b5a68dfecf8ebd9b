"""Non-inferiority of a variant against its reference on the items both scored.

The difference is variant minus reference of a per-item statistic (the mean by default), signed so that
positive is better. Its 95% CI depends on what the items hold:
- 0/1 outcomes on both sides (JBE-QA correct/incorrect): Tango's score interval for paired proportions,
  widened by the clusters' design effect (metrics.paired). It keeps an honest width with few items or no
  discordant pair; McNemar's exact test is the two-sided test of no difference. Where items share clusters,
  fewer than MIN_CLUSTERS of them give no design effect to trust, so no interval and no verdict.
- graded scores: a percentile bootstrap that resamples clusters, drawn once for both runs, with two
  pseudo-clusters at the worst differences the scores allow among the draws, so that a few differing clusters
  cannot pin a bound to 0. With fewer than MIN_CLUSTERS clusters, or a zero-width interval, it gives no interval
  and the verdict is inconclusive, with the reason; the Wilcoxon signed-rank and paired t tests are the
  two-sided tests.
One cluster: no bootstrap p, no design effect, no interval (every resample is the data itself).
The verdict reads the CI against the margin: non-inferior when the lower bound is above -margin, inferior when
the upper bound is below it, otherwise inconclusive, with the items an interval of the observed (clustered)
spread would need to decide. The cluster bootstrap's own p-values stand beside the score test's; Holm adjusts
the one-sided and the two-sided p across a family.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel

from offline_eval.runtime.i18n import kept

from .bootstrap import MEAN, MIN_CLUSTERS, Bootstrapped, Clusters, bootstrap_p, canonical, percentile, trusted, weights
from .paired import PairedKind, clustered_difference, mcnemar_exact, paired_binary
from .stats import cluster_hodges_lehmann, holm, paired_pvalues

NON_INFERIOR, INFERIOR, INCONCLUSIVE = "non-inferior", "inferior", "inconclusive"
SCORE, BOOTSTRAP = "tango score, clustered", "cluster bootstrap"
# Why a verdict is inconclusive (NonInferiority.reason), stored in English; the report and compare show them in the
# reader's language (offline_eval.runtime.i18n.said reads the fields back).
ONE_CLUSTER = kept("one cluster: the items cannot be told apart from their question (no p, design effect or interval)")
FEWER_THAN_2 = kept("fewer than 2 shared items")
DEFF_TOO_FEW = kept("n too small: {n} clusters; a design effect (and the interval it widens) needs at least {least}")
BOOTSTRAP_TOO_FEW = kept("n too small: {n} clusters, a bootstrap interval needs at least {least}")
NO_SPREAD = kept("no spread: every resample gives the same difference (a zero-width interval)")
CONTAINS = kept("the {level}% CI [{low}, {high}] contains -{margin}")
BOTH_NO_SPREAD = kept("both calibrated estimates have no spread")
_Z = 1.959963984540054  # the normal 97.5% quantile
HL_MAX_ITEMS = 300  # the Walsh averages grow as n^2: past this HL's bootstrap costs seconds per comparison


class NonInferiority(BaseModel):
    n: int
    margin: float
    estimate: float | None  # variant minus reference, positive = better
    ci_low: float | None  # None: no interval that can be trusted (see reason)
    ci_high: float | None
    p_noninferiority: float | None  # one-sided, H0: difference <= -margin, from the interval's own method
    verdict: str
    method: str | None = None  # SCORE or BOOTSTRAP
    reason: str | None = None  # why the verdict is inconclusive
    n_clusters: int | None = None
    design_effect: float | None = None  # variance ratio, clustered over items as independent
    items_needed: int | None = None  # inconclusive only: items a CI of the observed spread needs to decide
    paired_test: str | None = None  # mcnemar (0/1 outcomes) or wilcoxon: two-sided, H0: no difference
    paired_p: float | None = None
    bootstrap_p: float | None = None  # the cluster bootstrap's two-sided p of no difference, beside paired_p
    t_p: float | None = None
    hl: float | None = None
    hl_low: float | None = None
    hl_high: float | None = None
    p_noninferiority_holm: float | None = None
    paired_p_holm: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()


def _result(n: int, margin: float, estimate: float | None, **kw: Any) -> NonInferiority:
    """Inconclusive until an interval says otherwise."""
    return NonInferiority(
        n=n,
        margin=margin,
        estimate=estimate,
        ci_low=None,
        ci_high=None,
        p_noninferiority=None,
        verdict=INCONCLUSIVE,
        **kw,
    )


def verdict(ci_low: float, ci_high: float, margin: float) -> str:
    if ci_low > -margin:
        return NON_INFERIOR
    if ci_high < -margin:
        return INFERIOR
    return INCONCLUSIVE


def items_needed(estimate: float, se: float, n: int, margin: float) -> int | None:
    """Items for a 95% CI of standard error `se` at n items (the clustered one: it holds the design effect),
    shrinking as 1/sqrt(n), to clear -margin on the estimate's side (None: the estimate sits on -margin, or
    there is no spread)."""
    gap = abs(estimate + margin)
    if gap == 0 or se == 0:
        return None
    return max(n + 1, math.ceil(n * (_Z * se / gap) ** 2))


def _boot_differences(
    x: np.ndarray,
    y: np.ndarray,
    stat: Bootstrapped,
    clusters: Clusters,
    n_resamples: int,
    seed: int,
    worst: tuple[float, float] | None = None,
) -> np.ndarray:
    """The statistic's difference on every cluster resample, the same clusters drawn for both runs. `worst`:
    the lowest and highest score; two pseudo-clusters of the mean cluster size join the draws, one where the
    variant scores the lowest and the reference the highest on every item, one the reverse."""
    sx, sy = canonical(clusters.sums(stat.of_scores(x)), clusters.sums(stat.of_scores(y)))
    if worst is not None:
        size = len(x) / clusters.n
        low, high = (size * stat.of_scores(np.array([v])) for v in worst)
        sx, sy = np.vstack([sx, low, high]), np.vstack([sy, high, low])
    return np.concatenate([stat.of(w @ sx) - stat.of(w @ sy) for w in weights(len(sx), n_resamples, seed)])


def compare(
    variant: Sequence[float],
    reference: Sequence[float],
    margin: float,
    *,
    clusters: Sequence[str | None] | None = None,
    statistic: Bootstrapped | None = None,
    higher_is_better: bool = True,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    bounds: tuple[float, float] | None = None,
    kind: PairedKind = None,
) -> NonInferiority:
    """variant[i] and reference[i] score the same item, in cluster clusters[i] (None: each item its own).
    margin > 0, in the statistic's units. bounds: the range a per-item score can take (None: the range the
    scores of both runs span), for the graded interval's worst-case pseudo-clusters. kind: what an item's score is, as
    its metric declares (paired.PairedKind; the framework always passes it)."""
    if margin <= 0:
        raise ValueError(f"the margin must be positive, got {margin}")
    x, y = np.asarray(variant, dtype=float), np.asarray(reference, dtype=float)
    if len(x) != len(y):
        raise ValueError("paired samples must have the same length")
    n = len(x)
    cl = Clusters.of(list(clusters)) if clusters is not None else Clusters.singletons(n)
    if len(cl.index) != n:
        raise ValueError("one cluster label per item")
    if n < 2:
        return _result(n, margin, None, reason=FEWER_THAN_2)
    mean = statistic is None or statistic.is_mean
    binary = mean and paired_binary(kind, x, y)
    if binary and not higher_is_better:
        x, y = 1 - x, 1 - y
    elif not higher_is_better:
        x, y = -x, -y
    stat = statistic or MEAN
    est = stat(x) - stat(y)
    boots = _boot_differences(x, y, stat, cl, n_resamples, seed)
    res = _result(n, margin, est, n_clusters=cl.n)
    if cl.n < 2:  # every resample is the data itself: no p, no design effect, no interval
        res.method, res.paired_test = (SCORE, "mcnemar") if binary else (BOOTSTRAP, "wilcoxon")
        res.paired_p = mcnemar_exact(x, y) if binary else paired_pvalues(x.tolist(), y.tolist())[1]
        res.reason = ONE_CLUSTER
        return res
    res.bootstrap_p = bootstrap_p(boots)
    if binary:
        res.method, res.paired_test, res.paired_p = SCORE, "mcnemar", mcnemar_exact(x, y)
        if cl.nested and cl.n < MIN_CLUSTERS:
            res.reason = DEFF_TOO_FEW.format(n=cl.n, least=MIN_CLUSTERS)
            return res
        d = clustered_difference(x, y, cl, confidence)
        res.ci_low, res.ci_high, res.design_effect = d.low, d.high, round(d.design_effect, 6)
        res.p_noninferiority = d.p_above(-margin)
        res.verdict = verdict(d.low, d.high, margin)
        if res.verdict == INCONCLUSIVE:
            res.reason = _contains(d.low, d.high, margin, confidence)
            res.items_needed = d.items_to_decide(-margin, confidence)
        return res
    res.method, res.paired_test = BOOTSTRAP, "wilcoxon"
    _, res.paired_p, _, res.t_p, _ = paired_pvalues(x.tolist(), y.tolist())
    res.design_effect = _bootstrap_design_effect(x, y, stat, cl, boots, n_resamples, seed)
    spread = trusted(boots, cl.n, confidence)
    se = float(np.std(boots))  # of the cluster bootstrap: it holds the design effect
    if spread.low is None:
        res.reason = (
            BOOTSTRAP_TOO_FEW.format(n=cl.n, least=MIN_CLUSTERS) if spread.reason == "n too small" else NO_SPREAD
        )
        res.items_needed = items_needed(est, se, n, margin) if spread.reason == "n too small" else None
        return res
    # The interval's draws hold two pseudo-clusters at the worst differences the scores allow, so that a few
    # differing clusters cannot pin a bound to 0 (or near it): see docs/statistics.md.
    seen = (float(min(x.min(), y.min())), float(max(x.max(), y.max())))
    if bounds is None:
        worst = seen
    else:  # signed as the scores were above, and never narrower than what they span
        low, high = bounds if higher_is_better else (-bounds[1], -bounds[0])
        worst = (min(low, seen[0]), max(high, seen[1]))
    guarded = _boot_differences(x, y, stat, cl, n_resamples, seed, worst)
    lo, hi = percentile(guarded, confidence)
    res.ci_low, res.ci_high = lo, hi
    res.p_noninferiority = (1 + int(np.sum(guarded <= -margin))) / (n_resamples + 1)
    if mean and n <= HL_MAX_ITEMS and len(np.unique(x - y)) > 3:
        # A shift estimate fits graded scores; on 0/1 scores the Walsh averages are mostly 0 and say nothing.
        res.hl, res.hl_low, res.hl_high = cluster_hodges_lehmann(
            x - y, cl, seed=seed, n_resamples=min(n_resamples, 1000), confidence=confidence
        )
    res.verdict = verdict(lo, hi, margin)
    if res.verdict == INCONCLUSIVE:
        res.reason = _contains(lo, hi, margin, confidence)
        res.items_needed = items_needed(est, float(np.std(guarded)), n, margin)
    return res


def _contains(low: float, high: float, margin: float, confidence: float) -> str:
    return CONTAINS.format(
        level=f"{100 * confidence:.0f}", low=f"{low:+.3f}", high=f"{high:+.3f}", margin=f"{margin:g}"
    )


def _bootstrap_design_effect(
    x: np.ndarray,
    y: np.ndarray,
    statistic: Bootstrapped,
    clusters: Clusters,
    boots: np.ndarray,
    n_resamples: int,
    seed: int,
) -> float | None:
    if not clusters.nested:
        return 1.0
    if clusters.n < MIN_CLUSTERS:
        return None
    items = _boot_differences(x, y, statistic, Clusters.singletons(len(x)), n_resamples, seed)
    vi = float(np.var(items))
    return round(float(np.var(boots)) / vi, 6) if vi > 0 else 1.0


def adjust(family: list[NonInferiority]) -> list[NonInferiority]:
    """Holm across one family (a model's variants in one task setting): the one-sided and the two-sided p."""
    tested = [r for r in family if r.p_noninferiority is not None]
    for r, p in zip(tested, holm([r.p_noninferiority for r in tested])):  # type: ignore[misc]
        r.p_noninferiority_holm = p
    paired = [r for r in family if r.paired_p is not None]
    for r, p in zip(paired, holm([r.paired_p for r in paired])):  # type: ignore[misc]
        r.paired_p_holm = p
    return family


CALIBRATED = "difference of two independent PPI++ estimates (normal)"


def from_difference(
    paired: NonInferiority,
    run: tuple[float, float],
    reference: tuple[float, float],
    margin: float,
    higher_is_better: bool = True,
) -> NonInferiority:
    """A verdict on calibrated estimates: `run` and `reference` are (estimate, standard error) of two independent
    estimates (PPI++ on each run's own labels), so the difference's standard error is the root of the sum of their
    squares and its 95% interval is normal. The paired test's n stays; its judge-scale fields are dropped."""
    from scipy.stats import norm

    sign = 1.0 if higher_is_better else -1.0
    est = sign * (run[0] - reference[0])
    se = math.hypot(run[1], reference[1])
    if se == 0:
        return _result(paired.n, margin, est, method=CALIBRATED, reason=BOTH_NO_SPREAD)
    low, high = est - _Z * se, est + _Z * se
    return NonInferiority(
        n=paired.n,
        margin=margin,
        estimate=est,
        ci_low=low,
        ci_high=high,
        p_noninferiority=float(norm.sf((est + margin) / se)),
        verdict=verdict(low, high, margin),
        method=CALIBRATED,
        items_needed=None,
    )
