"""LegalRikai's metrics of one run on one sub-task: inputs and failures, the checks against the reference
revision, each judge's mean score per criterion, and the criteria's Avg (the mean over the judges that
answered) and their mean, the score."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import mean

from offline_eval.metrics.values import JudgeMetrics
from offline_eval.runtime.i18n import N_
from offline_eval.tasks.kit import N_SKIPPED, Bootstrapped, Count, Metric, RunMetrics

from . import rubric
from .record import LegalRikaiRecord

N_ITEMS = Count("n_items", "items")
N_FULL = Count("n_full", "full input")
N_FOCUSED = Count("n_focused", "focused input (overflow policy 'focus')")
TRUNCATED = Count("truncated", "answers cut by their cap")
FORMAT_FAILURES = Count("format_failures", "answers in no readable form")
N_JUDGED = Count("n_judged", "items the judges scored")
CHECKS = tuple(
    Count(name, name)
    for name in ("diff_chars", "changed_precision", "changed_recall", "changed_f1", "introduced_defects")
)
CRITERIA = tuple({c.code: Count(c.code, c.name) for s in rubric.SUBTASKS for c in rubric.criteria(s)}.values())
COUNTS = (N_ITEMS, N_FULL, N_FOCUSED, TRUNCATED, FORMAT_FAILURES, N_JUDGED, *CHECKS, *CRITERIA)


def aggregate(subtask: str, records: Sequence[LegalRikaiRecord], cut_judged: bool = True) -> RunMetrics:
    """`truncated`: the answers cut off by their cap. `cut_judged` False (protocol paper): those were neither read
    nor judged, so they count in no criterion's mean and are not format failures (they are counted apart)."""
    done = [r for r in records if not r.skipped]
    read = [r for r in done if cut_judged or r.finish_reason != "length"]
    m = RunMetrics()
    m.update(
        {
            N_ITEMS.name: len(records),
            N_FULL.name: sum(r.input == "full" for r in records),
            N_FOCUSED.name: sum(r.input == "focused" for r in records),
            N_SKIPPED.name: len(records) - len(done),
            TRUNCATED.name: sum(r.finish_reason == "length" for r in done),
            FORMAT_FAILURES.name: sum(r.parsed is None for r in read),
        }
    )
    checked = [r.checks for r in done if r.checks]
    for k in CHECKS if checked else ():
        m.put(k.name, round(mean(c[k.name] for c in checked), 4))
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
    m.put(N_JUDGED.name, len(scored))
    means = {}
    for code in crits:
        vals = [(r.scores[code], r.input == "focused") for r in scored if code in r.scores]
        if vals:
            means[code] = mean(v for v, _ in vals)
            m.put(code, round(means[code], 4))
            m.group("criterion", code, "focused_share", round(sum(f for _, f in vals) / len(vals), 4))
    if len(means) == len(crits):
        m.put(SCORE.name, round(mean(means.values()), 4))
    return m


def item_score(record: LegalRikaiRecord) -> float | None:
    """The item's mean over its sub-task's criteria (None: a criterion has no score)."""
    crits = [c.code for c in rubric.criteria(record.subtask)]
    s = record.scores
    return mean(s[c] for c in crits) if all(c in s for c in crits) else None


# The score is the mean of the criteria's means (aggregate); its interval resamples the items' scores.
SCORE = Metric(
    "score", N_("score"), digits=2, ci=Bootstrapped.mean(item_score, 4, given=True), margin=0.05, bounds=(0.0, 1.0)
)
