"""The statistics' edge cases, one test each: one cluster, right/wrong verdicts from few clusters, graded
verdicts that a handful of differing items must not pin to 0, margins outside the metric's range, and record
order. Oracles: hand counts, scipy's bootstrap, and the same data in another order."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import metric, run_cli

from offline_eval.metrics.bootstrap import MIN_CLUSTERS, ClusteredCIs, Clusters, clustered_cis, mean_columns, mean_of
from offline_eval.metrics.noninferiority import BOOTSTRAP, INCONCLUSIVE, NON_INFERIOR, SCORE, compare
from offline_eval.metrics.stats import paired_test
from offline_eval.results.summary import Summary


def release(q: int, st: int, answer: bool) -> dict[str, object]:
    """One JBE-QA statement in the release's form: statement `st` of question `q` of the 2023 Civil Law paper."""
    return {
        "id": f"令和５年-民法-{q}-{st}",
        "year": "令和５年",
        "subject": "Civil Law",
        "subject_jp": "民法",
        "theme": "None",
        "question_type": "TFQ",
        "instruction": "次の記述の正誤を判断しなさい。",
        "remark": "",
        "label": "Y" if answer else "N",
        "lead_in": "",
        "question": f"問{q}の記述{st}",
        "answer": answer,
    }


# ---- one cluster


def test_one_cluster_leaves_p_design_effect_and_hl_ci_undefined_with_a_reason():
    """Every item in one exam question: each resample is the data itself, so a bootstrap p of 2/(B+1) would be
    an artefact of the +1 correction, and the design effect has no variance between clusters to measure."""
    x, y = [1.0, 1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0, 0.0]
    res = compare(x, y, 0.02, clusters=["q"] * 5)
    assert res.verdict == INCONCLUSIVE and res.reason is not None and res.reason.startswith("one cluster")
    assert res.bootstrap_p is None and res.design_effect is None and res.ci_low is None and res.ci_high is None
    assert res.estimate == pytest.approx(0.4) and res.paired_test == "mcnemar" and res.paired_p == pytest.approx(0.5)
    graded = compare([0.5, 0.7, 0.2, 0.9], [0.4, 0.7, 0.1, 0.8], 0.02, clusters=["q"] * 4)
    assert graded.method == BOOTSTRAP and graded.bootstrap_p is None and graded.design_effect is None
    assert graded.reason is not None and graded.reason.startswith("one cluster")
    ablation = paired_test(x, y, clusters=Clusters.of(["q"] * 5))
    assert ablation.bootstrap_p is None and ablation.design_effect is None
    assert ablation.hl_low is None and ablation.hl_high is None and ablation.hl == 0.5  # the point estimate stands
    assert ablation.undefined is not None and ablation.undefined.startswith("one cluster")
    assert ablation.p == pytest.approx(0.5)  # McNemar: 2 discordant pairs, both one way
    run = clustered_cis({"accuracy": (mean_columns(x), mean_of)}, Clusters.of(["q"] * 5), design_effect_of="accuracy")
    iv = run.intervals["accuracy"]
    assert run.design_effect is None and iv.low is None and iv.reason == "n too small" and run.n_clusters == 1


def _one_question_config(tmp: Path) -> Path:
    data = tmp / "data"
    data.mkdir()
    items = [release(18, st, st % 2 == 1) for st in range(1, 7)]
    (data / "test.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in items), "utf-8")
    weights = tmp / "w.bin"
    weights.write_text("fake weights")
    right = {"answers": {r["question"]: "1" if r["answer"] else "0" for r in items}, "default": "1"}
    cfg = tmp / "m.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "output_dir": str(tmp / "out"),
                "models": [
                    {
                        "name": "m",
                        "backend": "fake",
                        "path": str(weights),
                        "max_model_len": 4096,
                        "variants": {"bf16": {"options": right}, "broken": {"options": {"default": "0"}}},
                    }
                ],
                "tasks": {
                    "jbeqa": {"protocol": "offline-eval", "data": str(data), "shots": [0], "mode": ["constrained"]}
                },
            },
            allow_unicode=True,
        ),
        "utf-8",
    )
    return cfg


