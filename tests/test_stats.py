"""Stats oracles: hand-computed adjustments and HL, scipy for the tests, an independent BH/Holm."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from offline_eval.metrics.bootstrap import Clusters
from offline_eval.metrics.stats import adjust_family, benjamini_hochberg, bonferroni, hodges_lehmann, holm, paired_test


def test_adjustments_hand_cases():
    p = [0.01, 0.04, 0.03, 0.20]
    assert bonferroni(p) == pytest.approx([0.04, 0.16, 0.12, 0.80])
    # Holm: sorted 0.01, 0.03, 0.04, 0.20 -> x4, x3, x2, x1 = 0.04, 0.09, 0.08 -> 0.09 (monotone), 0.20
    assert holm(p) == pytest.approx([0.04, 0.09, 0.09, 0.20])
    # BH: sorted p*m/k = 0.04, 0.06, 0.0533, 0.20 -> from the top: 0.20, 0.0533, 0.0533, 0.04
    assert benjamini_hochberg(p) == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.20])
    assert bonferroni([0.5, 0.6]) == [1.0, 1.0] and holm([0.6, 0.5]) == [1.0, 1.0]
    assert benjamini_hochberg([1.0]) == [1.0]


def _bh_reference(p):  # an independent, vectorised formulation
    p = np.asarray(p)
    m = len(p)
    o = np.argsort(p)
    q = np.minimum.accumulate((p[o] * m / np.arange(1, m + 1))[::-1])[::-1]
    out = np.empty(m)
    out[o] = np.minimum(q, 1)
    return out


def _holm_reference(p):
    p = np.asarray(p)
    m = len(p)
    o = np.argsort(p)
    adj = np.maximum.accumulate(p[o] * (m - np.arange(m)))
    out = np.empty(m)
    out[o] = np.minimum(adj, 1)
    return out


@pytest.mark.parametrize("seed", range(10))
def test_adjustments_against_references(seed):
    p = np.random.default_rng(seed).random(int(np.random.default_rng(seed).integers(1, 30))) ** 2
    assert benjamini_hochberg(p) == pytest.approx(_bh_reference(p).tolist())
    assert holm(p) == pytest.approx(_holm_reference(p).tolist())
    if hasattr(stats, "false_discovery_control"):
        assert benjamini_hochberg(p) == pytest.approx(stats.false_discovery_control(p, method="bh").tolist())


def test_hodges_lehmann_hand_cases():
    # Paired: d = [1, 2, 6]; Walsh averages 1, 1.5, 3.5, 2, 4, 6 -> median of (1, 1.5, 2, 3.5, 4, 6) = 2.75
    est, lo, hi = hodges_lehmann([3, 5, 10], [2, 3, 4], paired=True, n_resamples=200)
    assert est == pytest.approx(2.75) and lo <= est <= hi
    # Two-sample: x - y over all pairs of [1, 5] and [0, 2]: 1, -1, 5, 3 -> median 2
    assert hodges_lehmann([1, 5], [0, 2], paired=False, n_resamples=50)[0] == pytest.approx(2.0)
    # Seeded: the same CI twice.
    assert hodges_lehmann([3, 5, 10, 1], [2, 3, 4, 2], seed=4) == hodges_lehmann([3, 5, 10, 1], [2, 3, 4, 2], seed=4)


@pytest.mark.parametrize("n", [1, 2, 7, 8, 60, 301])
def test_hodges_lehmann_on_few_levels_equals_the_pairwise_definition(n):
    """0/1 and rubric-point scores take the counting path: estimate and bootstrap CI must equal the median over
    every Walsh average (i <= j), computed pair by pair, on the same resamples."""
    import itertools

    import numpy as np

    def walsh(d):
        return float(
            np.median([(d[i] + d[j]) / 2 for i, j in itertools.combinations_with_replacement(range(len(d)), 2)])
        )

    rng = np.random.default_rng(n)
    x, y = rng.integers(0, 2, n).astype(float), rng.choice([0.0, 0.5, 1.0], n)
    d = x - y
    est, lo, hi = hodges_lehmann(x.tolist(), y.tolist(), n_resamples=40, seed=3)
    boot_rng = np.random.default_rng(3)
    ordered = np.sort(d)[::-1]  # the order the tool draws in: clusters by their contents, not as listed
    boots = [walsh(ordered[boot_rng.integers(0, n, n)]) for _ in range(40)]
    assert est == walsh(d)
    assert (lo, hi) == pytest.approx(tuple(np.percentile(boots, [2.5, 97.5])), abs=1e-12)


def test_paired_test_matches_scipy():
    rng = np.random.default_rng(0)
    x = rng.normal(70, 10, 60)
    y = x - rng.normal(2, 5, 60)
    r = paired_test(x, y, "a vs b", n_resamples=300)
    assert r.wilcoxon_p == pytest.approx(stats.wilcoxon(x, y).pvalue)
    assert r.wilcoxon_stat == pytest.approx(stats.wilcoxon(x, y).statistic)
    assert r.t_p == pytest.approx(stats.ttest_rel(x, y).pvalue)
    assert r.shapiro_p == pytest.approx(stats.shapiro(x - y).pvalue)
    assert r.cohens_d == pytest.approx(stats.ttest_rel(x, y).statistic / np.sqrt(60))  # d_z = t / sqrt(n)
    assert r.hl_low < r.hl < r.hl_high and r.hl == pytest.approx(
        np.median([(a + b) / 2 for i, a in enumerate(x - y) for b in (x - y)[i:]])
    )


def test_degenerate_pairs_do_not_crash():
    r = paired_test([1, 0, 1], [1, 0, 1])
    assert r.test == "mcnemar" and r.p == 1.0 and r.wilcoxon_p is None and r.t_p is None and r.hl == 0.0
    assert r.discordant == [0, 0] and r.bootstrap_p == 1.0
    g = paired_test([0.5, 0.2, 0.9], [0.5, 0.2, 0.9])
    assert g.test == "wilcoxon" and g.p == g.wilcoxon_p == 1.0 and g.t_p is None


def test_binary_pairs_take_mcnemar_and_a_cluster_bootstrap_beside_it():
    x = [1] + [0] * 7 + [1, 0, 1]
    y = [0] + [1] * 7 + [1, 0, 1]
    r = paired_test(x, y)
    assert r.test == "mcnemar" and r.p == pytest.approx(18 / 256) and r.discordant == [1, 7]
    # Two questions hold all the disagreement: resampling questions, the evidence thins.
    questions = paired_test(x, y, clusters=Clusters.of(["a", "b", "b", "b", "b", "b", "b", "b", "c", "d", "e"]))
    assert questions.p == r.p and questions.n_clusters == 5 and questions.bootstrap_p > r.bootstrap_p


def test_family_adjustment_fills_every_column():
    rng = np.random.default_rng(1)
    base = rng.normal(0, 1, 40)
    fam = adjust_family([paired_test(base + s, base, f"c{s}", n_resamples=100) for s in (0.0, 0.3, 1.0)])
    p = [r.p for r in fam]
    assert p == [r.wilcoxon_p for r in fam]
    assert [r.p_bonf for r in fam] == pytest.approx(bonferroni(p))
    assert [r.p_holm for r in fam] == pytest.approx(holm(p))
    assert [r.q_bh for r in fam] == pytest.approx(benjamini_hochberg(p))
