"""Metric oracles: hand-computed cases, and sklearn / scipy as independent references (tests only)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score

from offline_eval.metrics.bootstrap import Clusters, f1_columns, f1_of, mean_columns, mean_of, percentile, resample
from offline_eval.metrics.classification import accuracy, confusion, f1, precision_recall_f1


def test_hand_computed_case():
    gold = [True, True, True, False, False, False, False, True]
    pred = [True, False, True, True, False, False, True, True]
    # tp=3 (0,2,7), fp=2 (3,6), fn=1 (1), tn=2 (4,5)
    assert confusion(gold, pred) == (3, 2, 1, 2)
    p, r, f = precision_recall_f1(gold, pred)
    assert p == pytest.approx(3 / 5)
    assert r == pytest.approx(3 / 4)
    assert f == pytest.approx(2 * 3 / (2 * 3 + 2 + 1))
    assert accuracy(gold, pred) == pytest.approx(5 / 8)


def test_degenerate_cases_follow_zero_division_zero():
    assert precision_recall_f1([False, False], [False, False]) == (0.0, 0.0, 0.0)
    assert f1([True, True], [False, False]) == 0.0
    assert f1([False, True], [True, False]) == 0.0


@pytest.mark.parametrize("seed", range(20))
def test_against_sklearn(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 200))
    gold = rng.random(n) < 0.48
    pred = rng.random(n) < rng.random()
    p, r, f = precision_recall_f1(gold, pred)
    assert f == pytest.approx(f1_score(gold, pred, zero_division=0))
    assert p == pytest.approx(precision_score(gold, pred, zero_division=0))
    assert r == pytest.approx(recall_score(gold, pred, zero_division=0))
    assert accuracy(gold, pred) == pytest.approx(accuracy_score(gold, pred))


def test_bootstrap_matches_an_independent_resampling_loop():
    """Every item its own cluster: the clustered bootstrap's draws are an item bootstrap's, done by hand here."""
    rng = np.random.default_rng(7)
    gold = rng.random(60) < 0.5
    pred = rng.random(60) < 0.5
    boots = resample(f1_of, f1_columns(gold, pred), Clusters.singletons(60), n_resamples=300, seed=3)
    lo, hi = percentile(boots)
    draws = np.random.default_rng(3).integers(0, 60, size=(300, 60))
    # The clusters are drawn in one canonical order, by what they hold (here: tp, fp, fn), not as listed.
    order = np.array(sorted(range(60), key=lambda i: (gold[i] & pred[i], ~gold[i] & pred[i], gold[i] & ~pred[i])))
    gold, pred = gold[order], pred[order]
    vals = []
    for idx in draws:
        g, p = gold[idx], pred[idx]
        tp = np.sum(g & p)
        fp = np.sum(~g & p)
        fn = np.sum(g & ~p)
        vals.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    assert (lo, hi) == pytest.approx(tuple(np.percentile(vals, [2.5, 97.5])))


def test_clustered_bootstrap_pools_the_drawn_clusters_by_hand():
    """Clusters of 1, 2 and 3 items: each resample's accuracy is the pooled mean over the items of the clusters
    drawn, recomputed here from the same draws."""
    labels = ["a", "b", "b", "c", "c", "c"]
    correct = np.array([1.0, 0.0, 1.0, 1.0, 1.0, 0.0])
    boots = resample(mean_of, mean_columns(correct), Clusters.of(labels), n_resamples=50, seed=4)
    members = {0: [0], 1: [1, 2], 2: [3, 4, 5]}
    draws = np.random.default_rng(4).integers(0, 3, size=(50, 3))
    expected = [np.mean([correct[i] for k in row for i in members[int(k)]]) for row in draws]
    assert boots == pytest.approx(expected)


def test_bootstrap_agrees_with_scipy_percentile_interval():
    rng = np.random.default_rng(11)
    gold = rng.random(400) < 0.5
    pred = np.where(rng.random(400) < 0.7, gold, ~gold)
    correct = (gold == pred).astype(float)
    lo, hi = percentile(resample(mean_of, mean_columns(correct), Clusters.singletons(400), 4000, seed=0))
    ref = stats.bootstrap(
        (gold, pred),
        lambda g, p: np.mean(g == p),
        paired=True,
        vectorized=False,
        n_resamples=4000,
        method="percentile",
        random_state=1,
    ).confidence_interval
    assert lo == pytest.approx(ref.low, abs=0.01)
    assert hi == pytest.approx(ref.high, abs=0.01)
    assert lo < accuracy(gold, pred) < hi
