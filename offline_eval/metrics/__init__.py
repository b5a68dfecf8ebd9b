"""Metrics. Each function is tested against hand-computed values and an independent implementation."""
