"""Percentile bootstrap CIs that resample clusters, seeded.

Items that share a source (the statements of one bar-exam question) are correlated, so a bootstrap that draws
items independently makes every interval too narrow. Here the unit drawn is the cluster: each resample draws K
clusters with replacement out of K, and the statistic is recomputed on the pooled items of the drawn clusters.
A statistic is a function of column sums (correct and total; tp, fp and fn; n, sum and sum of squares), so a
resample is a weighted sum of the clusters' own sums and a thousand resamples are one matrix product. With
every item its own cluster the draws are exactly those of an item bootstrap with the same seed.

The clusters are put in one canonical order (by their sums) before the draws, and each cluster's sums are added
up in one order, so every interval depends on the records, never on the order a results file lists them in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

# 100,000 resamples already pin a 95% percentile to about +-0.001; more only costs time (and memory).
MAX_BOOTSTRAP = 100_000
# Below this many clusters a percentile bootstrap is not trusted: its interval is not printed, and a verdict
# drawn from it is "inconclusive" (its coverage falls off; see docs/statistics.md).
MIN_CLUSTERS = 20
_CHUNK = 1000

SumStatistic = Callable[[np.ndarray], np.ndarray]  # (resamples, columns) of sums -> (resamples,) values


@dataclass(frozen=True)
class Clusters:
    """Which cluster each item belongs to: `index[i]` numbers item i's cluster by first appearance."""

    index: np.ndarray
    n: int  # clusters
    n_unclustered: int = 0  # items that had no cluster label (each is then its own cluster)

    @classmethod
    def of(cls, labels: Sequence[str | None]) -> Clusters:
        """One label per item; None: the item has no cluster, and is its own."""
        ids: dict[object, int] = {}
        index = np.empty(len(labels), dtype=np.int64)
        for i, label in enumerate(labels):
            key: object = label if label is not None else (None, i)
            index[i] = ids.setdefault(key, len(ids))
        return cls(index, len(ids), sum(1 for x in labels if x is None))

    @classmethod
    def singletons(cls, n: int) -> Clusters:
        return cls(np.arange(n, dtype=np.int64), n)

    def sums(self, values: np.ndarray) -> np.ndarray:
        """(items, columns) -> (clusters, columns): each cluster's column sums, added in one order (by cluster,
        then by value) whatever the items' order, so that the sums are the same to the last bit."""
        v = np.asarray(values, dtype=float).reshape(len(self.index), -1)
        order = np.lexsort((*v.T[::-1], self.index))
        out = np.zeros((self.n, v.shape[1]))
        np.add.at(out, self.index[order], v[order])
        return out

    @property
    def nested(self) -> bool:
        """Whether some cluster holds several items: only then is a design effect estimated from the clusters."""
        return self.n < len(self.index)

    def subset(self, mask: np.ndarray) -> Clusters:
        """The clusters of the items where mask is true (renumbered)."""
        idx = self.index[mask]
        _, first = np.unique(idx, return_index=True)
        order = idx[np.sort(first)]
        renumber = np.empty(self.n, dtype=np.int64)
        renumber[order] = np.arange(len(order))
        return Clusters(renumber[idx], len(order))


