"""Statistics declared once. A task declares, on each metric that has an interval, how it is drawn from the
run's scored items (`Bootstrapped`), and the breakdowns it is reported by (`Breakdown`); `with_intervals` then
gives every task the same clustered CIs, design effect and per-group values. A task's aggregate only computes
its values."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .bootstrap import Bootstrapped, Clusters, clustered_cis
from .values import N_CLUSTERS, MetricValue, RunMetrics


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
    m.put(N_CLUSTERS.name, clusters.n)
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
