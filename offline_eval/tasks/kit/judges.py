"""LLM-as-judge, task-neutral: a rubric's JSON schema, strict parsing of a judge's answer, and the mean over
several judges of scores mapped to [0, 1]. Tasks supply the criteria and the prompt."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import mean
from typing import Any

from offline_eval.inference.requests import Result
from offline_eval.metrics.agreement import normalise


@dataclass(frozen=True)
class Criterion:
    code: str
    name: str
    definition: str
    scale: tuple[tuple[int, str], ...]  # (point, description), lowest first

    @property
    def lo(self) -> int:
        return self.scale[0][0]

    @property
    def hi(self) -> int:
        return self.scale[-1][0]

    def normalise(self, score: float) -> float:
        """(s - min)/(max - min)."""
        return normalise(score, self.lo, self.hi)


def rubric_schema(criteria: Sequence[Criterion], rationale_max_chars: int) -> dict[str, Any]:
    """For each criterion: a short rationale and an integer score within its scale."""
    props = {
        c.code: {
            "type": "object",
            "properties": {
                "rationale": {"type": "string", "minLength": 1, "maxLength": rationale_max_chars},
                "score": {"type": "integer", "minimum": c.lo, "maximum": c.hi},
            },
            "required": ["rationale", "score"],
            "additionalProperties": False,
        }
        for c in criteria
    }
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def example_answer(criteria: Sequence[Criterion]) -> str:
    return json.dumps({c.code: {"rationale": "…", "score": c.hi} for c in criteria}, ensure_ascii=False)


def parse_answer(criteria: Sequence[Criterion], text: str) -> tuple[dict[str, int], dict[str, str]] | None:
    """(scores, rationales) when the answer is strict JSON with every criterion's score on its scale; else None."""
    try:
        obj = json.loads(text, strict=True)
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    scores, why = {}, {}
    for c in criteria:
        v = obj.get(c.code)
        if not isinstance(v, dict):
            return None
        s, r = v.get("score"), v.get("rationale")
        if isinstance(s, bool) or not isinstance(s, int) or not c.lo <= s <= c.hi or not isinstance(r, str):
            return None
        scores[c.code], why[c.code] = s, r
    return scores, why


def judge_entry(criteria: Sequence[Criterion], result: Result) -> dict[str, Any]:
    """One judge's verdict on one output, as kept in the per-item record (scores None: a counted failure)."""
    got = parse_answer(criteria, result.text) if result.answered else None
    return {
        "scores": got[0] if got else None,
        "rationales": got[1] if got else None,
        "finish_reason": result.finish_reason,
        "focused": result.focused,
        "raw": result.text,
    }


def mean_over_judges(criteria: Sequence[Criterion], judges: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Per criterion: each judge's score mapped to [0, 1], then the mean over the judges that answered ("Avg")."""
    out = {}
    for c in criteria:
        vals = [c.normalise(j["scores"][c.code]) for j in judges.values() if j.get("scores")]
        if vals:
            out[c.code] = mean(vals)
    return out
