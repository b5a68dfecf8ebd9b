"""Same weights, different engines: do they answer alike?

Runs pair up when one run's model (or variant) declares `same_weights_as` the other's model. For each task
setting both ran, on the items both scored: the share of identical answers, Cohen's kappa between the two
answer columns, the difference of the task's primary metric with a paired test on the per-item scores
(McNemar's exact test for 0/1 scores, Wilcoxon signed-rank otherwise), and, where the setting scored label
probabilities, the mean absolute difference of P(positive).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from offline_eval.metrics.agreement import cohen_kappa
from offline_eval.metrics.paired import is_binary, mcnemar_exact
from offline_eval.results.records import ItemRecord, Records, RunEntry, RunKey, output_key
from offline_eval.results.summary import ConsistencyRow
from offline_eval.tasks.base import Task


def twin_pairs(runs: Sequence[RunEntry], declared: Callable[[str, str], str | None]) -> list[tuple[str, str]]:
    """(run a, run b) for runs whose models declare the same weights; `declared(model, variant)` gives the
    model a variant declares, or None."""
    by_run = {r.run: (r.model, r.variant) for r in runs}
    names = sorted(by_run)
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            (ma, va), (mb, vb) = by_run[a], by_run[b]
            if ma != mb and (declared(ma, va) == mb or declared(mb, vb) == ma):
                out.append((a, b))
    return out


def _paired_p(a: list[float], b: list[float]) -> tuple[str, float | None]:
    if not a:
        return "none", None
    if is_binary(a, b):
        return "mcnemar", mcnemar_exact(a, b)
    from scipy.stats import wilcoxon

    if all(x == y for x, y in zip(a, b)):
        return "wilcoxon", 1.0
    return "wilcoxon", float(wilcoxon(a, b).pvalue)


def compare(
    task: Task, entry_a: RunEntry, entry_b: RunEntry, recs_a: list[ItemRecord], recs_b: list[ItemRecord]
) -> ConsistencyRow:
    """One row of the consistency table: two runs of one task setting, on the items both answered."""
    by_b = {output_key(r): r for r in recs_b}  # sample i against sample i: the same seed on both engines
    both = [(r, by_b[output_key(r)]) for r in recs_a if output_key(r) in by_b]
    answers = [
        (x, y)
        for x, y in ((task.item_answer(a), task.item_answer(b)) for a, b in both)
        if x is not None and y is not None
    ]
    scores = [
        (x, y)
        for x, y in ((task.item_score(a), task.item_score(b)) for a, b in both)
        if x is not None and y is not None
    ]
    probs = [
        (x, y)
        for x, y in ((task.item_probability(a), task.item_probability(b)) for a, b in both)
        if x is not None and y is not None
    ]
    metric = entry_a.primary_metric or "mean"
    va, vb = entry_a.metrics.get(metric), entry_b.metrics.get(metric)
    test, p = _paired_p([x for x, _ in scores], [y for _, y in scores])
    row: dict[str, Any] = {
        "setting": entry_a.setting,
        "task": entry_a.task,
        "run_a": entry_a.run,
        "run_b": entry_b.run,
        "n_items": len(answers),
        "identical": (sum(x == y for x, y in answers) / len(answers)) if answers else None,
        "kappa": cohen_kappa([x for x, _ in answers], [y for _, y in answers]) if answers else None,
        "metric": metric,
        "metric_a": va,
        "metric_b": vb,
        "delta": (va - vb) if isinstance(va, (int, float)) and isinstance(vb, (int, float)) else None,
        "paired_test": test,
        "p": p,
    }
    if probs:
        row["mean_abs_diff_p_true"] = sum(abs(x - y) for x, y in probs) / len(probs)
    return ConsistencyRow.model_validate(row)


def build(
    runs: Sequence[RunEntry],
    records: Records[ItemRecord],
    tasks: dict[str, Task],
    declared: Callable[[str, str], str | None],
) -> list[ConsistencyRow]:
    rows = []
    by_key = {r.key: r for r in runs}
    for a, b in twin_pairs(runs, declared):
        for (run, setting), ea in sorted(by_key.items()):
            eb = by_key.get(RunKey(b, setting))
            task = tasks.get(ea.task)
            if run != a or eb is None or task is None:
                continue
            ra, rb = records.get(RunKey(a, setting)), records.get(RunKey(b, setting))
            if ra is None or rb is None or all(task.item_answer(r) is None for r in ra):
                continue
            rows.append(compare(task, ea, eb, ra, rb))
    return rows
