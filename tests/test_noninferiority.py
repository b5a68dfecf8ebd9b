"""Non-inferiority of a variant against its reference: published worked examples, hand-computed cases, and
scipy where it overlaps. Coverage by simulation is in test_coverage.py."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from offline_eval.metrics.bootstrap import MIN_CLUSTERS
from offline_eval.metrics.noninferiority import (
    BOOTSTRAP,
    INCONCLUSIVE,
    INFERIOR,
    NON_INFERIOR,
    SCORE,
    adjust,
    compare,
    items_needed,
    verdict,
)
from offline_eval.metrics.paired import clustered_difference, mcnemar_exact, tango_interval
from offline_eval.tasks.legalevalq.task import LegalEvalQTask

Z = 1.959963984540054


def test_verdict_reads_the_ci_against_the_margin():
    assert verdict(-0.019, 0.05, 0.02) == NON_INFERIOR
    assert verdict(-0.02, 0.05, 0.02) == INCONCLUSIVE  # the bound on -margin is not above it
    assert verdict(-0.3, -0.021, 0.02) == INFERIOR
    assert verdict(-0.3, 0.0, 0.02) == INCONCLUSIVE


@pytest.mark.parametrize(
    ("cells", "low", "high"),
    [
        # Fagerland, Lydersen & Laake (2014), Stat Med 33:2850, Table II: airway hyper-responsiveness before and
        # after stem cell transplantation (Bentur et al. 2009), "Tango asymptotic score": -0.5172 to -0.0260.
        ((1, 1, 7, 12), -0.5172, -0.0260),
        # The same authors' complete response data (Cavo et al. 2012): -0.1240 to -0.0054.
        ((59, 6, 16, 80), -0.1240, -0.0054),
    ],
)
def test_tango_interval_matches_published_examples(cells, low, high):
    a, b, c, d = cells
    lo, hi = tango_interval(b, c, a + b + c + d)
    assert (round(float(lo), 4), round(float(hi), 4)) == (low, high)


def test_four_identical_items_are_inconclusive_not_non_inferior():
    """The demo's case: 4 items, the two runs answer alike. A bootstrap collapses to [0, 0] and clears any margin;
    Tango's interval with no discordant pair is +-z^2 / (n + z^2) = +-0.49 at n = 4."""
    res = compare([1.0, 0.0, 1.0, 1.0], [1.0, 0.0, 1.0, 1.0], 0.02)
    half = Z * Z / (4 + Z * Z)
    assert res.method == SCORE and res.estimate == 0.0
    assert (res.ci_low, res.ci_high) == pytest.approx((-half, half), abs=1e-9) and half == pytest.approx(0.4899, 1e-3)
    assert res.verdict == INCONCLUSIVE and "contains -0.02" in (res.reason or "")
    # What the interval needs to clear -0.02 with no disagreement at all: z^2 / (N + z^2) < 0.02, N > 188.2.
    assert res.items_needed == 189
    assert res.paired_test == "mcnemar" and res.paired_p == 1.0


def test_mcnemar_exact_by_hand():
    # 1 pair where the first is right only, 7 where the second is: 2 * P(X <= 1 | n = 8, p = 1/2) = 2 * 9 / 256.
    x = [1] + [0] * 7 + [1, 0, 1]
    y = [0] + [1] * 7 + [1, 0, 1]
    assert mcnemar_exact(x, y) == pytest.approx(18 / 256)
    assert mcnemar_exact([1, 0], [1, 0]) == 1.0


