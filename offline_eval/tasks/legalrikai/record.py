"""LegalRikai's per-item record, apart from the task so that the task and its agreement tables both read it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from offline_eval.tasks.kit import UNSET, JsonRecord, Unset


@dataclass(kw_only=True)
class LegalRikaiRecord(JsonRecord):
    """One candidate output; the judges' stage fills in judges and scores."""

    id: str
    subtask: str
    input: str  # full | focused (the statutes cut, overflow policy 'focus') | skipped (did not fit)
    output: str
    finish_reason: str
    prompt_tokens: int
    output_tokens: int
    gold: Any  # AmendExp: {summary, impact}; the revised contract otherwise
    parsed: Any = None  # the answer in the asked-for form (sections, revised articles); None: a format failure
    checks: dict[str, Any] | None = None  # the deterministic checks of a revised contract
    judges: dict[str, dict[str, Any]] = field(default_factory=dict)  # judge run -> its verdict (judges.judge_entry)
    scores: dict[str, float] = field(default_factory=dict)  # criterion -> mean over the judges, in [0, 1]
    revised: str | Unset = UNSET  # StatRev: the input contract with the output's articles merged back
    reasoning: str | Unset = UNSET  # a reasoning model's thinking, before the answer in `output`
    reasoning_tokens: int | Unset = UNSET
    reasoning_cut: bool | Unset = UNSET  # the budget ended the thinking
    sample: int | Unset = UNSET  # which of its item's k answers (samples: k > 1), from 0

    @property
    def skipped(self) -> bool:
        return self.input == "skipped"

    @property
    def source_item(self) -> str:
        """The cluster of its scores: every candidate's output for one item shares its statutes and contract."""
        return f"{self.subtask}/{self.id}"
