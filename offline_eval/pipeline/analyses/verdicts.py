"""Non-inferiority verdicts of a sweep: every run of a model against that model's reference run, per task
setting, on the items both scored (summary.json `noninferiority`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from offline_eval.metrics.noninferiority import NonInferiority, adjust, compare, from_difference
from offline_eval.models.adapter_pairs import adapter_base, adapter_on_own_weights
from offline_eval.models.spec import ModelSpec
from offline_eval.results import stored
from offline_eval.results.calibration import CalibrationRow
from offline_eval.results.records import ItemRecord, Records, RunEntry, item_means
from offline_eval.tasks.base import Task

from .calibration import answered


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
    calibrated: Sequence[CalibrationRow] = (),
) -> list[dict[str, Any]]:
    """One entry per model with two or more runs: its reference run and the comparisons against it. An adapter
    run is compared against its base (the same weights without the adapter) unless the model names its
    `reference:`; an adapter over another file (an Int8/Int4 base) is also held to the same adapter on the model's
    own weights (`adapter_transfer`). On a judged task, where both runs of a pair have the verdict's metric
    calibrated by human labels, the verdict reads the calibrated estimates (`scale`: calibrated; the difference of
    two independent PPI++ estimates), else the judges' (`scale`: judge, and `scale_note` says why where labels
    exist)."""
    headline = {(c.run, c.setting): c for c in calibrated if c.headline}
    judged = {c.setting for c in calibrated}
    out = []
    for m in models:
        mine = [r for r in runs if r.model == m.name and r.task in tasks and r.key in records]
        if len({r.run for r in mine}) < 2:
            continue
        ref_run = m.run_name(*m.reference_run())
        comparisons: list[dict[str, Any]] = []
        transfer: list[dict[str, Any]] = []
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
            for pairs, into in ((_against(m, group, ref), comparisons), (_transfers(m, group), transfer)):
                family = [paired_verdict(task, records[r.key], records[a.key], margin, seed) for r, a in pairs]
                scales = [
                    _scale(headline, metric.name, r, a, _differ(task, records[r.key], records[a.key], r.options))
                    if setting in judged
                    else None
                    for r, a in pairs
                ]
                family = [
                    from_difference(res, *sc[2], margin, metric.higher_is_better) if sc and sc[2] else res
                    for res, sc in zip(family, scales)
                ]
                adjust(family)
                into += [
                    {"run": r.run, "variant": r.variant, "max_model_len": r.max_model_len, "task": r.task,
                     "setting": setting, "metric": metric.name,
                     **({"against": a.run} if into is transfer else _label(m, r, a, ref, group)),
                     **res.to_dict(), **({"scale": sc[0], "scale_note": sc[1]} if sc else {})}
                    for (r, a), res, sc in zip(pairs, family, scales)
                ]  # fmt: skip
        out.append(
            {
                "model": m.name,
                "backend": m.backend,
                "reference": ref_run,
                "comparisons": comparisons,
                "reference_missing": missing,
                **({"adapter_transfer": transfer} if transfer else {}),
            }
        )
    return out


def _label(m: ModelSpec, r: RunEntry, a: RunEntry, ref: RunEntry, group: list[RunEntry]) -> dict[str, str]:
    """`against` where a run is tested against another run than the reference, or against its base."""
    return {"against": a.run} if a is not ref or _base_of(m, r, group) is ref else {}


def _base_of(m: ModelSpec, r: RunEntry, group: list[RunEntry]) -> RunEntry | None:
    """An adapter run's base run in this setting (None: not an adapter, no such run, or the model names a
    reference: then every run is tested against that)."""
    if m.reference is not None:
        return None
    return _run_of(group, adapter_base(m.variants, r.variant), r.max_model_len)


def _run_of(group: list[RunEntry], variant: str | None, ctx: int) -> RunEntry | None:
    return next((x for x in group if variant and x.variant == variant and x.max_model_len == ctx), None)


def _against(m: ModelSpec, group: list[RunEntry], ref: RunEntry) -> list[tuple[RunEntry, RunEntry]]:
    """Each run but the reference, with what it is tested against: the reference, or an adapter's base."""
    pairs = []
    for r in sorted(group, key=lambda r: (r.variant, r.max_model_len)):
        if r is ref:
            continue
        pairs.append((r, _base_of(m, r, group) or ref))
    return pairs


def _transfers(m: ModelSpec, group: list[RunEntry]) -> list[tuple[RunEntry, RunEntry]]:
    """Each adapter over another file, with the same adapter on the model's own weights."""
    pairs = []
    for r in sorted(group, key=lambda r: (r.variant, r.max_model_len)):
        own = _run_of(group, adapter_on_own_weights(m.variants, r.variant), r.max_model_len)
        if own is not None:
            pairs.append((r, own))
    return pairs


Scale = tuple[str, str | None, tuple[tuple[float, float], tuple[float, float]] | None]


def _differ(task: Task, mine: Sequence[ItemRecord], theirs: Sequence[ItemRecord], options: dict[str, Any]) -> int:
    """The outputs the judges scored for one run of a pair and not the other (their headline number's): each
    calibrated estimate is over its own run's, so a pair that differs would compare other items."""

    def scored(records: Sequence[ItemRecord]) -> set[str]:
        outputs = answered(records)
        nums = [n for n in task.judged_numbers(options, outputs) if n.headline]
        return {str(r.id) for r in outputs for n in nums if n.value(r) is not None}

    return len(scored(mine) ^ scored(theirs))


def _scale(
    headline: dict[tuple[str, str], CalibrationRow], metric: str, r: RunEntry, a: RunEntry, differ: int = 0
) -> Scale:
    """("calibrated", None, ((estimate, se) of the run, of what it is held to)) where both are calibrated with an
    interval on the verdict's metric, over the same outputs; else ("judge", why where human labels exist, None)."""
    mine, theirs = headline.get((r.run, r.setting)), headline.get((a.run, a.setting))
    if mine is None or mine.source is None:
        return ("judge", None, None)
    if mine.number != metric:
        return ("judge", stored.NO_CALIBRATED_FORM.format(metric=metric), None)
    pair = [(x.run, c) for x, c in ((r, mine), (a, theirs))]
    lack = [run for run, c in pair if c is None or not c.calibrated]
    if lack and len(lack) == 2:
        return ("judge", None, None)
    if lack:
        have = next(run for run, _ in pair if run not in lack)
        return ("judge", stored.ONE_SIDE_CALIBRATED.format(source=mine.source, have=have, lacking=lack[0]), None)
    got = [
        (c.ppi_pp.estimate, c.ppi_pp.se)
        for _, c in pair
        if c is not None and c.ppi_pp is not None and c.ppi_pp.estimate is not None and c.ppi_pp.se is not None
    ]
    if len(got) == 2 and differ:
        return ("judge", stored.UNEVEN_JUDGING.format(n=differ), None)
    if len(got) == 2:
        return ("calibrated", None, (got[0], got[1]))
    reasons = sorted({c.reason or stored.NO_STANDARD_ERROR for _, c in pair if c is not None})
    return ("judge", stored.NO_INTERVAL.format(reasons="; ".join(reasons)), None)
