"""The paper's rubrics (package data rubrics.yaml), the judges' JSON schema, and parsing their answers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from ...metrics.agreement import normalise

SUBTASKS = ("amendexp", "statrev", "reqrev", "riskrev")


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
        return normalise(score, self.lo, self.hi)


@lru_cache(maxsize=1)
def _raw() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("rubrics.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def task_info(subtask: str) -> dict[str, Any]:
    return _raw()["tasks"][subtask]


def criteria(subtask: str) -> list[Criterion]:
    out = []
    for code in task_info(subtask)["criteria"]:
        c = _raw()["criteria"][code]
        out.append(Criterion(code, c["name"], c["definition"], tuple(sorted((int(k), v) for k, v in c["scale"].items()))))
    return out


def judge_schema(subtask: str, rationale_max_chars: int) -> dict[str, Any]:
    """For each criterion: a short rationale and an integer score within its scale."""
    props = {c.code: {"type": "object",
                      "properties": {"rationale": {"type": "string", "minLength": 1, "maxLength": rationale_max_chars},
                                     "score": {"type": "integer", "minimum": c.lo, "maximum": c.hi}},
                      "required": ["rationale", "score"], "additionalProperties": False}
             for c in criteria(subtask)}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def example_answer(subtask: str) -> str:
    return json.dumps({c.code: {"rationale": "…", "score": c.hi} for c in criteria(subtask)}, ensure_ascii=False)


def parse_judge(subtask: str, text: str) -> tuple[dict[str, int], dict[str, str]] | None:
    """(scores, rationales) when the answer is strict JSON with every criterion's score on its scale; else None."""
    try:
        obj = json.loads(text, strict=True)
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    scores, why = {}, {}
    for c in criteria(subtask):
        v = obj.get(c.code)
        if not isinstance(v, dict):
            return None
        s, r = v.get("score"), v.get("rationale")
        if isinstance(s, bool) or not isinstance(s, int) or not c.lo <= s <= c.hi or not isinstance(r, str):
            return None
        scores[c.code], why[c.code] = s, r
    return scores, why
