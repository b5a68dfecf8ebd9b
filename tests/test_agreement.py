"""Agreement metrics against scipy / sklearn and hand cases, including ties and the constant-label NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from offline_eval.metrics.agreement import cohen_kappa, format_rho, krippendorff_alpha, mae, normalise, spearman


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


def test_krippendorff_alpha_matches_the_published_worked_example():
    """Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", p. 8: 4 coders x 12 units with missing
    values; ordinal alpha = 0.815 (unit 12, rated once, is unpairable and does not count)."""
    nan = float("nan")
    data = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
    ]
    alpha = krippendorff_alpha(data, [1, 2, 3, 4, 5])
    assert alpha is not None and round(alpha, 3) == 0.815
    assert krippendorff_alpha([[1, 1, 1], [1, 1, 1]], [1, 2, 3]) is None  # nothing to disagree on
    assert krippendorff_alpha([[1, nan], [nan, 2]], [1, 2, 3]) is None  # no unit rated twice
    assert krippendorff_alpha([[1, 2, 3]], [1, 2, 3]) is None  # one rater


def test_judge_agreement_and_bias_by_hand():
    """Two judges over outputs of two runs: alpha from the package, and the bias of each judge against their mean
    is half their mean difference, with and without enough source items for a CI."""
    from offline_eval.results.records import RunKey
    from offline_eval.tasks.legalrikai.human.agreement import judge_agreement
    from offline_eval.tasks.legalrikai.record import LegalRikaiRecord
    from offline_eval.tasks.legalrikai.sweepreport import AlphaCell

    def rec(item: str, a: int, b: int) -> LegalRikaiRecord:
        r = LegalRikaiRecord(
            id=item, subtask="reqrev", input="full", output="x", finish_reason="stop", prompt_tokens=1,
            output_tokens=1, gold="g",
        )  # fmt: skip
        scores = {"IF": a, "SC": 2, "CP": 2, "TA": 2, "WA": 2}
        r.judges = {"j1": {"scores": scores, "finish_reason": "stop"}, "j2": {"scores": {**scores, "IF": b}}}
        return r

    few = {RunKey("r1", "legalrikai.reqrev"): [rec("1", 3, 2), rec("2", 2, 2), rec("3", 3, 1)]}
    ja = judge_agreement(few, ["j1", "j2"], n_resamples=200)
    assert ja is not None
    if_bias = ja.bias["reqrev"]["j1"]["IF"]
    # IF is on 1..3: normalised differences j1 - j2 are 0.5, 0, 1; j1's bias against the mean is half: 0.25.
    assert if_bias.bias == pytest.approx(0.25) and ja.bias["reqrev"]["j2"]["IF"].bias == pytest.approx(-0.25)
    assert if_bias.ci_low is None and if_bias.n_clusters == 3  # 3 source items: n too small
    alpha = krippendorff_alpha([[3, 2, 3], [2, 2, 1]], [1, 2, 3])
    assert ja.alpha["reqrev"]["IF"] == AlphaCell(alpha=round(alpha, 4) if alpha is not None else None, n=3)
    assert ja.alpha["reqrev"]["SC"].alpha is None  # every score 2: nothing to agree on
    # Two runs over 25 items: 50 outputs in 25 clusters, enough for a CI around the bias.
    many = {
        RunKey(run, "legalrikai.reqrev"): [rec(str(i), 3, 2 if i % 3 else 3) for i in range(25)] for run in ("a", "b")
    }
    ja = judge_agreement(many, ["j1", "j2"], n_resamples=500)
    assert ja is not None
    b = ja.bias["reqrev"]["j1"]["IF"]
    assert b.n == 50 and b.n_clusters == 25
    assert b.ci_low is not None and b.bias is not None and b.ci_high is not None and b.ci_low < b.bias < b.ci_high
    assert judge_agreement(many, ["j1"]) is None


def test_the_task_report_reads_back_typed_as_written_and_a_bad_cell_is_one_line(tmp_path):
    """summary.json's task_reports.legalrikai round-trips through its model: a cell's interval keys only where a
    bootstrap ran; a value of the wrong form names the field."""
    from partial import summary as summary_of

    from offline_eval.runtime.errors import InputError
    from offline_eval.tasks.legalrikai.sweepreport import BiasCell, JudgeAgreement, LegalRikaiReport

    ja = JudgeAgreement(alpha={}, bias={"reqrev": {"j": {"IF": BiasCell(bias=0.1, n=3), "SC": BiasCell(
        bias=0.2, n=30, ci_low=None, ci_high=None, n_clusters=3)}}})  # fmt: skip
    rep = LegalRikaiReport(subtasks=["reqrev"], criteria={"reqrev": ["IF", "SC"]}, judges=["j"], scores=[], human=None,
                           judge_agreement=ja)  # fmt: skip
    raw = rep.to_json()
    assert raw["judge_agreement"]["bias"]["reqrev"]["j"] == {
        "IF": {"bias": 0.1, "n": 3},
        "SC": {"bias": 0.2, "n": 30, "ci_low": None, "ci_high": None, "n_clusters": 3},
    }
    summary = summary_of({"task_reports": {"legalrikai": raw}})
    assert LegalRikaiReport.of(summary) == rep and LegalRikaiReport.of(summary_of({})) is None
    raw["judge_agreement"]["bias"]["reqrev"]["j"]["IF"]["n"] = "three"
    with pytest.raises(InputError) as e:
        LegalRikaiReport.of(summary_of({"task_reports": {"legalrikai": raw}}))
    assert "task_reports.legalrikai.judge_agreement.bias.reqrev.j.IF.n" in str(e.value)
