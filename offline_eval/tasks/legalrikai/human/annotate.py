"""LegalRikai's outputs for a lawyer to score against the paper's rubrics: the statutes and the contract as
documents, a revised contract as its diff against the input, the gold answer behind a toggle; the judges' scores
revealed once the annotator has saved theirs. The export is the human_scores CSV the task reads back: it names
each output by its case id, from which the sweep finds the run (the page holds no run name)."""

from __future__ import annotations

from typing import Any

from offline_eval.runtime.i18n import _
from offline_eval.tasks.kit import Case, Doc, Form, RunEntry

from .. import rubric
from ..record import LegalRikaiRecord
from ..schema import AmendExpItem, LegalRikaiItem, RevisionItem, StatRevItem

FORM = Form(
    file_name="human_scores.csv",
    kind="csv",
    columns=(
        "task",
        "item_id",
        "case",
        "criterion",
        "score",
        "annotator",
        "comment",
        "sample",
        "output_sha256",
        "draw",
    ),
)


def case(entry: RunEntry, item: LegalRikaiItem, record: LegalRikaiRecord, diffs: dict[str, Any]) -> Case | None:
    if record.skipped:
        return None  # the candidate never saw it: nothing was answered
    sub = record.subtask
    shown = _inputs(item)
    if sub == "amendexp" or not diffs:
        shown.append(Doc(_("The candidate's answer"), record.output))
    else:
        shown.append(
            Doc(_("The candidate's revised contract, against the input contract"), diff=next(iter(diffs.values())))
        )
        shown.append(Doc(_("The candidate's answer as it wrote it"), record.output, open=False))
    gold = (
        [Doc(_("Gold: summary"), item.gold_summary), Doc(_("Gold: impact"), item.gold_impact)]
        if isinstance(item, AmendExpItem)
        else [Doc(_("Gold: the revised contract"), item.gold)]
        if isinstance(item, StatRevItem | RevisionItem)
        else []
    )
    hidden = [Doc("Run", entry.run)]
    for judge, verdict in sorted(record.judges.items()):
        scores = verdict.get("scores")
        lines = [f"{k}: {v}" for k, v in scores.items()] if scores else [f"failed ({verdict.get('finish_reason')})"]
        lines += [f"{k}: {t}" for k, t in (verdict.get("rationales") or {}).items()]
        hidden.append(Doc(f"Judge {judge}", "\n".join(lines)))
    return Case(
        run=entry.run,
        setting=entry.setting,
        item_id=record.id,
        stratum=sub,
        output=record.output,
        shown=shown,
        gold=gold,
        scales=list(rubric.criteria(sub)),
        hidden=hidden,
        export={"task": sub, "item_id": record.id},
    )


def _inputs(item: LegalRikaiItem) -> list[Doc]:
    out = []
    if isinstance(item, AmendExpItem):
        dates = [
            f"{k}: {v}"
            for k, v in (("promulgation_date", item.promulgation_date), ("enforcement_date", item.enforcement_date))
            if v
        ]
        out.append(Doc(_("The law"), "\n".join([item.law_name, *dates])))
    if isinstance(item, AmendExpItem | StatRevItem):
        out.append(Doc(_("The statute before the amendment"), item.statute_pre))
        out.append(Doc(_("The statute after it"), item.statute_post))
    if isinstance(item, RevisionItem):
        out.append(Doc(_("Instructions"), "\n".join(f"{i}. {x}" for i, x in enumerate(item.instructions, 1))))
    if isinstance(item, StatRevItem | RevisionItem):
        out.append(Doc(_("The input contract"), item.contract, open=False))
    return out
