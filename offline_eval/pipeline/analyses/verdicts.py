"""Non-inferiority verdicts of a sweep: every run of a model against that model's reference run, per task
setting, on the items both scored (summary.json `noninferiority`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from offline_eval.metrics.noninferiority import NonInferiority, adjust, compare
from offline_eval.models.spec import ModelSpec
from offline_eval.results.records import ItemRecord, Records, RunEntry, item_means
from offline_eval.tasks.base import Task


def paired_verdict(
    task: Task, records: Sequence[ItemRecord], reference: Sequence[ItemRecord], margin: float, seed: int = 0
) -> NonInferiority:
    """One run against its reference on the items both scored (clustered as the task declares), an item's
    score the mean over its samples."""
    scores = item_means(records, task.item_score, task.cluster)
    ref_scores = item_means(reference, task.item_score, task.cluster)
    shared = sorted(set(scores) & set(ref_scores))
    metric, statistic = task.noninferiority_metric(), task.paired_statistic()
    return compare(
        [scores[i][0] for i in shared],
        [ref_scores[i][0] for i in shared],
        margin,
        clusters=[ref_scores[i][1] for i in shared],
        statistic=statistic,
        higher_is_better=metric.higher_is_better,
        seed=seed,
        bounds=metric.bounds if statistic is None else None,  # the mean of item scores: the metric's own range
        kind=metric.paired,
    )


def build(
    models: Sequence[ModelSpec],
    margins: dict[str, float],
    records: Records[ItemRecord],
    runs: Sequence[RunEntry],
    tasks: dict[str, Task],
    seed: int = 0,
) -> list[dict[str, Any]]:
    """One entry per model with two or more runs: its reference run and the comparisons against it."""
    out = []
    for m in models:
        mine = [r for r in runs if r.model == m.name and r.task in tasks and r.key in records]
        if len({r.run for r in mine}) < 2:
            continue
        ref_run = m.run_name(*m.reference_run())
        comparisons: list[dict[str, Any]] = []
        missing: list[str] = []
        for setting in sorted({r.setting for r in mine}):
            group = [r for r in mine if r.setting == setting]
            ref = next((r for r in group if r.run == ref_run), None)
            if ref is None:
                missing.append(setting)
                continue
            task = tasks[ref.task]
            metric = task.noninferiority_metric()
            margin = margins.get(metric.name, metric.margin)
            if margin is None:
                continue
            family, rows = [], []
            for r in sorted(group, key=lambda r: (r.variant, r.max_model_len)):
                if r is ref:
                    continue
                res = paired_verdict(task, records[r.key], records[ref.key], margin, seed)
                family.append(res)
                rows.append(
                    {
                        "run": r.run,
                        "variant": r.variant,
                        "max_model_len": r.max_model_len,
                        "task": r.task,
                        "setting": setting,
                        "metric": metric.name,
                    }
                )
            adjust(family)
            comparisons += [{**row, **res.to_dict()} for row, res in zip(rows, family)]
        out.append(
            {
                "model": m.name,
                "backend": m.backend,
                "reference": ref_run,
                "comparisons": comparisons,
                "reference_missing": missing,
            }
        )
    return out
