"""docs/statistics.md's worked example, recomputed: the numbers the page quotes are the tool's."""

from __future__ import annotations

from pathlib import Path

import pytest

from offline_eval.metrics.noninferiority import compare

DOC = Path(__file__).resolve().parent.parent / "docs" / "statistics.md"


def test_the_worked_design_effect_example():
    x, y, questions = [], [], []
    for k in range(100):
        for _ in range(4):
            questions.append(f"2023-民法-{k + 1}")
            x.append(1 if k < 10 or k >= 15 else 0)  # the variant: right on 10 questions the reference misses
            y.append(0 if k < 10 else 1)  # the reference: right on the 5 questions after them
    alone = compare(x, y, 0.02)
    grouped = compare(x, y, 0.02, clusters=questions)
    text = DOC.read_text(encoding="utf-8")
    assert alone.estimate == pytest.approx(0.05) and "(40 - 20) / 400 = +0.050" in text
    assert alone.ci_low is not None and alone.ci_high is not None
    assert f"[{alone.ci_low:+.3f}, {alone.ci_high:+.3f}]" in text and alone.verdict == "non-inferior"
    assert alone.paired_p is not None and f"McNemar's exact p = {alone.paired_p:.3f}" in text
    assert grouped.design_effect is not None and f"**{grouped.design_effect:.2f}**" in text
    assert grouped.ci_low is not None and grouped.ci_high is not None
    assert f"[{grouped.ci_low:+.3f}, {grouped.ci_high:+.3f}]" in text and grouped.verdict == "inconclusive"
    assert f"about {grouped.items_needed} statements" in text
    assert grouped.bootstrap_p is not None and f"reported beside McNemar's, is {grouped.bootstrap_p:.2f}" in text
