"""JBE-QA's part of the report (its ReportParts): per-subject and per-year breakdowns, the per-subject F1 plot, the
item browser's view and the opening lines' note on runs that gave one answer to everything."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from offline_eval.runtime.i18n import _
from offline_eval.tasks.kit import BrowserView, MetricValue, Plot, ReportParts, Table
from offline_eval.tasks.kit.figures import (
    LABEL_PT,
    fig_module,
    interval_or_why,
    japanese_font,
    primary_score,
    safe_name,
    save,
)
from offline_eval.tasks.kit.parts import TaskClass
from offline_eval.tasks.kit.sections import breakdown

from .values import ANSWERED_TRUE

if TYPE_CHECKING:
    from offline_eval.results.summary import Summary
    from offline_eval.tasks.kit import RunEntry

    from .records import JBEQARecord

# Without a Japanese font (the `report` extra) plot labels fall back to English: boxes for 民法 help no one.
SUBJECTS_EN = {"民法": "Civil Code", "刑法": "Penal Code", "憲法": "Constitution"}


def breakdown_tables(runs: list[RunEntry]) -> list[Table]:
    tables = [
        breakdown(runs, "subject", "f1", _("JBE-QA: F1 per subject"), _("exam questions")),
        breakdown(runs, "year", "accuracy", _("JBE-QA: accuracy per year"), _("exam questions")),
    ]
    return [t for t in tables if t is not None]


def subject_bars(runs: list[RunEntry], limit: int = 8) -> list[Plot]:
    plt = fig_module()
    out = []
    for setting, grouped in itertools.groupby(sorted(runs, key=lambda r: r.setting), key=lambda r: r.setting):
        with_subjects = [(r, f1) for r in grouped if (f1 := r.metrics.groups("subject", "f1"))]
        if not with_subjects:
            continue
        group = sorted(with_subjects, key=lambda x: -(primary_score(x[0]) or 0.0))[:limit]
        subjects = sorted({s for _, f1 in group for s in f1})
        fig, ax = plt.subplots(figsize=(8.5, 3.6))
        width = 0.8 / len(group)
        for i, (r, f1) in enumerate(group):
            xs = [j + i * width for j in range(len(subjects))]
            ax.bar(xs, [_height(f1.get(s)) for s in subjects], width, label=r.run)
            for x, s in zip(xs, subjects):
                interval_or_why(ax, x, f1.get(s))
        ax.set_xticks(
            [j + 0.4 - width / 2 for j in range(len(subjects))],
            [s if japanese_font() else SUBJECTS_EN.get(s, s) for s in subjects],
        )
        ax.set_ylabel("F1")
        ax.legend(fontsize=LABEL_PT, loc="upper left", bbox_to_anchor=(1.02, 1.0))
        ax.tick_params(labelsize=LABEL_PT)
        # drawn in Japanese only where a Japanese font draws it (else English: boxes help no one)
        ax.set_title(
            _("F1 per subject: {setting}", setting=setting) if japanese_font() else f"F1 per subject: {setting}",
            fontsize=LABEL_PT + 2,
        )
        out.append(
            save(
                plt,
                fig,
                f"subjects_{safe_name(setting)}",
                _("F1 per subject, {setting}", setting=setting),
                _(
                    "The best {n} runs of this setting per subject, with 95% CIs, or on the bar why there is none (n "
                    "too small: fewer clusters than a bootstrap needs): a run strong overall can still fail one area "
                    "of law.",
                    n=len(group),
                ),
            )
        )
    return out


def _height(mv: MetricValue | None) -> float:
    return float(mv.value) if mv is not None and mv.value is not None else 0.0


class JBEQAReport(ReportParts):
    @classmethod
    def tables(cls, task: TaskClass, runs: list[RunEntry], summary: Summary) -> list[Table]:
        return [*super().tables(task, runs, summary), *breakdown_tables(runs)]

    @classmethod
    def plots(cls, runs: list[RunEntry]) -> list[Plot]:
        return subject_bars(runs)

    @classmethod
    def browser_view(cls, record: JBEQARecord) -> BrowserView:
        ok = None if record.skipped else bool(record.scores["correct"])
        return BrowserView(record.subject, ok, {_("skipped"): _("did not fit the context")} if record.skipped else {})

    @classmethod
    def glance_note(cls, runs: list[RunEntry]) -> str | None:
        constant = [r.run for r in runs if ANSWERED_TRUE.of(r.metrics) in (0, 1)]
        if not constant:
            return None
        return _(
            "{n} of {runs} runs gave the same answer to every item (e.g. {run}), so their score reflects the label "
            "balance, not knowledge",
            n=len(constant),
            runs=len(runs),
            run=constant[0],
        )
