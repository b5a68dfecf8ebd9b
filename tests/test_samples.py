"""Repeated samples (issue 31, `samples: k`): k answers per item, each stored under its own seed; the run's metric
over all of them, the run-to-run spread, majority vote and disagreement; verdicts on per-item means, proven by
simulation at k = 1, 4 and 8."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import DATA

import offline_eval
from offline_eval.pipeline.analyses.verdicts import paired_verdict
from offline_eval.results.records import UNSET, item_means
from offline_eval.runtime.errors import InputError
from offline_eval.tasks import make_task
from offline_eval.tasks.jbeqa.task import JBEQARecord
from offline_eval.tasks.sampled import sample_metrics

# Four statements of the sample data (gold: true, true, false, true); the fake answers by seed mod length.
SCRIPT = {
    "保証契約は": ["1", "1", "1", "1"],  # right every time
    "現に人が住居": ["1", "0", "1", "0"],  # right on samples 0 and 2: a tie
    "抵当権は": ["0", "0", "0", "1"],  # right on 3 of 4
}
SAMPLED = {"temperature": 1.0, "seed": 0}


def _sweep(tmp: Path, log: list[str] | None = None, tasks: dict[str, Any] | None = None, **model: Any):
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "w.bin").write_text("fake weights")
    config = {
        "output_dir": str(tmp / "out"),
        "models": [
            {
                "name": "m",
                "backend": "fake",
                "path": str(tmp / "w.bin"),
                "max_model_len": 4096,
                "engine_args": {"answers": SCRIPT, "default": "1"},
                **model,
            }
        ],
        "tasks": tasks
        or {
            "jbeqa": {"protocol": "offline-eval", "data": str(DATA), "shots": [0], "mode": ["constrained"], "limit": 4}
        },
    }
    return offline_eval.sweep(config, progress=False, log=(log.append if log is not None else lambda _: None))


def test_k_samples_are_stored_scored_and_summarised_by_hand(tmp_path: Path) -> None:
    summary = _sweep(tmp_path, sampling=SAMPLED, samples=4)
    (entry,) = summary.runs
    recs = summary.records(entry.run, entry.setting)
    assert entry.n_items == 4 and len(recs) == 16
    assert [r.sample for r in recs] == [i for i in range(4) for _ in range(4)]
    assert [r.id for r in recs[:4]] * 4 == [r.id for r in recs]
    # By hand: per-sample accuracy 4/4, 3/4, 4/4, 2/4; all 16 answers 13/16.
    per_sample = [1.0, 0.75, 1.0, 0.5]
    m = entry.metrics
    assert m["accuracy"] == pytest.approx(13 / 16)
    assert m["samples"] == 4
    # The primary metric is F1 (gold: 3 true statements of 4): per sample from its own answers.
    f1 = []
    for s in range(4):
        mine = [r for r in recs if r.sample == s]
        tp = sum(1 for r in mine if r.gold == 1 and r.pred == 1)
        fp = sum(1 for r in mine if r.gold == 0 and r.pred == 1)
        fn = sum(1 for r in mine if r.gold == 1 and r.pred == 0)
        f1.append(2 * tp / (2 * tp + fp + fn))
    assert [sum(r.scores["correct"] for r in recs if r.sample == s) / 4 for s in range(4)] == per_sample
    assert m["run_to_run_sd"] == pytest.approx(statistics.stdev(f1), abs=1e-6)
    # Majority vote: 1, a tie (0.5), 1 (3 of 4 right), 1; two of four items' samples disagree.
    assert m["majority_vote"] == pytest.approx(3.5 / 4)
    assert m["samples_disagree"] == pytest.approx(0.5)
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "Repeated samples" in report and "0.875" in report
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "answers of its 4 samples" in page
    from offline_eval.verify import verify

    assert verify(tmp_path / "out") == []  # rebuilt from the store by the pipeline's own code: the same folder


def test_a_second_sweep_serves_every_sample_from_the_store(tmp_path: Path) -> None:
    first = _sweep(tmp_path, sampling=SAMPLED, samples=4)
    log: list[str] = []
    again = _sweep(tmp_path, log, sampling=SAMPLED, samples=4)
    assert any("0 generated, 16 cached" in line for line in log), log
    assert [r.to_json() for r in again.records(*again.runs[0].key)] == [
        r.to_json() for r in first.records(*first.runs[0].key)
    ]
    # Two more samples: the first four are served, only the new ones generated.
    log.clear()
    _sweep(tmp_path, log, sampling=SAMPLED, samples=6)
    assert any("8 generated, 16 cached" in line for line in log), log


def test_one_sample_leaves_the_records_and_metrics_as_before(tmp_path: Path) -> None:
    summary = _sweep(tmp_path, sampling=SAMPLED)
    (entry,) = summary.runs
    recs = summary.records(entry.run, entry.setting)
    assert len(recs) == 4 and all(r.sample is UNSET for r in recs)
    assert "sample" not in recs[0].to_json()
    assert not {"samples", "run_to_run_sd", "majority_vote", "samples_disagree"} & set(entry.metrics.values)


def test_a_task_sets_its_own_samples_and_a_greedy_model_answers_once(tmp_path: Path) -> None:
    task = {
        "jbeqa": {
            "protocol": "offline-eval",
            "data": str(DATA),
            "shots": [0],
            "mode": ["constrained"],
            "limit": 4,
            "samples": 2,
        }
    }
    summary = _sweep(tmp_path / "a", tasks=task, sampling=SAMPLED, samples=4)
    assert summary.runs[0].metrics["samples"] == 2
    greedy = _sweep(tmp_path / "b", tasks=task)
    assert len(greedy.records(*greedy.runs[0].key)) == 4


@pytest.mark.parametrize(
    ("model", "tasks", "says"),
    [
        ({"samples": 4}, None, "draws the same greedy answer 4 times"),
        ({"samples": 0, "sampling": SAMPLED}, None, "samples"),
        ({"samples": "4", "sampling": SAMPLED}, None, "samples"),
        ({}, {"jbeqa": {"protocol": "offline-eval", "data": str(DATA), "samples": 0}}, "tasks.jbeqa.samples"),
        ({}, {"jbeqa": {"protocol": "offline-eval", "data": str(DATA), "samples": True}}, "tasks.jbeqa.samples"),
    ],
)
def test_bad_samples_are_refused_naming_the_field(tmp_path: Path, model, tasks, says) -> None:
    with pytest.raises(InputError) as e:
        _sweep(tmp_path, tasks=tasks, **model)
    assert says in str(e.value)


def _records(correct: np.ndarray, per_question: int = 3) -> list[JBEQARecord]:
    """k x n correctness as JBE-QA records: statement i of question i // per_question, sample s (one sample:
    no sample field, as a run that answered once)."""
    k, n = correct.shape
    return [
        JBEQARecord(
            id=f"令和５年-民法-{i // per_question + 1}-{i % per_question + 1}",
            subject="民法",
            year=2023,
            output="1",
            finish_reason="stop",
            gold=1,
            parsed=1,
            pred=1,
            scores={"correct": int(correct[s, i])},
            sample=s if k > 1 else UNSET,
        )
        for s in range(k)
        for i in range(n)
    ]


def test_verdicts_compare_per_item_means_clustered_by_question() -> None:
    task = make_task("jbeqa", {"protocol": "offline-eval", "data": str(DATA)})
    rng = np.random.default_rng(5)
    var, ref = rng.random((4, 60)) < 0.7, rng.random((4, 60)) < 0.75
    got = paired_verdict(task, _records(var), _records(ref), 0.02)
    means = item_means(_records(var), task.item_score, task.cluster)
    assert len(means) == 60 and means["令和５年-民法-1-1"][0] == pytest.approx(var[:, 0].mean())
    assert got.n == 60 and got.n_clusters == 20
    assert got.estimate == pytest.approx(var.mean() - ref.mean())
    assert got.method == "cluster bootstrap"  # means over 4 samples are graded, not right/wrong


def _population(rng: np.random.Generator, questions: int, m: int, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-statement P(right) of the reference and the variant: a question effect shared by its statements, the
    variant exactly `margin` below on average (so "non-inferior" is a false verdict)."""
    q = rng.normal(0, 0.8, (questions, 1)).repeat(m, axis=1).ravel()
    p_ref = 0.1 + 0.8 / (1 + np.exp(-(0.8 + q + rng.normal(0, 0.5, questions * m))))
    p_var = p_ref - margin + rng.uniform(-0.05, 0.05, questions * m)
    return p_var, p_ref


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 4, 8])
def test_sampled_verdicts_cover_and_rarely_declare_a_false_non_inferiority(k: int, capsys) -> None:
    """Temperature > 0: each of k answers is right with its statement's probability. The truth, the variant's
    mean P(right) minus the reference's over the population of statements, is -margin; the interval on per-item
    means covers it and a non-inferior verdict stays rare, with one sample as with eight."""
    task = make_task("jbeqa", {"protocol": "offline-eval", "data": str(DATA)})
    sims, questions, m, margin = 300, 40, 3, 0.02
    rng = np.random.default_rng(31 + k)
    hit = false_ni = 0
    for _ in range(sims):
        p_var, p_ref = _population(rng, questions, m, margin)
        var = rng.random((k, questions * m)) < p_var
        ref = rng.random((k, questions * m)) < p_ref
        res = paired_verdict(task, _records(var, m), _records(ref, m), margin)
        assert res.ci_low is not None and res.ci_high is not None
        hit += res.ci_low <= -margin <= res.ci_high
        false_ni += res.verdict == "non-inferior"
    mc = 2 * math.sqrt(0.05 * 0.95 / sims)
    with capsys.disabled():
        print(f"\n{k} samples, {questions} questions x {m}: coverage {hit / sims:.3f}, false NI {false_ni / sims:.3f}")
    assert false_ni / sims <= 0.05 + mc
    assert hit / sims >= 0.95 - 2 * mc


