"""LegalRikai's judged numbers (kit/calibration.py): each criterion of a sub-task for each judge and for their
average, and the sub-task's score, all on [0, 1]; the human truth of an output is its annotators' mean."""

from __future__ import annotations

from collections.abc import Callable

from offline_eval.tasks.kit import Criterion
from offline_eval.tasks.kit.calibration import JudgedNumber

from .. import rubric
from ..metrics import SCORE, item_score
from ..record import LegalRikaiRecord


def judged_numbers(subtask: str, judge_names: list[str]) -> list[JudgedNumber]:
    crits = rubric.criteria(subtask)
    out = []
    for c in crits:
        for j in ["Avg", *judge_names]:
            out.append(JudgedNumber(c.code, j, (0.0, 1.0), _judge_value(c, j), _label(c.code), levels=c.hi - c.lo + 1))
    codes = [c.code for c in crits]
    out.append(
        JudgedNumber(
            SCORE.name,
            "Avg",
            (0.0, 1.0),
            item_score,
            lambda v: sum(v[k] for k in codes) / len(codes) if all(k in v for k in codes) else None,
            headline=True,
        )
    )
    return out


def _label(code: str) -> Callable[[dict[str, float]], float | None]:
    return lambda v: v.get(code)


def _judge_value(c: Criterion, judge: str) -> Callable[[LegalRikaiRecord], float | None]:
    if judge == "Avg":
        return lambda r: r.scores.get(c.code)

    def value(r: LegalRikaiRecord) -> float | None:
        got = (r.judges.get(judge) or {}).get("scores")
        return c.normalise(got[c.code]) if got and c.code in got else None

    return value