def weights(n_clusters: int, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Chunks of (resamples, clusters) draw counts: how often each cluster is in each resample."""
    if not 0 < n_resamples <= MAX_BOOTSTRAP:
        raise ValueError(f"n_resamples must be in 1..{MAX_BOOTSTRAP}, got {n_resamples}")
    rng = np.random.default_rng(seed)
    for start in range(0, n_resamples, _CHUNK):  # in chunks: memory stays bounded
        b = min(_CHUNK, n_resamples - start)
        idx = rng.integers(0, n_clusters, size=(b, n_clusters))
        flat = (idx + (np.arange(b) * n_clusters)[:, None]).ravel()
        yield np.bincount(flat, minlength=b * n_clusters).reshape(b, n_clusters).astype(float)


def canonical(*sums: np.ndarray) -> list[np.ndarray]:
    """The clusters' sums (one or more (clusters, columns) arrays of the same clusters) in one order, by their
    values: which cluster a draw picks then depends on what the clusters hold, not on the order in which their
    items came (the resampled statistic is a function of the clusters' sums only)."""
    if not sums or len(sums[0]) < 2:
        return list(sums)
    key = np.round(np.hstack([s.reshape(len(s), -1) for s in sums]), 9)
    order = np.lexsort(key.T[::-1])
    return [s[order] for s in sums]


def resample(
    stat: SumStatistic, values: np.ndarray, clusters: Clusters, n_resamples: int = 1000, seed: int = 0
) -> np.ndarray:
    """The statistic on every cluster resample: (resamples,)."""
    (sums,) = canonical(clusters.sums(values))
    return np.concatenate([stat(w @ sums) for w in weights(clusters.n, n_resamples, seed)])


def percentile(boots: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    a = (1 - confidence) / 2
    lo, hi = np.percentile(boots, [100 * a, 100 * (1 - a)])
    return float(lo), float(hi)


@dataclass(frozen=True)
class Interval:
    """A clustered percentile interval, or why there is none (`low` and `high` None)."""

    low: float | None
    high: float | None
    n_clusters: int
    reason: str | None = None  # "n too small" (fewer than MIN_CLUSTERS) or "no spread" (a zero-width interval)


def trusted(boots: np.ndarray, n_clusters: int, confidence: float = 0.95) -> Interval:
    """The percentile interval, withheld where it cannot be trusted: too few clusters, or zero width."""
    if n_clusters < MIN_CLUSTERS:
        return Interval(None, None, n_clusters, "n too small")
    lo, hi = percentile(boots, confidence)
    if not hi - lo > 1e-12 * max(1.0, abs(lo), abs(hi)):  # rounding noise is no spread
        return Interval(None, None, n_clusters, "no spread")
    return Interval(lo, hi, n_clusters)


def design_effect(
    stat: SumStatistic,
    values: np.ndarray,
    clusters: Clusters,
    n_resamples: int,
    seed: int,
    clustered: np.ndarray | None = None,
) -> float | None:
    """The variance of the clustered bootstrap over that of the item bootstrap (same seed, same statistic):
    how much the clusters widen the statistic's uncertainty. 1.0 where every item is its own cluster; None
    (undefined) with fewer than MIN_CLUSTERS clusters of several items: one cluster has no variance between
    clusters at all, and a handful give a ratio that is noise. `clustered`: the clustered resamples, where
    already drawn."""
    if not clusters.nested:
        return 1.0
    if clusters.n < MIN_CLUSTERS:
        return None
    if clustered is None:
        clustered = resample(stat, values, clusters, n_resamples, seed)
    items = resample(stat, values, Clusters.singletons(len(clusters.index)), n_resamples, seed)
    vi = float(np.var(items))
    return float(np.var(clustered)) / vi if vi > 0 else 1.0


def bootstrap_p(boots: np.ndarray, null: float = 0.0) -> float:
    """Two-sided p of `null` from a bootstrap distribution: twice the smaller tail share (with the +1
    corrections that keep it above 0), capped at 1; the smallest level at which a percentile interval would
    leave `null` out."""
    n = len(boots)
    below = (1 + int(np.sum(boots <= null))) / (n + 1)
    above = (1 + int(np.sum(boots >= null))) / (n + 1)
    return min(1.0, 2 * min(below, above))


# ---- statistics of column sums


def mean_of(s: np.ndarray) -> np.ndarray:
    """Columns (sum, count): the mean."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(s[:, 1] > 0, s[:, 0] / np.where(s[:, 1] > 0, s[:, 1], 1), np.nan)


def f1_of(s: np.ndarray) -> np.ndarray:
    """Columns (tp, fp, fn): F1, 0 where undefined (as sklearn's zero_division=0)."""
    den = 2 * s[:, 0] + s[:, 1] + s[:, 2]
    return np.where(den > 0, 2 * s[:, 0] / np.where(den > 0, den, 1), 0.0)


def mean_columns(x: ArrayLike) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    return np.column_stack([a, np.ones_like(a)])


def f1_columns(gold: Sequence[bool], pred: Sequence[bool]) -> np.ndarray:
    g, p = np.asarray(gold, dtype=bool), np.asarray(pred, dtype=bool)
    return np.column_stack([g & p, ~g & p, g & ~p]).astype(float)


def moments_columns(x: ArrayLike) -> np.ndarray:
    """Columns (1, x, x^2): enough for the mean and the population std of any pooled resample."""
    a = np.asarray(x, dtype=float)
    return np.column_stack([np.ones_like(a), a, a * a])


def adj_score_of(s: np.ndarray) -> np.ndarray:
    """Columns (n, sum, sum of squares): AdjScore = mu^2 / (mu + sigma), sigma the population std."""
    n = np.where(s[:, 0] > 0, s[:, 0], 1)
    mu = s[:, 1] / n
    sigma = np.sqrt(np.maximum(s[:, 2] / n - mu * mu, 0.0))
    den = mu + sigma
    return np.where(den != 0, mu * mu / np.where(den != 0, den, 1), 0.0)


@dataclass(frozen=True)
class Bootstrapped:
    """A metric with a clustered interval, declared once: each scored item's sufficient statistics as a row
    (`columns` of the scored records, in their order), and the metric as a function of their summed columns (`of`),
    which is also its value unless the task's aggregate gives it (`given`: e.g. a mean of criterion means, not of
    item rows). `digits`: the places its value, interval and design effect are stored to.

    A metric of one number per item (`mean`, `of_items`) also knows that number (`item`, None where the item does
    not count) and the columns of those numbers (`item_columns`): where it is a task's paired metric, that is each
    item's score in the paired tests, and the statistic they compare (`__call__` over item scores)."""

    columns: Callable[[Sequence[Any]], np.ndarray]
    of: SumStatistic
    digits: int = 6
    given: bool = False
    item: Callable[[Any], float | None] | None = None
    item_columns: Callable[[ArrayLike], np.ndarray] | None = None

    def value(self, records: Sequence[Any]) -> float:
        return float(self.of(self.columns(records).sum(axis=0, keepdims=True))[0])

    def interval(
        self, records: Sequence[Any], clusters: Sequence[Any], n_resamples: int, seed: int
    ) -> tuple[Interval, int]:
        """This metric's clustered interval over `records` alone, each in the cluster its label in `clusters` names
        (for a statistic outside a run's declared set, e.g. a judge's bias), and the number of clusters."""
        c = Clusters.of(list(clusters))
        got = clustered_cis({"m": (self.columns(records), self.of)}, c, n_resamples=n_resamples, seed=seed)
        return got.intervals["m"], c.n

    def of_scores(self, x: ArrayLike) -> np.ndarray:
        """The columns of per-item scores (a metric of one number per item only)."""
        if self.item_columns is None:
            raise TypeError("a metric pooled over items (F1) has no per-item score")
        return self.item_columns(x)

    def __call__(self, x: ArrayLike) -> float:
        """The metric of per-item scores, summed in sorted order: the same value to the last bit whatever the
        items' order."""
        return float(self.of(self.of_scores(np.sort(np.asarray(x, dtype=float))).sum(axis=0, keepdims=True))[0])

    @property
    def is_mean(self) -> bool:
        return self.of is mean_of

    @classmethod
    def of_items(
        cls,
        item: Callable[[Any], float | None],
        item_columns: Callable[[ArrayLike], np.ndarray],
        of: SumStatistic,
        digits: int = 6,
        given: bool = False,
    ) -> Bootstrapped:
        """A statistic of one number per item (e.g. AdjScore of the quality scores: columns (1, x, x^2))."""

        def columns(records: Sequence[Any]) -> np.ndarray:
            return item_columns(np.array([item(r) for r in records], dtype=float))  # scored records: no None

        return cls(columns, of, digits, given, item, item_columns)

    @classmethod
    def mean(cls, item: Callable[[Any], float | None], digits: int = 6, given: bool = False) -> Bootstrapped:
        """The mean of one number per item (a 0/1 correctness, a graded score)."""
        return cls.of_items(item, mean_columns, mean_of, digits, given)

    @classmethod
    def f1(cls, gold: Callable[[Any], bool], pred: Callable[[Any], bool], digits: int = 6) -> Bootstrapped:
        """F1 with True the positive class, pooled over items (tp, fp, fn)."""
        return cls(lambda rs: f1_columns([gold(r) for r in rs], [pred(r) for r in rs]), f1_of, digits)


MEAN = Bootstrapped.mean(float)  # the mean of item scores: what a paired test compares unless a task declares more


@dataclass(frozen=True)
class ClusteredCIs:
    """Each named statistic's interval, all from the same cluster draws, and one statistic's design effect."""

    intervals: dict[str, Interval]
    n_clusters: int
    design_effect: float | None = None  # rounded to 4 places; None: not asked for, or undefined


def clustered_cis(
    columns: dict[str, tuple[np.ndarray, SumStatistic]],
    clusters: Clusters,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    design_effect_of: str | None = None,
) -> ClusteredCIs:
    """The interval of each named statistic (its item columns and its function of their sums), all from the same
    cluster draws; withheld (low and high None, with the reason) where it cannot be trusted (fewer than
    MIN_CLUSTERS clusters, or zero width). With `design_effect_of`, that statistic's design effect too (None,
    undefined, with fewer than MIN_CLUSTERS clusters of several items: n_clusters says why)."""
    sums = dict(zip(columns, canonical(*(clusters.sums(v) for v, _ in columns.values()))))
    boots: dict[str, list[np.ndarray]] = {k: [] for k in columns}
    for w in weights(clusters.n, n_resamples, seed):
        for k, (_, f) in columns.items():
            boots[k].append(f(w @ sums[k]))
    drawn = {k: np.concatenate(b) for k, b in boots.items()}
    intervals = {k: trusted(b, clusters.n, confidence) for k, b in drawn.items()}
    deff = None
    if design_effect_of is not None:
        values, f = columns[design_effect_of]
        got = design_effect(f, values, clusters, n_resamples, seed, drawn[design_effect_of])
        deff = None if got is None else round(got, 4)
    return ClusteredCIs(intervals, clusters.n, deff)
