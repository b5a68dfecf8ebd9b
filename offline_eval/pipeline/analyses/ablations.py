"""Ablation families built from a sweep: quantization variants of one model at one context length, and
context lengths of one model variant. Each family compares every pair of its members on the items they
all scored, with paired tests and family-wise adjustments."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from offline_eval.metrics.bootstrap import Clusters
from offline_eval.metrics.paired import PairedKind
from offline_eval.metrics.stats import adjust_family, paired_test
from offline_eval.results.records import ItemRecord, Records, RunEntry, item_means
from offline_eval.results.stored import CONTEXTS, VARIANTS

ItemScore = Callable[[ItemRecord], "float | None"]
ItemCluster = Callable[[ItemRecord], "str | None"]


def families(runs: list[RunEntry]) -> list[tuple[str, str, list[RunEntry]]]:
    """(kind, title, member runs) for every family with at least two members."""
    out = []
    key = lambda r: (r.model, r.backend, r.setting)  # noqa: E731
    for (model, backend, setting), grouped in itertools.groupby(sorted(runs, key=key), key=key):
        group = list(grouped)
        by_ctx: dict[int, list[RunEntry]] = {}
        by_var: dict[str, list[RunEntry]] = {}
        for r in group:
            by_ctx.setdefault(r.max_model_len, []).append(r)
            by_var.setdefault(r.variant, []).append(r)
        for ctx, members in sorted(by_ctx.items()):
            if len(members) > 1:
                out.append(("quantization", VARIANTS.format(model=model, engine=backend, setting=setting, ctx=ctx),
                            members))  # fmt: skip
        for var, members in sorted(by_var.items()):
            if len(members) > 1:
                members = sorted(members, key=lambda r: r.max_model_len)
                out.append(("context", CONTEXTS.format(model=model, engine=backend, setting=setting, variant=var),
                            members))  # fmt: skip
    return out


def build(
    records: Records[ItemRecord],
    runs: list[RunEntry],
    item_score: Callable[[str], ItemScore],
    item_cluster: Callable[[str], ItemCluster],
    paired_kind: Callable[[str], PairedKind],
    seed: int = 0,
) -> list[dict[str, Any]]:
    """`item_score(task)`, `item_cluster(task)` and `paired_kind(task)`: the task's per-item score, its cluster and
    what the score is (binary or graded, as the task's paired metric declares)."""
    result = []
    for kind, title, members in families(runs):
        score, cluster = item_score(members[0].task), item_cluster(members[0].task)
        per_run: list[dict[str, float]] = []
        labels: dict[str, str | None] = {}
        for r in members:
            means = item_means(records.get(r.key, []), score, cluster)  # an item's samples counted as one
            per_run.append({i: v for i, (v, _) in means.items()})
            labels.update({i: c for i, (_, c) in means.items()})
        shared = sorted(set.intersection(*(set(s) for s in per_run))) if per_run else []
        clusters = Clusters.of([labels[i] for i in shared])
        label = (lambda r: r.variant) if kind == "quantization" else (lambda r: f"ctx{r.max_model_len}")
        comps = []
        if len(shared) >= 2:
            for (ra, sa), (rb, sb) in itertools.combinations(zip(members, per_run), 2):
                comps.append(
                    paired_test(
                        [sa[i] for i in shared],
                        [sb[i] for i in shared],
                        f"{label(ra)} vs {label(rb)}",
                        seed=seed,
                        n_resamples=1000,
                        clusters=clusters,
                        kind=paired_kind(members[0].task),
                    )
                )
            adjust_family(comps)
        result.append(
            {
                "kind": kind,
                "family": title,
                "task": members[0].task,
                "setting": members[0].setting,
                "members": [r.run for r in members],
                "n_items": len(shared),
                "n_clusters": clusters.n,
                "comparisons": [c.to_dict() for c in comps],
            }
        )
    return result