def test_run_to_run_sd_estimates_the_spread_of_one_run() -> None:
    """The SD across sample index of accuracy, averaged over simulated sweeps, is the SD of one run's accuracy on
    these items: sqrt(sum p(1-p)) / n for independent samples."""
    task = make_task("jbeqa", {"protocol": "offline-eval", "data": str(DATA)})
    rng = np.random.default_rng(7)
    p = rng.uniform(0.2, 0.95, 90)
    truth = math.sqrt(float(np.sum(p * (1 - p)))) / len(p)
    setting = {"shots": 0, "mode": "logprob"}
    sds = []
    for _ in range(200):
        recs = _records(rng.random((8, 90)) < p)
        for r in recs:  # gold 1 and pred as answered, so that F1's and accuracy's inputs agree
            r.pred = r.parsed = r.scores["correct"]
        task.primary_metric = "accuracy"  # type: ignore[misc]
        sds.append(sample_metrics(task, recs, setting)["run_to_run_sd"])
    assert float(np.mean(np.square(sds))) ** 0.5 == pytest.approx(truth, rel=0.08)


def test_llamacpp_draws_k_seeded_samples_that_a_fresh_sweep_draws_again(tmp_path: Path, tiny: Path) -> None:
    """The real engine: temperature 1, three samples of six statements on two quantizations; the samples differ,
    a sweep into a fresh folder (a new store) draws the very same answers, and the verdict compares per-item
    means."""
    from conftest import TINY

    def sweep(out: Path) -> offline_eval.Summary:
        gguf = TINY / "gguf"
        return offline_eval.sweep(
            {
                "output_dir": str(out),
                "models": [
                    {
                        "name": "tg",
                        "backend": "llamacpp",
                        "path": str(gguf / "tiny-q8_0.gguf"),
                        "max_model_len": 1024,
                        "variants": {q: {"file": str(gguf / f"tiny-{q}.gguf")} for q in ("q8_0", "q4_0")},
                        "reference": "q8_0",
                        "sampling": {"temperature": 1.0, "seed": 11},
                        "samples": 3,
                    }
                ],
                "tasks": {
                    "jbeqa": {
                        "protocol": "offline-eval",
                        "data": str(DATA),
                        "shots": [0],
                        "mode": ["constrained"],
                        "limit": 6,
                    }
                },
            },
            progress=False,
            log=lambda _: None,
        )

    first, again = sweep(tmp_path / "a"), sweep(tmp_path / "b")
    for entry in first.runs:
        recs = first.records(entry.run, entry.setting)
        assert len(recs) == 18 and entry.metrics["samples"] == 3
        assert all(r.parsed in (0, 1) for r in recs)  # every sampled constrained answer is a choice
        assert [r.to_json() for r in recs] == [r.to_json() for r in again.records(entry.run, entry.setting)]
    answers = [r.parsed for e in first.runs for r in first.records(e.run, e.setting)]
    by_sample = [answers[i * 6 : (i + 1) * 6] for i in range(6)]
    assert len({tuple(a) for a in by_sample}) > 1  # seeds 11, 12, 13 drew different answers
    (verdicts,) = first.noninferiority
    (row,) = verdicts.comparisons
    assert row.method == "cluster bootstrap" and row.n == 6


