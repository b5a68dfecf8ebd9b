"""Every judged number of every run, corrected with the human labels of that run's outputs (summary.json
`calibration`; docs/calibration.md): PPI++ within each stratum of the draw, combined by the strata's sizes, beside the
plain PPI, the labels alone and the judge alone, with the judge's agreement with the labels. Labels on run A never
correct run B; labels that were not drawn at random calibrate nothing, and the row says why."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from statistics import mean

import numpy as np

from offline_eval.metrics.agreement import mae, spearman
from offline_eval.metrics.calibration import Calibrated, Estimate, Stratum, binary_agreement, calibrate
from offline_eval.results import stored
from offline_eval.results.calibration import CALIBRATED, UNCALIBRATED, CalibrationRow, Interval
from offline_eval.results.records import ItemRecord, Records, RunEntry, sample_of
from offline_eval.tasks.base import Task
from offline_eval.tasks.kit.calibration import HumanLabels, JudgedNumber
from offline_eval.tasks.kit.sections import NOT_RANDOM


def build(
    runs: Sequence[RunEntry], records: Records[ItemRecord], tasks: dict[str, Task], seed: int = 0
) -> tuple[list[CalibrationRow], dict[str, list[str]]]:
    """The rows, and per task the lines on label rows that matched no output or whose output changed."""
    rows: list[CalibrationRow] = []
    notes: dict[str, list[str]] = {}
    for name, task in tasks.items():
        entries = sorted((r for r in runs if r.task == name and r.key in records), key=lambda r: (r.setting, r.run))
        if not entries:
            continue
        mine = {r.key: records[r.key] for r in entries}
        labels: HumanLabels | None = None
        for e in entries:
            outputs = answered(mine[e.key])
            numbers = task.judged_numbers(e.options, outputs)
            if numbers and labels is None:
                labels = task.human_labels(entries, mine) or HumanLabels(source="")
            if labels is not None and not labels.source:  # nothing to calibrate: the headline says so
                numbers = [n for n in numbers if n.headline]
            for num in numbers:
                assert labels is not None
                rows.append(_row(task, e, num, outputs, labels, seed))
        if labels is not None and labels.notes:
            notes[name] = labels.notes
    return rows, notes


def answered(records: Sequence[ItemRecord]) -> list[ItemRecord]:
    """The outputs a label can name: each item's first answer, of the items the candidate was given."""
    return [r for r in records if not sample_of(r) and not getattr(r, "skipped", False)]


def _row(
    task: Task, e: RunEntry, num: JudgedNumber, outputs: list[ItemRecord], labels: HumanLabels, seed: int
) -> CalibrationRow:
    # A judge's failure (or a cut answer it was not shown, or a non-finite score) leaves an output unscored: the
    # estimand is the human mean over the outputs the judges scored, and the row counts the others.
    scored = [(r, v) for r in outputs if (v := num.value(r)) is not None and math.isfinite(v)]
    base = CalibrationRow(
        task=e.task,
        setting=e.setting,
        run=e.run,
        number=num.number,
        judge=num.judge,
        headline=num.headline,
        scale=num.scale,
        status=UNCALIBRATED,
        source=labels.source or None,
        judge_mean=round(mean(v for _, v in scored), 6) if scored else None,
        stale=labels.stale.get((e.run, e.setting), 0),
        unscored=len(outputs) - len(scored),
    )
    if not labels.source:
        return base.model_copy(update={"reason": stored.NO_LABELS})
    if not scored:
        return base.model_copy(update={"reason": stored.JUDGE_SCORED_NONE.format(judge=num.judge)})
    mine = {str(r.id): got for r, _ in scored if (got := labels.by_output.get((e.run, e.setting, str(r.id))))}
    truth = {i: t for i, got in mine.items() if (t := num.truth(got.values)) is not None}
    lost = sum(1 for r in outputs if (e.run, e.setting, str(r.id)) in labels.by_output) - len(mine)
    base = base.model_copy(update={"labels_unscored": lost})
    if not truth:
        why = stored.NO_FULL_LABELS.format(number=num.number) if mine else stored.NONE_ON_RUN
        return base.model_copy(update={"reason": stored.UNSCORED_LABELS.format(why=why, lost=lost) if lost else why})
    if not all(mine[i].random for i in truth):
        return base.model_copy(update={"reason": NOT_RANDOM, "n": len(truth)})
    stratified = all(mine[i].stratified for i in truth)
    strata: dict[str, list[tuple[ItemRecord, float]]] = defaultdict(list)
    for r, v in scored:
        strata[task.design_stratum(r) if stratified else ""].append((r, v))
    parts = []
    for name, members in sorted(strata.items()):
        lab = [(r, v) for r, v in members if str(r.id) in truth]
        unl = [(r, v) for r, v in members if str(r.id) not in truth]
        parts.append(
            Stratum(
                y=[truth[str(r.id)] for r, _ in lab],
                yhat=[v for _, v in lab],
                yhat_unlabeled=[v for _, v in unl],
                clusters=[_cluster(task, r) for r, _ in lab],
                clusters_unlabeled=[_cluster(task, r) for r, _ in unl],
                name=name,
            )
        )
    pairs = [(truth[str(r.id)], v) for r, v in scored if str(r.id) in truth]
    base = base.model_copy(update={"label_sd": _r(float(np.std([h for h, _ in pairs])))})
    return base.model_copy(update={**_estimates(calibrate(parts, seed=seed)), **_agreement(num, pairs)})


def _cluster(task: Task, record: ItemRecord) -> str:
    c = task.cluster_of(record)
    return c if c is not None else f"item {record.id}"


def _interval(x: Estimate) -> Interval:
    return Interval(estimate=_r(x.estimate), ci_low=_r(x.ci_low), ci_high=_r(x.ci_high), se=_r(x.se))


def _estimates(c: Calibrated) -> dict[str, object]:
    return {
        "status": CALIBRATED if c.ppi_pp.estimate is not None else UNCALIBRATED,
        "reason": c.reason,
        "ppi_pp": _interval(c.ppi_pp),
        "ppi": _interval(c.ppi),
        "labels": _interval(c.labels),
        "lam": _r(c.lam),
        "lams": [round(x, 6) for x in c.lams],
        "n": c.n,
        "N": c.N,
        "strata": len(c.lams),
        "rho": _r(c.rho),
        "effective_n": _r(c.effective_n),
        "method": c.method,
    }


def _agreement(num: JudgedNumber, pairs: list[tuple[float, float]]) -> dict[str, object]:
    """Of the judge with the labels: a 2-level criterion as kappa, base rate and TPR/TNR at its midpoint; a graded
    one as MAE and Spearman's rho (the agreement tables' own functions)."""
    if not pairs:
        return {}
    human, judge = [h for h, _ in pairs], [j for _, j in pairs]
    if num.levels == 2:
        lo, hi = num.scale
        mid = (lo + hi) / 2
        b = binary_agreement([float(h > mid) for h in human], [float(j > mid) for j in judge])
        return {
            "kappa": _r(b.kappa),
            "base_rate": _r(b.base_rate),
            "judge_rate": _r(b.judge_rate),
            "tpr": _r(b.tpr),
            "tnr": _r(b.tnr),
        }
    rho, _ = spearman(judge, human)
    return {"mae": _r(mae(judge, human)), "spearman": _r(rho)}


def _r(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 6)
