"""Non-inferiority of a variant against its reference on the items both scored.

The difference is variant minus reference of a per-item statistic (the mean by default), signed so that
positive is better. Its 95% CI is a seeded paired bootstrap (items resampled, the same draw for both runs).
The verdict reads the CI against the margin: non-inferior when the lower bound is above -margin, inferior
when the upper bound is below it, otherwise inconclusive, with the items a CI of the observed spread would
need to decide. The one-sided non-inferiority p is the bootstrap share at or below -margin; the two-sided
Wilcoxon and t tests come from stats.paired_pvalues, and Holm adjusts each across its family.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from .stats import hodges_lehmann, holm, paired_pvalues

Statistic = Callable[[np.ndarray], float]
NON_INFERIOR, INFERIOR, INCONCLUSIVE = "non-inferior", "inferior", "inconclusive"
_Z = 1.959963984540054  # the normal 97.5% quantile
HL_MAX_ITEMS = 300  # the Walsh averages grow as n^2: past this HL's bootstrap costs seconds per comparison


@dataclass
class NonInferiority:
    n: int
    margin: float
    estimate: float | None  # variant minus reference, positive = better
    ci_low: float | None
    ci_high: float | None
    p_noninferiority: float | None  # one-sided, H0: difference <= -margin
    verdict: str
    items_needed: int | None = None  # inconclusive only: items a CI of the observed spread needs to decide
    hl: float | None = None
    hl_low: float | None = None
    hl_high: float | None = None
    wilcoxon_p: float | None = None
    t_p: float | None = None
    p_noninferiority_holm: float | None = None
    wilcoxon_p_holm: float | None = None

    def to_dict(self) -> dict[str, float | int | str | None]:
        return asdict(self)


def verdict(ci_low: float, ci_high: float, margin: float) -> str:
    if ci_low > -margin:
        return NON_INFERIOR
    if ci_high < -margin:
        return INFERIOR
    return INCONCLUSIVE


def items_needed(estimate: float, ci_low: float, ci_high: float, n: int, margin: float) -> int | None:
    """Items for a 95% CI of the observed per-item spread to clear -margin on the estimate's side (None: the
    estimate sits on -margin, or there is no spread, so no number of items decides)."""
    gap = abs(estimate + margin)
    se = (ci_high - ci_low) / (2 * _Z)
    if gap == 0 or se == 0:
        return None
    return max(n + 1, math.ceil(n * (_Z * se / gap) ** 2))


def _mean(a: np.ndarray) -> float:
    return float(np.mean(a))


def _boot_differences(x: np.ndarray, y: np.ndarray, stat: Statistic, n_resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = len(x)
    out = np.empty(n_resamples)
    for start in range(0, n_resamples, 500):  # index matrices in chunks: memory stays bounded
        idx = rng.integers(0, n, size=(min(500, n_resamples - start), n))
        if stat is _mean:
            out[start : start + len(idx)] = (x[idx] - y[idx]).mean(axis=1)
        else:
            out[start : start + len(idx)] = [stat(x[i]) - stat(y[i]) for i in idx]
    return out


def compare(
    variant: Sequence[float],
    reference: Sequence[float],
    margin: float,
    *,
    statistic: Statistic | None = None,
    higher_is_better: bool = True,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> NonInferiority:
    """variant[i] and reference[i] score the same item. margin > 0, in the statistic's units."""
    if margin <= 0:
        raise ValueError(f"the margin must be positive, got {margin}")
    stat = statistic or _mean
    sign = 1.0 if higher_is_better else -1.0
    x, y = sign * np.asarray(variant, dtype=float), sign * np.asarray(reference, dtype=float)
    if len(x) != len(y):
        raise ValueError("paired samples must have the same length")
    n = len(x)
    if n < 2:
        return NonInferiority(n, margin, None, None, None, None, INCONCLUSIVE)
    est = stat(x) - stat(y)
    boots = _boot_differences(x, y, stat, n_resamples, seed)
    a = (1 - confidence) / 2
    lo, hi = (float(v) for v in np.percentile(boots, [100 * a, 100 * (1 - a)]))
    p_ni = (1 + int(np.sum(boots <= -margin))) / (n_resamples + 1)
    word = verdict(lo, hi, margin)
    res = NonInferiority(
        n,
        margin,
        float(est),
        lo,
        hi,
        p_ni,
        word,
        items_needed(est, lo, hi, n, margin) if word == INCONCLUSIVE else None,
    )
    _, res.wilcoxon_p, _, res.t_p, _ = paired_pvalues(x.tolist(), y.tolist())
    if stat is _mean and n <= HL_MAX_ITEMS and len(np.unique(x - y)) > 3:
        # A shift estimate fits graded scores; on 0/1 scores the Walsh averages are mostly 0 and say nothing.
        res.hl, res.hl_low, res.hl_high = hodges_lehmann(
            x.tolist(), y.tolist(), paired=True, seed=seed, n_resamples=min(n_resamples, 1000)
        )
    return res


def adjust(family: list[NonInferiority]) -> list[NonInferiority]:
    """Holm across one family (a model's variants in one task setting): the one-sided and the Wilcoxon p."""
    tested = [r for r in family if r.p_noninferiority is not None]
    for r, p in zip(tested, holm([r.p_noninferiority for r in tested])):  # type: ignore[misc]
        r.p_noninferiority_holm = p
    for r, p in zip(tested, holm([r.wilcoxon_p for r in tested])):  # type: ignore[misc]
        r.wilcoxon_p_holm = p
    return family
