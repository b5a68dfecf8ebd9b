"""Metrics. Each function is tested against hand-computed values and an independent implementation."""

from offline_eval.metrics.adjscore import adj_score

__all__ = ["adj_score"]
