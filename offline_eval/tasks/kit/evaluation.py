"""A task's optional second stage, in a companion object beside the task: evaluators (LLM judges, an evaluation
model), each loaded once after every candidate, whose answers score the candidates' outputs. A task that has one
returns it from `Task.evaluation()`; the sweep, the dry run, the plan and `verify` reach the stage only through it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Generic

from offline_eval.inference.constraints import Constraint
from offline_eval.inference.requests import Phase, Result
from offline_eval.models.spec import ModelSpec
from offline_eval.results.records import R, Records

from .datafiles import ItemT


class Evaluation(ABC, Generic[ItemT, R]):
    @abstractmethod
    def models(self) -> list[ModelSpec]:
        """The evaluators, each a ModelSpec of one variant and one context length."""

    @abstractmethod
    def phase(self, items: Sequence[ItemT], records: Records[R]) -> Phase:
        """One request per candidate output to evaluate; `records` are keyed by run and setting."""

    @abstractmethod
    def finish(self, records: Records[R], phase: Phase, results: dict[str, Sequence[Result]]) -> Records[R]:
        """Fold each evaluator's results (keyed by its run name; a failed evaluator is absent) into the records."""

    @abstractmethod
    def constraint(self, setting: dict[str, Any]) -> Constraint | None:
        """The constraint the evaluators' answers on this setting are decoded under (None: free text)."""

    @abstractmethod
    def answers(self, record: R) -> list[str]:
        """The evaluators' raw answers that were parsed into this record's scores, for `verify` to check against
        constraint()."""
