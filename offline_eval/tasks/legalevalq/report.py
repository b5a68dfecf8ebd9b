"""LegalEval-Q's part of the report (its ReportParts): the leaderboard ranked by AdjScore = mu^2 / (mu + sigma),
with the tier and the evaluator, and the item browser's view of an answer and its evaluation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from offline_eval.metrics.adjscore import tier
from offline_eval.metrics.ranking import has_score
from offline_eval.runtime.i18n import N_, _
from offline_eval.tasks.kit import BrowserView, ReportParts, Table
from offline_eval.tasks.kit.calibration import calibrated_text
from offline_eval.tasks.kit.parts import TaskClass
from offline_eval.tasks.kit.sections import ci_text, fmt, ranked

from .values import ADJ_SCORE, ADJ_SCORE_DELTA, EVALUATOR_PARSE_FAILURES, MEAN, MEDIAN, N_SCORED, STD, TRUNCATED_ANSWERS

# metrics.adjscore.tier's words, translated where shown
TIERS = (N_("high"), N_("mid"), N_("low"))

if TYPE_CHECKING:
    from offline_eval.results.summary import Summary
    from offline_eval.tasks.kit import RunEntry

    from .records import LegalEvalQRecord


def quality_leaderboard(runs: list[RunEntry], task: str, summary: Summary) -> Table:
    """In the summary's ranking by AdjScore, one setting after another."""
    rows = []
    by_key = {(r.run, r.setting): r for r in runs}
    order = [
        (rank, by_key[(run, s)])
        for s in sorted({r.setting for r in runs})
        for rank, run in ranked(summary, s)
        if (run, s) in by_key
    ]
    calibrated = {(c.run, c.setting): c for c in summary.calibration if c.task == task and c.number == MEAN.name}
    for rank, r in order:
        metrics = r.metrics
        adj = ADJ_SCORE.of(metrics)
        c = calibrated.get((r.run, r.setting))
        rows.append(
            [
                str(rank) if rank is not None else _("– (no items)"),
                r.run,
                calibrated_text(c, MEAN.of(metrics), 2) if c else fmt(MEAN.of(metrics), 2),
                fmt(STD.of(metrics), 2),
                fmt(MEDIAN.of(metrics), 2),
                ci_text(metrics.metric(ADJ_SCORE.name), 2),
                _(tier(adj)) if adj is not None and has_score(adj) else "–",
                fmt(ADJ_SCORE_DELTA.of(metrics), 2),
                fmt(N_SCORED.of(metrics)),
                fmt(EVALUATOR_PARSE_FAILURES.of(metrics)),
                fmt(TRUNCATED_ANSWERS.of(metrics)),
                (r.evaluator.run if r.evaluator else None) or "–",
            ]
        )
    return Table(
        _("{task}: quality per run", task=task),
        [
            "#",
            _("run"),
            _("mean"),
            _("std"),
            _("median"),
            _("AdjScore [95% CI]"),
            _("tier"),
            _("AdjScore validation - train"),
            _("scored"),
            _("evaluator parse failures"),
            _("answers cut off"),
            _("evaluator"),
        ],
        rows,
        _(
            "Scores 0-100 from the regression scorer over the evaluator's Comment and Conclusion. AdjScore = "
            "mu^2/(mu+sigma) with the population std; tier: >= 90 high, 70-90 mid, < 70 low. The CI resamples "
            "questions (a bootstrap; 'n too small' under 20 questions). Where human scores of a random sample of a "
            "run's answers exist, its mean is the PPI++ estimate of the human mean [95% CI] on those labels, the "
            "scorer's mean beside it; 'uncalibrated' marks the scorer's alone (docs/calibration.md)."
        ),
    )


class LegalEvalQReport(ReportParts):
    @classmethod
    def tables(cls, task: TaskClass, runs: list[RunEntry], summary: Summary) -> list[Table]:
        return [quality_leaderboard(runs, task.name, summary)]

    @classmethod
    def browser_view(cls, record: LegalEvalQRecord) -> BrowserView:
        ev = record.evaluation or {}
        extra = {
            _("query"): record.query,
            _("evaluator comment"): ev.get("comment"),
            _("evaluator conclusion"): ev.get("conclusion"),
            _("quality score"): record.scores.get("quality"),
        }
        return BrowserView(record.split, None, extra)

    @classmethod
    def leaderboard_row(cls, value: float) -> dict[str, Any]:
        return {"tier": tier(value)}