def test_clusters_widen_the_interval_and_never_narrow_it():
    """The same 0/1 answers: as 80 independent statements, then as 20 questions of 4 whose statements move
    together. The clustered interval is wider by about the square root of the design effect."""
    x = np.array([1, 1, 1, 1, 0, 0, 0, 0, 1, 1] * 8, dtype=float)
    y = np.array([1, 1, 1, 1, 1, 1, 1, 1, 1, 1] * 8, dtype=float)
    order = np.argsort(np.tile(np.arange(20), 4), kind="stable")  # question k holds the four copies of item k
    x, y = x[order], y[order]
    questions = [f"q{i // 4}" for i in range(80)]
    alone = compare(x, y, 0.02)
    grouped = compare(x, y, 0.02, clusters=questions)
    assert alone.estimate == grouped.estimate == pytest.approx(-0.4)
    assert alone.design_effect == 1.0 and grouped.design_effect is not None and grouped.design_effect > 3.5
    assert grouped.ci_low is not None and alone.ci_low is not None
    assert grouped.ci_low < alone.ci_low and grouped.n_clusters == 20
    # Independent statements in clusters: the estimated design effect stays 1 (never below).
    rng = np.random.default_rng(0)
    a, b = (rng.random(400) < 0.7).astype(float), (rng.random(400) < 0.7).astype(float)
    res = compare(a, b, 0.02, clusters=[str(i // 4) for i in range(400)])
    assert res.design_effect is not None and res.design_effect >= 1.0
    d = clustered_difference(a, b)
    assert (res.ci_low, res.ci_high) == pytest.approx((d.low, d.high), abs=0.01)  # a little wider, never narrower
    assert res.ci_low <= d.low and res.ci_high >= d.high


def test_items_needed_accounts_for_the_design_effect():
    x = np.array(([1.0] * 6 + [0.0] * 2 + [1.0] * 2) * 6)
    y = np.array(([1.0] * 6 + [1.0] * 2 + [0.0] * 2) * 6)
    alone = compare(x, y, 0.05)
    order = np.argsort(np.tile(np.arange(20), 3), kind="stable")
    grouped = compare(x[order], y[order], 0.05, clusters=[f"q{i // 3}" for i in range(60)])
    assert alone.verdict == grouped.verdict == INCONCLUSIVE
    assert alone.items_needed is not None and grouped.items_needed is not None and grouped.design_effect is not None
    ratio = grouped.items_needed / alone.items_needed
    assert ratio == pytest.approx(grouped.design_effect, rel=0.05)


def test_items_needed_hand_computed():
    # z se = 0.03 at n = 100; the gap to -margin is 0.02: n (0.03 / 0.02)^2 = 225.
    assert items_needed(0.0, 0.03 / Z, 100, 0.02) == 225
    assert items_needed(-0.02, 0.01, 100, 0.02) is None  # on the margin: nothing decides


def test_a_broken_variant_answering_zero_is_inferior_on_binary_scores():
    rng = np.random.default_rng(1)
    ref = (rng.random(200) < 0.7).astype(float)
    res = compare(np.zeros(200), ref, 0.02)
    assert res.estimate == pytest.approx(-ref.mean()) and res.verdict == INFERIOR and res.method == SCORE
    assert res.hl is None  # 0/1 differences: no shift estimate
    assert res.paired_p == pytest.approx(stats.binomtest(0, int(ref.sum()), 0.5).pvalue)


def test_graded_scores_with_few_clusters_get_no_verdict():
    ref = [0.2, 0.5, 0.9, 0.4]
    res = compare([r + 0.01 for r in ref], ref, 0.02)
    assert res.method == BOOTSTRAP and res.verdict == INCONCLUSIVE
    assert (res.ci_low, res.ci_high) == (None, None) and res.reason is not None and "n too small" in res.reason
    assert res.p_noninferiority is None and res.estimate == pytest.approx(0.01)


def test_a_zero_width_bootstrap_gives_no_verdict():
    """A constant difference on enough items: every resample gives it, the interval has no width; that is not
    evidence, so no verdict."""
    ref = list(np.linspace(0.1, 0.9, MIN_CLUSTERS + 5))
    res = compare([r + 0.01 for r in ref], ref, 0.02)
    assert res.verdict == INCONCLUSIVE and res.ci_low is None and "no spread" in (res.reason or "")


def test_lower_is_better_flips_the_sign():
    rng = np.random.default_rng(2)
    ref = rng.normal(10, 1, 40)
    res = compare(ref + 1 + rng.normal(0, 0.1, 40), ref, 0.5, higher_is_better=False)
    assert res.estimate == pytest.approx(-1.0, abs=0.05) and res.verdict == INFERIOR
    wrong = compare([0.0, 1.0, 0.0, 0.0] * 10, [0.0] * 40, 0.02, higher_is_better=False)  # 0/1 errors: lower is better
    assert wrong.estimate == pytest.approx(-0.25) and wrong.method == SCORE and wrong.verdict == INFERIOR


@pytest.mark.slow
def test_matches_scipy_on_normal_differences():
    rng = np.random.default_rng(7)
    ref = rng.normal(50, 10, 250)
    var = ref + rng.normal(-0.5, 3, 250)
    d = var - ref
    res = compare(var, ref, 1.0, n_resamples=4000, seed=5)
    assert res.estimate == pytest.approx(d.mean())
    # The interval's draws hold two pseudo-items at the worst differences the scores allow (the variant at the
    # lowest score and the reference at the highest, and the reverse): scipy's percentile bootstrap of them too.
    low, high = min(var.min(), ref.min()), max(var.max(), ref.max())
    guarded = np.concatenate([d, [low - high, high - low]])
    boot = stats.bootstrap((guarded,), np.mean, n_resamples=20000, method="percentile", random_state=0)
    assert res.ci_low == pytest.approx(boot.confidence_interval.low, abs=0.05)
    assert res.ci_high == pytest.approx(boot.confidence_interval.high, abs=0.05)
    share = float(np.mean(boot.bootstrap_distribution <= -1.0))
    assert res.p_noninferiority == pytest.approx(share, abs=0.025)  # Monte Carlo error of 4,000 draws: 0.007
    assert res.paired_test == "wilcoxon" and res.paired_p == pytest.approx(stats.wilcoxon(var, ref).pvalue)
    assert res.t_p == pytest.approx(stats.ttest_rel(var, ref).pvalue)
    assert res.bootstrap_p == pytest.approx(stats.ttest_rel(var, ref).pvalue, abs=0.02)
    assert res.hl is not None and res.hl_low is not None and res.hl_high is not None
    assert res.hl_low <= res.hl <= res.hl_high
    assert compare(var, ref, 1.0, n_resamples=4000, seed=5) == res  # seeded: reproducible


def test_hodges_lehmann_hand_computed():
    # Differences 1 .. 25: the Walsh averages are symmetric about 13, their median.
    res = compare([float(i) for i in range(1, 26)], [0.0] * 25, 0.5, n_resamples=200)
    assert res.hl == 13.0


def test_a_task_statistic_replaces_the_mean():
    ref = [60.0, 80.0, 100.0, 70.0] * 6
    var = [50.0, 80.0, 90.0, 70.0] * 6
    res = compare(var, ref, 2.0, statistic=LegalEvalQTask.paired_statistic())
    mu_r, sd_r = np.mean(ref), np.std(ref)
    mu_v, sd_v = np.mean(var), np.std(var)
    assert res.estimate == pytest.approx(mu_v**2 / (mu_v + sd_v) - mu_r**2 / (mu_r + sd_r))
    assert res.method == BOOTSTRAP and res.hl is None


def test_holm_across_the_family_hand_computed():
    fam = [compare([1.0, 2.0] * 12, [0.0, 0.0] * 12, 0.1) for _ in range(3)]
    for r, p in zip(fam, (0.01, 0.04, 0.03)):
        r.p_noninferiority = r.paired_p = p
    adjust(fam)
    assert [r.p_noninferiority_holm for r in fam] == pytest.approx([0.03, 0.06, 0.06])
    assert [r.paired_p_holm for r in fam] == pytest.approx([0.03, 0.06, 0.06])


def test_too_few_items_is_inconclusive_and_a_bad_margin_is_refused():
    res = compare([1.0], [1.0], 0.02)
    assert res.verdict == INCONCLUSIVE and res.estimate is None and res.n == 1 and res.reason
    with pytest.raises(ValueError, match="margin must be positive"):
        compare([1.0, 2.0], [1.0, 2.0], 0.0)
    one_question = compare([1.0, 1.0, 0.0], [1.0, 0.0, 0.0], 0.02, clusters=["q", "q", "q"])
    assert one_question.verdict == INCONCLUSIVE and "one cluster" in (one_question.reason or "")
