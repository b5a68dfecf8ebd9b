"""Metrics. Each function is tested against hand-computed values and an independent implementation."""

from .adjscore import adj_score

__all__ = ["adj_score"]
