"""Whether a paired test treats an item's score as right/wrong or graded comes from the paired metric's declaration
(`Metric.paired`), not from the values a run happens to give: a graded metric whose items all score 0 or 1 (a few
LegalRikai items judged all-or-nothing) never gets McNemar's test or Tango's interval, which take each item as one
right/wrong trial."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from offline_eval.comparison.match import _flips
from offline_eval.inference.requests import Result
from offline_eval.metrics.noninferiority import BOOTSTRAP, SCORE, compare
from offline_eval.metrics.paired import mcnemar_exact
from offline_eval.metrics.stats import paired_test
from offline_eval.pipeline.analyses.verdicts import paired_verdict
from offline_eval.tasks import make_task
from offline_eval.tasks.jbeqa import JBEQATask
from offline_eval.tasks.legalevalq import LegalEvalQTask
from offline_eval.tasks.legalrikai import LegalRikaiTask

DATA = Path(__file__).resolve().parent.parent / "data" / "jbeqa"

# 40 items in 20 clusters of 2; the variant is right on 30, the reference on 32, 6 discordant pairs.
RNG = np.random.default_rng(5)
X = (RNG.random(40) < 0.75).astype(float)
Y = X.copy()
Y[[1, 5, 9, 13]] = 1 - Y[[1, 5, 9, 13]]
CLUSTERS = [f"q{i // 2}" for i in range(40)]


def test_every_task_declares_what_its_paired_scores_are():
    assert JBEQATask.noninferiority_metric().paired == "binary"  # correct or not, per statement
    assert LegalRikaiTask.noninferiority_metric().paired == "graded"  # a mean of rubric criteria in [0, 1]
    assert LegalEvalQTask.noninferiority_metric().paired == "graded"  # a 0-100 score


def test_noninferiority_follows_the_declaration_not_the_values():
    binary = compare(X, Y, 0.1, clusters=CLUSTERS, kind="binary")
    graded = compare(X, Y, 0.1, clusters=CLUSTERS, kind="graded")
    assert (binary.method, binary.paired_test) == (SCORE, "mcnemar")
    assert binary.paired_p == pytest.approx(mcnemar_exact(X, Y))
    assert (graded.method, graded.paired_test) == (BOOTSTRAP, "wilcoxon")
    assert graded.paired_p == pytest.approx(stats.wilcoxon(X, Y).pvalue)  # scipy as the oracle
    # A binary metric answered k times per item: an item's score is its samples' mean, so the test is graded.
    means = compare(X * 0.5 + 0.25, Y * 0.5, 0.1, clusters=CLUSTERS, kind="binary")
    assert means.method == BOOTSTRAP
    # Not declared (a direct call): read off the values, as before.
    assert compare(X, Y, 0.1, clusters=CLUSTERS).method == SCORE


def test_ablation_tests_follow_the_declaration():
    binary = paired_test(X, Y, kind="binary")
    graded = paired_test(X, Y, kind="graded")
    assert binary.test == "mcnemar" and binary.p == pytest.approx(mcnemar_exact(X, Y))
    assert graded.test == "wilcoxon" and graded.p == pytest.approx(stats.wilcoxon(X, Y).pvalue)


class GradedJBEQA(JBEQATask):
    """JBE-QA with its accuracy declared graded: the same 0/1 item scores, another kind of test."""

    metrics = tuple(dataclasses.replace(m, paired="graded") if m.name == "accuracy" else m for m in JBEQATask.metrics)


def test_a_task_verdict_and_its_flips_follow_the_declaration():
    task = make_task("jbeqa", {"protocol": "offline-eval", "data": str(DATA), "bootstrap": 0})
    graded = GradedJBEQA(task.options)
    items = task.load()
    setting = {"shots": 0, "mode": "constrained"}
    right = [task.score(it, Result(text="1" if it.answer else "0"), setting) for it in items]
    some_wrong = [
        task.score(it, Result(text=("0" if it.answer else "1") if i % 4 == 0 else ("1" if it.answer else "0")), setting)
        for i, it in enumerate(items)
    ]
    assert paired_verdict(task, some_wrong, right, 0.1).method == SCORE
    assert paired_verdict(graded, some_wrong, right, 0.1).method == BOOTSTRAP
    ids = {r.id for r in right}
    flips = _flips(task, right, some_wrong, ids, "s", "a", "b")
    assert len(flips) == sum(1 for i in range(len(items)) if i % 4 == 0) and flips[0].direction == "right->wrong"
    assert _flips(graded, right, some_wrong, ids, "s", "a", "b") is None  # graded scores are not right or wrong
