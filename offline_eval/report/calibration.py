"""The report's calibration: one first-screen line per judged task saying whether its numbers are calibrated by
human labels or the judges' alone, and a details table of every judged number with the PPI++ estimate beside the
plain PPI, the labels alone and the judges alone (docs/calibration.md)."""

from __future__ import annotations

from collections import defaultdict

from offline_eval.results.calibration import CalibrationRow
from offline_eval.results.summary import Summary
from offline_eval.runtime.i18n import _
from offline_eval.tasks.kit.calibration import interval_text
from offline_eval.tasks.kit.sections import Table, fmt, sentences, stored


def _by_task(summary: Summary) -> dict[str, list[CalibrationRow]]:
    out: dict[str, list[CalibrationRow]] = defaultdict(list)
    for c in summary.calibration:
        out[c.task].append(c)
    return out


def calibration_lines(summary: Summary) -> list[str]:
    """Per judged task, which numbers its leaderboard shows: corrected by human labels, or the judges' own."""
    lines = []
    for task, rows in sorted(_by_task(summary).items()):
        heads = [c for c in rows if c.headline]
        done = [c for c in heads if c.calibrated]
        reasons = sorted({stored(c.reason) for c in heads if not c.calibrated and c.reason})
        fields = {"task": task, "done": len(done), "cells": len(heads), "n": sum(c.n for c in done)}
        if done and len(done) < len(heads):
            text = _(
                "{task}: calibrated by human labels (PPI++, 95% CI) for {done} of {cells} run x setting cells, on {n} "
                'labelled outputs ({sources}); the leaderboard marks them "calibrated on n labels", and shows the '
                "judges' uncalibrated mean elsewhere ({reasons}).",
                **fields,
                sources=_sources(done),
                reasons="; ".join(reasons),
            )
        elif done:
            text = _(
                "{task}: calibrated by human labels (PPI++, 95% CI) for {done} of {cells} run x setting cells, on {n} "
                'labelled outputs ({sources}); the leaderboard marks them "calibrated on n labels".',
                **fields,
                sources=_sources(done),
            )
        else:
            why = "; ".join(reasons) or _("no human labels")
            text = _("{task}: the judges' mean, uncalibrated ({reasons}).", task=task, reasons=why)
        lines.append(text)
    return lines


def _sources(rows: list[CalibrationRow]) -> str:
    return ", ".join(sorted({c.source for c in rows if c.source}))


def calibration_tables(summary: Summary) -> list[Table]:
    tables = []
    for task, rows in sorted(_by_task(summary).items()):
        if not any(c.source for c in rows):
            continue  # no labels: the first screen says so, there is nothing to tabulate
        digits = 1 if max(c.scale[1] for c in rows) > 1 else 3
        body = [
            [
                c.setting,
                c.run,
                c.number,
                c.judge,
                interval_text(c.ppi_pp, digits) if c.ppi_pp else "–",
                fmt(c.lam, 3),
                interval_text(c.ppi, digits) if c.ppi else "–",
                interval_text(c.labels, digits) if c.labels else "–",
                fmt(c.judge_mean, digits),
                str(c.n),
                str(c.N),
                fmt(c.effective_n, 1),
                fmt(c.rho, 2),
                _agreement(c),
                str(c.stale) if c.stale else "",
                stored(c.reason),
            ]
            for c in sorted(rows, key=lambda c: (c.setting, c.run, not c.headline, c.number, c.judge != "Avg", c.judge))
        ]
        notes = sorted({c.method for c in rows if c.method})
        unmatched = summary.calibration_notes.get(task, [])
        method = _(
            "Prediction-powered inference (Angelopoulos et al. 2023; PPI++, Angelopoulos et al. 2024): the "
            "judges' mean over every output, corrected by the mean human-minus-judge difference on a random "
            "sample of labelled outputs, λ̂ tuned as ppi_py's ppi_mean_ci(lam=None) and clipped to [0, 1]; "
            "PPI is λ = 1; labels only ignores the judges. Effective n = n(n+N)/(n+(1-ρ²)N): the labels alone "
            "would need this many for the same precision. Agreement on the labelled outputs: kappa, human base "
            "rate and TPR/TNR at the midpoint for 2-level criteria; MAE and Spearman's ρ for graded ones. "
            "Intervals: {methods} (docs/calibration.md). Labels on one run never correct another.",
            methods=", ".join(notes) or _("none"),
        )
        unused = _("Label rows not used: {rows}.", rows="; ".join(unmatched)) if unmatched else ""
        tables.append(
            Table(
                _("{task}: judged numbers calibrated by human labels", task=task),
                [_("setting"), _("run"), _("number"), _("judge"), _("PPI++ [95% CI]"), "λ̂", _("PPI (λ = 1) [95% CI]"),
                 _("labels only [95% CI]"), _("judges only"), _("n labelled"), _("N judge-only"), _("effective n"),
                 "ρ", _("agreement"), _("labels not used (output changed)"), _("why no interval")],
                body,
                sentences(method, unused),
            )
        )  # fmt: skip
    return tables


def _agreement(c: CalibrationRow) -> str:
    if c.kappa is not None or c.tpr is not None or c.base_rate is not None:
        return _(
            "κ {kappa}, base rate {base_rate}, TPR {tpr}, TNR {tnr}",
            kappa=fmt(c.kappa, 2),
            base_rate=fmt(c.base_rate, 2),
            tpr=fmt(c.tpr, 2),
            tnr=fmt(c.tnr, 2),
        )
    if c.mae is not None:
        return f"MAE {fmt(c.mae, 3)}, Spearman {fmt(c.spearman, 2)}"
    return ""