@pytest.mark.slow
def test_one_cluster_sweep_writes_a_summary_its_own_readers_accept(tmp_path):
    """What `--limit` on release-ordered data gives: every item in one question. The sweep's summary.json must be
    one that report, verify and load() read (it once held a null design effect in a float field)."""
    cfg = _one_question_config(tmp_path)
    out = tmp_path / "out"
    proc = run_cli("sweep", str(cfg))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text("utf-8"))
    (family,) = [f for f in summary["ablations"] if f["comparisons"]]
    (c,) = family["comparisons"]
    assert family["n_clusters"] == 1 and c["bootstrap_p"] is None and c["design_effect"] is None
    assert c["hl_low"] is None and c["undefined"].startswith("one cluster")
    (verdict,) = summary["noninferiority"][0]["comparisons"]
    assert verdict["verdict"] == "inconclusive" and verdict["reason"].startswith("one cluster")
    assert verdict["bootstrap_p"] is None
    (run,) = [r for r in summary["runs"] if r["variant"] == "bf16"]
    assert metric(run, "n_clusters") == 1 and run["metrics"]["values"]["f1"].get("design_effect") is None
    proc = run_cli("report", str(out))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    proc = run_cli("verify", str(out))  # reads the summary whole, rebuilds it and finds the same nulls
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "no CI: one cluster" in (out / "report.md").read_text("utf-8")
    from offline_eval.api import load

    assert isinstance(load(out), Summary)


# ---- right/wrong verdicts from few clusters


def test_right_wrong_verdict_from_few_clusters_is_inconclusive():
    """2 questions x 100 statements, identical runs: Tango's interval over 200 items with the design effect set
    to 1 (no difference varies) was [-0.0188, +0.0188], non-inferior at 0.02 from 2 clusters. A design effect is
    not estimated from fewer than MIN_CLUSTERS clusters, so there is no interval and no verdict."""
    rng = np.random.default_rng(0)
    x = (rng.random(200) < 0.7).astype(float)
    questions = [f"q{i // 100}" for i in range(200)]
    res = compare(x, x, 0.02, clusters=questions)
    assert res.method == SCORE and res.verdict == INCONCLUSIVE and res.n_clusters == 2
    assert (
        res.reason
        == f"n too small: 2 clusters; a design effect (and the interval it widens) needs at least {MIN_CLUSTERS}"
    )
    assert (res.ci_low, res.ci_high, res.design_effect, res.p_noninferiority) == (None, None, None, None)
    assert res.paired_p == 1.0  # McNemar stands: no discordant pair
    # At MIN_CLUSTERS questions the clustered interval is back. With no question answered differently the design
    # effect is not the 1 that "no difference varies" gave, but the worst case, about the question size (10):
    # the interval is Tango's for about 20 independent questions, not for 200 statements.
    enough = compare(x, x, 0.02, clusters=[f"q{i // 10}" for i in range(200)])
    alone = compare(x, x, 0.02)
    z2 = 1.959963984540054**2
    assert enough.n_clusters == MIN_CLUSTERS and enough.design_effect == pytest.approx(10.0, rel=0.05)
    assert enough.ci_low is not None and enough.verdict == INCONCLUSIVE
    f = enough.design_effect
    assert enough.ci_low == pytest.approx(-z2 / (200 / f + z2), abs=1e-6)  # Tango with no discordant pair
    assert alone.ci_low == pytest.approx(-z2 / (200 + z2), abs=1e-9) and alone.verdict == NON_INFERIOR


# ---- graded scores: rare differences


def test_graded_interval_is_not_pinned_to_zero_by_one_better_item():
    """20 source items, one criterion one point better on one of them (0.1 on a five-criterion [0, 1] score): every
    resample's difference is >= 0, and the percentile interval was [+0.0000, +0.0150], non-inferior at any margin.
    The interval's pseudo-clusters at the worst differences the scores allow keep its lower bound below 0."""
    ref = np.linspace(0.0, 1.0, MIN_CLUSTERS)
    var = ref.copy()
    var[3] += 0.1
    res = compare(var, ref, 0.0001)
    assert res.method == BOOTSTRAP and res.ci_low is not None and res.ci_high is not None
    assert res.ci_low < -0.0001 and res.verdict == INCONCLUSIVE
    assert res.estimate == pytest.approx(0.005)
    # The oracle: scipy's percentile bootstrap of the mean over the 20 differences and the two pseudo-items
    # (variant lowest and reference highest: -1; the reverse: +1), as many resamples, within Monte Carlo error.
    from scipy import stats

    d = np.concatenate([var - ref, [-1.0, 1.0]])
    boot = stats.bootstrap((d,), np.mean, n_resamples=20000, method="percentile", random_state=1)
    assert res.ci_low == pytest.approx(boot.confidence_interval.low, abs=0.01)
    assert res.ci_high == pytest.approx(boot.confidence_interval.high, abs=0.01)
    # Enough evidence still decides: 400 items on which the runs agree but for small differences either way.
    rng = np.random.default_rng(4)
    ref = rng.random(400)
    var = np.clip(ref + rng.choice([-0.05, 0.0, 0.05], 400, p=[0.1, 0.8, 0.1]), 0, 1)
    assert compare(var, ref, 0.05).verdict == NON_INFERIOR


