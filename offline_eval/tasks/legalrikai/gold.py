"""What a LegalRikai answer is scored against: the gold in the record, and the gold the judges are shown."""

from __future__ import annotations

from typing import Any

from .checks import revised_articles
from .schema import AmendExpItem, LegalRikaiItem, RevisionItem, StatRevItem


def gold(item: LegalRikaiItem) -> Any:
    if isinstance(item, AmendExpItem):
        return {"summary": item.gold_summary, "impact": item.gold_impact}
    assert isinstance(item, StatRevItem | RevisionItem)
    return item.gold


def judge_gold(item: LegalRikaiItem) -> str:
    """What the judge compares against: the two gold sections; for StatRev, only the gold's revised articles
    (the form the answer takes); the whole gold contract otherwise."""
    if isinstance(item, AmendExpItem):
        return f"## 改正の概要\n{item.gold_summary}\n\n## 契約への影響\n{item.gold_impact}"
    if isinstance(item, StatRevItem):
        return revised_articles(item.contract, item.gold) or "（修正不要）"
    assert isinstance(item, RevisionItem)
    return item.gold
