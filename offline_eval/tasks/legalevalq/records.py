"""LegalEval-Q's per-answer record: what its results files hold, read by the task, its report, annotation and later sweeps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from offline_eval.tasks.kit import UNSET, JsonRecord, Unset


@dataclass(kw_only=True)
class LegalEvalQRecord(JsonRecord):
    """One candidate answer; the evaluation stage fills in evaluation, parsed (the conclusion) and scores."""

    id: str
    split: str = "train"  # or validation
    query: str
    output: str
    finish_reason: str
    gold: str | None  # the dataset's reference answer, where it has one
    parsed: str | None = None  # the evaluator's conclusion; None: not evaluated, or its answer did not parse
    scores: dict[str, float] = field(default_factory=dict)  # quality: the scorer's 0-100
    evaluation: dict[str, Any] | None = None  # raw, finish_reason, comment, conclusion
    skipped: bool = False
    prompt_tokens: int = 0
    output_tokens: int = 0
    reasoning: str | Unset = UNSET  # a reasoning model's thinking, before the answer in `output`
    reasoning_tokens: int | Unset = UNSET
    reasoning_cut: bool | Unset = UNSET  # the budget ended the thinking
    sample: int | Unset = UNSET  # which of its item's k answers (samples: k > 1), from 0