def test_graded_interval_is_order_and_label_free():
    rng = np.random.default_rng(9)
    ref = rng.random(90)
    var = np.clip(ref + rng.normal(0, 0.1, 90), 0, 1)
    labels = [f"s{i // 3}" for i in range(90)]
    perm = rng.permutation(90)
    a = compare(var, ref, 0.05, clusters=labels)
    b = compare(var[perm], ref[perm], 0.05, clusters=[labels[i] for i in perm])
    c = compare(var, ref, 0.05, clusters=[f"other-{i // 3}" for i in range(90)])
    assert a == b == c


# ---- record order


def test_every_interval_is_independent_of_record_order():
    """Run-level CIs (F1 and accuracy, graded means), verdicts and ablations: the same records in another order
    (and under other cluster names) give the same numbers to the last bit."""
    from offline_eval.metrics.bootstrap import f1_columns, f1_of

    rng = np.random.default_rng(3)
    n = 120
    gold = rng.random(n) < 0.6
    pred = np.where(rng.random(n) < 0.8, gold, ~gold)
    score = rng.random(n)
    labels = [f"q{i // 4}" if i < 100 else None for i in range(n)]  # 20 items have no cluster
    perm = rng.permutation(n)

    def cis(idx: np.ndarray) -> ClusteredCIs:
        cl = Clusters.of([labels[i] for i in idx])
        return clustered_cis(
            {
                "f1": (f1_columns(gold[idx].tolist(), pred[idx].tolist()), f1_of),
                "accuracy": (mean_columns((gold[idx] == pred[idx]).astype(float)), mean_of),
                "score": (mean_columns(score[idx]), mean_of),
            },
            cl,
            n_resamples=500,
            seed=2,
            design_effect_of="f1",
        )

    ordered, shuffled = cis(np.arange(n)), cis(perm)
    assert ordered == shuffled and ordered.intervals["f1"].low is not None and ordered.design_effect is not None
    other = np.clip(score + rng.normal(0, 0.1, n), 0, 1)
    for x, y in (((gold == pred).astype(float), np.ones(n)), (other, score)):
        assert compare(x, y, 0.05, clusters=labels) == compare(
            x[perm], y[perm], 0.05, clusters=[labels[i] for i in perm]
        )
        assert paired_test(x, y, clusters=Clusters.of(labels)) == paired_test(
            x[perm], y[perm], clusters=Clusters.of([labels[i] for i in perm])
        )


def test_run_level_cis_of_a_task_are_independent_of_record_order(tmp_path):
    """The issue's case: a results file's records reordered give other run-level CIs. JBE-QA's run metrics on the
    same records, shuffled."""
    from offline_eval.inference.requests import Result
    from offline_eval.tasks import make_task

    recs = [release(q, st, (q + st) % 3 > 0) for q in range(1, 31) for st in range(1, 5)]
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), "utf-8")
    task = make_task("jbeqa", {"protocol": "offline-eval", "data": str(tmp_path), "mode": ["free"], "bootstrap": 500})
    setting = {"shots": 0, "mode": "free"}
    rng = np.random.default_rng(1)
    records = [task.score(it, Result(text=rng.choice(["0", "1"])), setting) for it in task.load()]
    perm = rng.permutation(len(records))
    a, b = task.run_metrics(records, setting), task.run_metrics([records[i] for i in perm], setting)
    acc = a.metric("accuracy")
    assert a == b and acc is not None and acc.ci_low is not None and a["n_clusters"] == 30


# ---- margins


@pytest.mark.parametrize(
    ("margin", "said"),
    [(True, "margin.accuracy"), (1.0, "margin.accuracy"), (1.5, "margin.accuracy"), (0, "margin.accuracy")],
)
def test_a_margin_must_be_a_number_inside_the_metrics_range(tmp_path, margin, said):
    from offline_eval.pipeline.config import load_config
    from offline_eval.runtime.errors import InputError

    cfg = tmp_path / "m.yaml"
    (tmp_path / "w.bin").write_text("w")
    cfg.write_text(
        yaml.safe_dump(
            {
                "models": [{"name": "m", "backend": "fake", "path": str(tmp_path / "w.bin"), "variants": {"a": {}}}],
                "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(tmp_path)}},
                "margin": {"accuracy": margin},
            }
        )
    )
    with pytest.raises(InputError) as e:
        load_config(cfg)
    line = str(e.value)
    assert said in line and str(cfg) in line and len(line.splitlines()) == 1, line
    proc = run_cli("models", "check", str(cfg))
    assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_margin_inside_the_range_is_kept(tmp_path):
    from offline_eval.pipeline.config import load_config

    cfg = tmp_path / "m.yaml"
    (tmp_path / "w.bin").write_text("w")
    cfg.write_text(
        yaml.safe_dump(
            {
                "models": [{"name": "m", "backend": "fake", "path": str(tmp_path / "w.bin"), "variants": {"a": {}}}],
                "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(tmp_path)}},
                "margin": {"accuracy": 0.05},
            }
        )
    )
    assert load_config(cfg).margin == {"accuracy": 0.05}
