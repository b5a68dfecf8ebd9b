"""JBE-QA's values beside its leaderboard metrics, declared once."""

from __future__ import annotations

from offline_eval.tasks.kit import Count

PRECISION = Count("precision", "precision")
RECALL = Count("recall", "recall")
ANSWERED_TRUE = Count("answered_true", "share of statements answered true")
COUNTS = (PRECISION, RECALL, ANSWERED_TRUE)
