"""The paper's rubrics (package data rubrics.yaml): the criteria each LegalRikai sub-task is judged on."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from offline_eval.tasks.kit import Criterion
from offline_eval.tasks.kit.judges import example_answer, rubric_schema

SUBTASKS = ("amendexp", "statrev", "reqrev", "riskrev")
NAMES = {
    "amendexp": "AmendExp",
    "statrev": "StatRev",
    "reqrev": "ReqRev",
    "riskrev": "RiskRev",
}  # as the paper writes them


@lru_cache(maxsize=1)
def _raw() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("rubrics.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def task_info(subtask: str) -> dict[str, Any]:
    return _raw()["tasks"][subtask]


@lru_cache(maxsize=8)
def criteria(subtask: str) -> tuple[Criterion, ...]:
    out = []
    for code in task_info(subtask)["criteria"]:
        c = _raw()["criteria"][code]
        out.append(
            Criterion(code, c["name"], c["definition"], tuple(sorted((int(k), v) for k, v in c["scale"].items())))
        )
    return tuple(out)


def judge_schema(subtask: str, rationale_max_chars: int) -> dict[str, Any]:
    return rubric_schema(criteria(subtask), rationale_max_chars)


def example(subtask: str) -> str:
    return example_answer(criteria(subtask))
