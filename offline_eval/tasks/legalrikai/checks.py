"""The deterministic columns beside the judges: characters changed against the input, precision and recall
of the changed articles against the gold, and structure defects the output introduced (Japanese toolkit)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from offline_eval.ja.align import change_precision, changes
from offline_eval.ja.checks import introduced_defects
from offline_eval.ja.contract import parse
from offline_eval.ja.diff import diff_texts
from offline_eval.tasks.kit import UNSET, Unset

from .outputs import amendexp_sections, merge_back, strip_fences
from .schema import LegalRikaiItem, RevisionItem, StatRevItem

MAX_DEFECTS_LISTED = 20


def contract_checks(contract: str, revised: str, gold: str) -> dict[str, Any]:
    src, out, g = parse(contract), parse(revised), parse(gold)
    cp = change_precision(src, out, g)
    defects = introduced_defects(src, out)
    return {
        "diff_chars": diff_texts(contract, revised, with_morphemes=False).stats.diff_chars,
        "changed_precision": cp["changed_precision"],
        "changed_recall": cp["changed_recall"],
        "changed_f1": cp["changed_f1"],
        "n_changed_model": cp["n_changed_model"],
        "n_changed_gold": cp["n_changed_gold"],
        "introduced_defects": len(defects),
        "defects": [d.to_dict() for d in defects[:MAX_DEFECTS_LISTED]],
    }


@dataclass
class Reading:
    parsed: Any  # None: the answer is not in the asked-for form, a counted format failure
    checks: dict[str, Any] | None = None
    revised: str | Unset = UNSET  # StatRev: the input contract with the output's articles merged back


def read_output(item: LegalRikaiItem, text: str) -> Reading:
    if isinstance(item, StatRevItem):
        m = merge_back(item.contract, text)
        return Reading(
            {"replaced": m.replaced, "inserted": m.inserted} if m.parsed else None,
            contract_checks(item.contract, m.text, item.gold),
            m.text,
        )
    if isinstance(item, RevisionItem):
        revised = strip_fences(text)
        n = len(parse(revised).articles)
        return Reading({"articles": n} if n else None, contract_checks(item.contract, revised, item.gold))
    return Reading(amendexp_sections(text))


def revised_articles(contract: str, gold: str) -> str:
    """The gold's articles that differ from the contract (changed or inserted), as written in the gold."""
    src, g = parse(contract), parse(gold)
    labels = {c.b_label for c in changes(src, g) if c.kind in ("changed", "inserted") and c.b_label}
    return "".join(a.raw.rstrip("\n") + "\n\n" for a in g.articles if a.label in labels).strip()
