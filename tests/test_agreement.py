"""Agreement metrics against scipy / sklearn and hand cases, including ties and the constant-label NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from offline_eval.metrics.agreement import cohen_kappa, format_rho, mae, normalise, spearman


def test_normalisation_by_hand():
    assert [normalise(s, 1, 3) for s in (1, 2, 3)] == [0.0, 0.5, 1.0]
    assert [normalise(s, 1, 2) for s in (1, 2)] == [0.0, 1.0]
    with pytest.raises(ValueError):
        normalise(1, 2, 2)


@pytest.mark.parametrize("seed", range(8))
def test_spearman_matches_scipy_with_ties(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(1, 4, 25).astype(float)  # 3-point scale: many ties
    y = np.clip(x + rng.integers(-1, 2, 25), 1, 3)
    rho, p = spearman(x, y)
    ref = stats.spearmanr(x, y)
    assert rho == pytest.approx(ref.statistic) and p == pytest.approx(ref.pvalue)


def test_spearman_constant_is_nan_and_marks():
    rho, p = spearman([1, 1, 1, 1], [1, 2, 3, 1])
    assert math.isnan(rho) and math.isnan(p) and format_rho(rho, p) == "nan"
    assert format_rho(0.61, 0.01) == "0.61†" and format_rho(0.2, 0.4) == "0.20"


def test_mae_by_hand():
    assert mae([0, 0.5, 1], [0.5, 0.5, 0]) == pytest.approx((0.5 + 0 + 1) / 3)


@pytest.mark.parametrize("seed", range(8))
def test_kappa_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 4, 30).tolist()
    b = [x if rng.random() < 0.6 else int(rng.integers(1, 4)) for x in a]
    assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b))


def test_kappa_hand_case_and_constant_nan():
    # po = 3/4; pe = (2/4*1/4) + (2/4*3/4) = 0.125 + 0.375 = 0.5 -> kappa = 0.5
    assert cohen_kappa([1, 1, 2, 2], [1, 2, 2, 2]) == pytest.approx(0.5)
    assert math.isnan(cohen_kappa([3, 3, 3], [3, 3, 3]))  # every label the same, as in the paper's Table 5
