"""Binary classification metrics with positive class = True (JBE-QA's convention)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def confusion(gold: Sequence[bool], pred: Sequence[bool]) -> tuple[int, int, int, int]:
    """(tp, fp, fn, tn)."""
    g = np.asarray(gold, dtype=bool)
    p = np.asarray(pred, dtype=bool)
    return (int(np.sum(g & p)), int(np.sum(~g & p)), int(np.sum(g & ~p)), int(np.sum(~g & ~p)))


def accuracy(gold: Sequence[bool], pred: Sequence[bool]) -> float:
    g = np.asarray(gold, dtype=bool)
    return float(np.mean(g == np.asarray(pred, dtype=bool))) if len(g) else float("nan")


def precision_recall_f1(gold: Sequence[bool], pred: Sequence[bool]) -> tuple[float, float, float]:
    """Zero where undefined (no predicted / no gold positives), as sklearn's zero_division=0."""
    tp, fp, fn, _ = confusion(gold, pred)
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
    return p, r, f


def f1(gold: Sequence[bool], pred: Sequence[bool]) -> float:
    return precision_recall_f1(gold, pred)[2]
