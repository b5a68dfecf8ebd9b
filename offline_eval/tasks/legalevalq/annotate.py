"""LegalEval-Q's answers for a lawyer to score 0-100, as the scorer's training tuples are scored: the question,
its resource, the candidate's answer and the evaluator's comment and conclusion. The export is the JSONL that
`offline-eval legaleval-q train` reads ({query, answer, comment, conclusion, score}); each line names its output by
the case id, whose run the reveal file written beside the page gives."""

from __future__ import annotations

from typing import TYPE_CHECKING

from offline_eval.runtime.i18n import _
from offline_eval.tasks.kit import Case, Criterion, Doc, Form, RunEntry

from .data import LegalEvalQItem

if TYPE_CHECKING:
    from .records import LegalEvalQRecord

FORM = Form(file_name="legalevalq_annotated.jsonl", kind="jsonl", comment_field="annotator_comment")

QUALITY = Criterion(
    "score",
    "回答の質",
    "法律相談への回答として、正確さ、根拠条文の適切さ、結論の明確さを総合して0から100で評価する。",
    ((0, "誤り、または回答になっていない"), (50, "一部正しいが重要な誤りや欠落がある"), (100, "正確で根拠も適切")),
)


def case(entry: RunEntry, item: LegalEvalQItem, record: LegalEvalQRecord) -> Case | None:
    ev = record.evaluation or {}
    if record.skipped or ev.get("comment") is None or ev.get("conclusion") is None:
        return None  # the evaluator's critique is half of what the annotator scores
    shown = [Doc(_("The question"), record.query)]
    if item.resource:
        shown.append(Doc(_("Its resource"), item.resource))
    shown += [
        Doc(_("The candidate's answer"), record.output),
        Doc(_("The evaluator's comment"), str(ev["comment"])),
        Doc(_("The evaluator's conclusion"), str(ev["conclusion"])),
    ]
    hidden = [Doc("Run", entry.run)]
    if "quality" in record.scores:
        hidden.append(Doc("The regression scorer's score", f"{record.scores['quality']:.1f}"))
    return Case(
        run=entry.run,
        setting=entry.setting,
        item_id=record.id,
        stratum=record.split,
        output=record.output,
        shown=shown,
        gold=[Doc(_("The dataset's reference answer"), record.gold)] if record.gold else [],
        scales=[QUALITY],
        hidden=hidden,
        export={
            "query": record.query,
            "answer": record.output,
            "comment": str(ev["comment"]),
            "conclusion": str(ev["conclusion"]),
            "item_id": record.id,
        },
    )
