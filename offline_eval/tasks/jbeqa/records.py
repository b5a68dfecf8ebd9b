"""JBEQA's per-statement record: what its results files hold, read by the task, its report and later sweeps."""

from __future__ import annotations

from dataclasses import dataclass, field

from offline_eval.tasks.kit import UNSET, JsonRecord, Unset


@dataclass(kw_only=True)
class JBEQARecord(JsonRecord):
    """One statement's record; a skipped one (did not fit the context) has no pred, token counts or logprobs."""

    id: str
    subject: str  # the Japanese subject name (民法, 刑法, 憲法)
    year: int  # Gregorian
    output: str
    finish_reason: str
    gold: int  # 1: the statement is correct
    parsed: int | None  # a bare 1 or 0; None: anything else
    pred: int | Unset = UNSET  # the answer as scored: anything but a bare 1 counts as 0
    skipped: bool = False
    scores: dict[str, int] = field(default_factory=dict)  # correct, and faithful outside logprob mode
    prompt_tokens: int | Unset = UNSET
    output_tokens: int | Unset = UNSET
    logprobs: dict[str, float] | Unset = UNSET  # logprob mode: label -> log-probability
    reasoning: str | Unset = UNSET  # a reasoning model's thinking, before the answer in `output`
    reasoning_tokens: int | Unset = UNSET
    reasoning_cut: bool | Unset = UNSET  # the budget ended the thinking
    sample: int | Unset = UNSET  # which of its item's k answers (samples: k > 1), from 0
