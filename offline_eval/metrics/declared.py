"""Statistics declared once. A task declares, on each metric that has an interval, how it is drawn from the
run's scored items (`Bootstrapped`), and the breakdowns it is reported by (`Breakdown`); `with_intervals` then
gives every task the same clustered CIs, design effect and per-group values. A task's aggregate only computes
its values."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .bootstrap import Clusters, Interval, SumStatistic, clustered_cis, f1_columns, f1_of, mean_columns, mean_of
from .values import MetricValue, RunMetrics


@dataclass(frozen=True)
class Bootstrapped:
    """A metric with a clustered interval: each scored item's sufficient statistics as a row (`columns` of the
    scored records, in their order), and the metric as a function of their summed columns (`of`), which is also
    its value unless the task's aggregate gives it (`given`: e.g. a mean of criterion means, not of item rows).
    `digits`: the places its value, interval and design effect are stored to."""

    columns: Callable[[Sequence[Any]], np.ndarray]
    of: SumStatistic
    digits: int = 6
    given: bool = False

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

    @classmethod
    def mean(cls, item: Callable[[Any], float], digits: int = 6, given: bool = False) -> Bootstrapped:
        """The mean of one number per item (a 0/1 correctness, a graded score)."""
        return cls(lambda rs: mean_columns([item(r) for r in rs]), mean_of, digits, given)

    @classmethod
    def f1(cls, gold: Callable[[Any], bool], pred: Callable[[Any], bool], digits: int = 6) -> Bootstrapped:
        """F1 with True the positive class, pooled over items (tp, fp, fn)."""
        return cls(lambda rs: f1_columns([gold(r) for r in rs], [pred(r) for r in rs]), f1_of, digits)


@dataclass(frozen=True)
class Breakdown:
    """A declared metric per group of items, e.g. F1 per subject: `group` gives an item's group (groups are
    listed sorted, then named by str()); `counts`: each group's value says how many items it is over."""

    axis: str
    metric: str
    group: Callable[[Any], Any]
    counts: bool = False


def with_intervals(
    m: RunMetrics,
    scored: Sequence[Any],
    clusters: Clusters,
    declared: Sequence[tuple[str, Bootstrapped]],
    breakdowns: Sequence[Breakdown] = (),
    *,
    n_resamples: int,
    seed: int,
    design_effect_of: str | None,
) -> None:
    """Into the task's metrics `m`: each declared metric's value over the scored items (where the task does not
    give it), with its clustered interval (all from the same draws; none where `n_resamples` is 0) and, for
    `design_effect_of`, its design effect; the clusters' count; and each breakdown, per group, the metric's value
    and interval drawn over the group's own clusters. Nothing where the run scored no item."""
    if scored:
        for name, b in declared:
            if not b.given:
                m.put(name, b.value(scored))
    present = [(name, b) for name, b in declared if m.get(name) is not None]
    if not present or not scored:
        return
    stat = dict(declared)
    cis = None
    if n_resamples:
        cis = clustered_cis(
            {name: (b.columns(scored), b.of) for name, b in present},
            clusters,
            n_resamples=n_resamples,
            seed=seed,
            design_effect_of=design_effect_of if design_effect_of in dict(present) else None,
        )
    for name, b in present:
        iv = cis.intervals[name] if cis is not None else None
        deff = cis.design_effect if cis is not None and name == design_effect_of else None
        m.put(name, MetricValue.of(m.get(name), iv, design_effect=deff, digits=b.digits))
    m.put("n_clusters", clusters.n)
    for bd in breakdowns:
        b = stat[bd.metric]
        if b.given:  # a group's value would come from the columns, the run's from the task: two definitions
            raise ValueError(f"breakdown {bd.axis}/{bd.metric}: a metric the task gives has no per-group value")
        keys = [bd.group(r) for r in scored]
        for key in sorted(set(keys)):
            mask = np.array([k == key for k in keys])
            sub = [r for r, keep in zip(scored, mask) if keep]
            iv = None
            if n_resamples:
                got = clustered_cis(
                    {bd.metric: (b.columns(sub), b.of)}, clusters.subset(mask), n_resamples=n_resamples, seed=seed
                )
                iv = got.intervals[bd.metric]
            value = MetricValue.of(b.value(sub), iv, n=len(sub) if bd.counts else None, digits=b.digits)
            m.group(bd.axis, str(key), bd.metric, value)
