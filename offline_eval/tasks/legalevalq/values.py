"""LegalEval-Q's values, declared once: AdjScore and the mean of the scorer's 0-100 qualities (each answer's quality
is its item score), and the counts and statistics a run reports beside them."""

from __future__ import annotations

from offline_eval.metrics.bootstrap import adj_score_of, moments_columns
from offline_eval.runtime.i18n import N_
from offline_eval.tasks.kit import Bootstrapped, Count, Metric

from .records import LegalEvalQRecord


def _quality(record: LegalEvalQRecord) -> float | None:
    """The scorer's 0-100 quality of an answer (None: not scored)."""
    return record.scores.get("quality")


ADJ_SCORE = Metric(
    "adj_score", "AdjScore", digits=2, ci=Bootstrapped.of_items(_quality, moments_columns, adj_score_of, 4, given=True),
    margin=2.0,
)  # fmt: skip
MEAN = Metric("mean", N_("mean"), digits=2, ci=Bootstrapped.mean(_quality, 4, given=True))

STD = Count("std", "std")
MEDIAN = Count("median", "median")
ADJ_SCORE_DELTA = Count("adj_score_delta", "AdjScore validation - train")
MEAN_DELTA = Count("mean_delta", "mean validation - train")
N_ANSWERS = Count("n_answers", "answers")
N_EVALUATED = Count("n_evaluated", "evaluated")
N_SCORED = Count("n_scored", "scored")
EVALUATOR_PARSE_FAILURES = Count("evaluator_parse_failures", "evaluator parse failures")
TRUNCATED_ANSWERS = Count("truncated_answers", "answers cut off")
COUNTS = (STD, MEDIAN, ADJ_SCORE_DELTA, MEAN_DELTA, N_ANSWERS, N_EVALUATED, N_SCORED, EVALUATOR_PARSE_FAILURES,
          TRUNCATED_ANSWERS)  # fmt: skip