def test_the_dry_run_counts_k_answers_per_item(tmp_path: Path) -> None:
    import yaml
    from conftest import run_cli

    (tmp_path / "w.bin").write_text("fake weights")
    model = {"name": "m", "backend": "fake", "path": str(tmp_path / "w.bin"), "max_model_len": 4096}
    plans = {}
    for k in (1, 4):
        cfg = {
            "output_dir": str(tmp_path / "out"),
            "models": [{**model, "sampling": SAMPLED, "samples": k}],
            "tasks": {
                "jbeqa": {
                    "protocol": "offline-eval",
                    "data": str(DATA),
                    "shots": [0],
                    "mode": ["constrained"],
                    "limit": 4,
                }
            },
        }
        (tmp_path / "m.yaml").write_text(yaml.safe_dump(cfg, allow_unicode=True))
        dry = run_cli("sweep", str(tmp_path / "m.yaml"), "--dry-run")
        assert dry.returncode == 0, dry.stderr
        plans[k] = next(line for line in dry.stderr.splitlines() if "jbeqa.0shot.constrained" in line)
    assert plans[1].endswith("4 requests, 1750 prompt tokens, <= 16 output tokens, 0 overflow"), plans
    assert plans[4].endswith("16 requests, 7000 prompt tokens, <= 64 output tokens, 0 overflow"), plans
