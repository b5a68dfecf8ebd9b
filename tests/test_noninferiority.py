"""Non-inferiority of a variant against its reference: hand-computed cases, and scipy where it overlaps."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from offline_eval.metrics.adjscore import adj_score
from offline_eval.metrics.noninferiority import (
    INCONCLUSIVE,
    INFERIOR,
    NON_INFERIOR,
    adjust,
    compare,
    items_needed,
    verdict,
)


def test_verdict_reads_the_ci_against_the_margin():
    assert verdict(-0.019, 0.05, 0.02) == NON_INFERIOR
    assert verdict(-0.02, 0.05, 0.02) == INCONCLUSIVE  # the bound on -margin is not above it
    assert verdict(-0.3, -0.021, 0.02) == INFERIOR
    assert verdict(-0.3, 0.0, 0.02) == INCONCLUSIVE


def test_a_constant_difference_has_a_point_ci():
    ref = [0.2, 0.5, 0.9, 0.4]
    better = compare([r + 0.01 for r in ref], ref, 0.02, n_resamples=999)
    assert better.estimate == pytest.approx(0.01) and better.ci_low == pytest.approx(0.01)
    assert better.ci_high == pytest.approx(0.01) and better.verdict == NON_INFERIOR
    assert better.p_noninferiority == pytest.approx(1 / 1000)  # no resample at or below -margin
    worse = compare([r - 0.5 for r in ref], ref, 0.02, n_resamples=999)
    assert worse.verdict == INFERIOR and worse.p_noninferiority == 1.0 and worse.items_needed is None


def test_a_broken_variant_answering_zero_is_inferior_on_binary_scores():
    rng = np.random.default_rng(1)
    ref = (rng.random(200) < 0.7).astype(float)
    res = compare(np.zeros(200), ref, 0.02)
    assert res.estimate == pytest.approx(-ref.mean()) and res.verdict == INFERIOR
    assert res.hl is None  # 0/1 differences: no shift estimate


def test_lower_is_better_flips_the_sign():
    ref = [10.0, 12.0, 11.0, 9.0]
    res = compare([r + 1 for r in ref], ref, 0.5, higher_is_better=False)
    assert res.estimate == pytest.approx(-1.0) and res.verdict == INFERIOR


def test_items_needed_hand_computed():
    # se = 0.06 / (2 z), so z se = 0.03 at n=100; the gap to -margin is 0.02: n (0.03/0.02)^2 = 225.
    assert items_needed(0.0, -0.03, 0.03, 100, 0.02) == 225
    assert items_needed(-0.02, -0.05, 0.01, 100, 0.02) is None  # on the margin: nothing decides
    rng = np.random.default_rng(3)
    ref = rng.normal(0.5, 0.2, 40)
    res = compare(ref + rng.normal(0.0, 0.1, 40), ref, 0.02)
    assert res.verdict == INCONCLUSIVE and res.items_needed is not None and res.items_needed > 40


def test_matches_scipy_on_normal_differences():
    rng = np.random.default_rng(7)
    ref = rng.normal(50, 10, 250)
    var = ref + rng.normal(-0.5, 3, 250)
    d = var - ref
    res = compare(var, ref, 1.0, n_resamples=4000, seed=5)
    assert res.estimate == pytest.approx(d.mean())
    boot = stats.bootstrap((d,), np.mean, n_resamples=4000, method="percentile", random_state=0)
    assert res.ci_low == pytest.approx(boot.confidence_interval.low, abs=0.05)
    assert res.ci_high == pytest.approx(boot.confidence_interval.high, abs=0.05)
    t_one_sided = stats.ttest_1samp(d, -1.0, alternative="greater").pvalue
    assert res.p_noninferiority == pytest.approx(t_one_sided, abs=0.01)
    assert res.wilcoxon_p == pytest.approx(stats.wilcoxon(var, ref).pvalue)
    assert res.t_p == pytest.approx(stats.ttest_rel(var, ref).pvalue)
    assert res.hl is not None and res.hl_low is not None and res.hl_high is not None
    assert res.hl_low <= res.hl <= res.hl_high
    assert compare(var, ref, 1.0, n_resamples=4000, seed=5) == res  # seeded: reproducible


def test_hodges_lehmann_hand_computed():
    # Differences 1, 2, 3, 4, 5: the Walsh averages' median is 3.
    res = compare([1.0, 2.0, 3.0, 4.0, 5.0], [0.0] * 5, 0.5, n_resamples=200)
    assert res.hl == 3.0


def test_a_task_statistic_replaces_the_mean():
    ref = [60.0, 80.0, 100.0, 70.0]
    var = [50.0, 80.0, 90.0, 70.0]
    res = compare(var, ref, 2.0, statistic=lambda a: adj_score(a.tolist()))
    assert res.estimate == pytest.approx(adj_score(var) - adj_score(ref))
    assert res.hl is None


def test_holm_across_the_family_hand_computed():
    fam = [compare([1.0, 2.0], [0.0, 0.0], 0.1) for _ in range(3)]
    for r, p in zip(fam, (0.01, 0.04, 0.03)):
        r.p_noninferiority = r.wilcoxon_p = p
    adjust(fam)
    assert [r.p_noninferiority_holm for r in fam] == pytest.approx([0.03, 0.06, 0.06])
    assert [r.wilcoxon_p_holm for r in fam] == pytest.approx([0.03, 0.06, 0.06])


def test_too_few_items_is_inconclusive_and_a_bad_margin_is_refused():
    res = compare([1.0], [1.0], 0.02)
    assert res.verdict == INCONCLUSIVE and res.estimate is None and res.n == 1
    with pytest.raises(ValueError, match="margin must be positive"):
        compare([1.0, 2.0], [1.0, 2.0], 0.0)
    same = compare([1.0, 1.0], [1.0, 1.0], 0.02)  # identical runs: a zero-width CI at 0
    assert (same.ci_low, same.ci_high, same.verdict) == (0.0, 0.0, NON_INFERIOR)
