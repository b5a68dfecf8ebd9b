"""LegalRikai's metrics of one run on one sub-task: inputs and failures, the checks against the reference
revision, each judge's mean score per criterion, and the criteria's Avg (the mean over the judges that
answered) and their mean, the score."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import mean

from offline_eval.metrics.values import JudgeMetrics
from offline_eval.tasks.kit import RunMetrics

from . import rubric
from .record import LegalRikaiRecord

_CHECKS = ("diff_chars", "changed_precision", "changed_recall", "changed_f1", "introduced_defects")


def aggregate(subtask: str, records: Sequence[LegalRikaiRecord], cut_judged: bool = True) -> RunMetrics:
    """`truncated`: the answers cut off by their cap. `cut_judged` False (protocol paper): those were neither read
    nor judged, so they count in no criterion's mean and are not format failures (they are counted apart)."""
    done = [r for r in records if not r.skipped]
    read = [r for r in done if cut_judged or r.finish_reason != "length"]
    m = RunMetrics()
    m.update(
        {
            "n_items": len(records),
            "n_full": sum(r.input == "full" for r in records),
            "n_focused": sum(r.input == "focused" for r in records),
            "n_skipped": len(records) - len(done),
            "truncated": sum(r.finish_reason == "length" for r in done),
            "format_failures": sum(r.parsed is None for r in read),
        }
    )
    checked = [r.checks for r in done if r.checks]
    for k in _CHECKS if checked else ():
        m.put(k, round(mean(c[k] for c in checked), 4))
    judges = sorted({j for r in records for j in r.judges})
    crits = [c.code for c in rubric.criteria(subtask)]
    for j in judges:
        seen = [r.judges[j] for r in records if j in r.judges]
        ok = [x for x in seen if x["scores"] is not None]
        m.judges[j] = JudgeMetrics(
            failures=sum(1 for x in seen if x["scores"] is None),
            overflow=sum(1 for x in seen if x["finish_reason"] == "overflow"),
            criteria={
                c.code: round(mean(c.normalise(x["scores"][c.code]) for x in ok), 4)
                for c in rubric.criteria(subtask)
                if ok
            },
        )
    scored = [r for r in records if r.scores]
    m.put("n_judged", len(scored))
    means = {}
    for code in crits:
        vals = [(r.scores[code], r.input == "focused") for r in scored if code in r.scores]
        if vals:
            means[code] = mean(v for v, _ in vals)
            m.put(code, round(means[code], 4))
            m.group("criterion", code, "focused_share", round(sum(f for _, f in vals) / len(vals), 4))
    if len(means) == len(crits):
        m.put("score", round(mean(means.values()), 4))
    return m


def item_score(record: LegalRikaiRecord) -> float | None:
    """The item's mean over its sub-task's criteria (None: a criterion has no score)."""
    crits = [c.code for c in rubric.criteria(record.subtask)]
    s = record.scores
    return mean(s[c] for c in crits) if all(c in s for c in crits) else None
