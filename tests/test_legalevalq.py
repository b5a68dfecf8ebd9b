"""LegalEval-Q: the scorer's parts, training, determinism, the authors' checkpoint, AdjScore, tags, bad input."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, metric, run_cli, typed

from offline_eval.metrics import adj_score
from offline_eval.metrics.adjscore import summarize, tier
from offline_eval.tasks.legalevalq.evaluator import GRADES, parse_json, parse_tags
from offline_eval.tasks.legalevalq.scorer import Scorer, ScorerConfig, train, with_error_inputs

DATA = ROOT / "data" / "legalevalq"


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> Path:
    out = ROOT / "models" / "tiny-bert"
    if not (out / "config.json").exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_bert.py"), str(out)], check=True)
    return out


@pytest.fixture(scope="module")
def fixed_bert(tmp_path_factory) -> Path:
    """A tiny BERT whose vocabulary comes from this file's examples, not from data/: the training test must
    not change when somebody adds sample data."""
    d = tmp_path_factory.mktemp("bert-corpus")
    (d / "corpus.jsonl").write_text(
        "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in _examples(80)), encoding="utf-8"
    )
    out = d / "bert"
    # 6 layers: training also runs the layer-group rule for encoders other than the authors' 12 layers.
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_tiny_bert.py"), str(out), "--data", str(d), "--layers", "6"],
        check=True,
        capture_output=True,
    )
    return out


def test_adj_score_hand_values():
    assert adj_score([80, 80, 80]) == pytest.approx(80.0)  # no spread: AdjScore = mean
    # mu = 50, population sigma = 10 -> 2500 / 60
    assert adj_score([40, 60]) == pytest.approx(2500 / 60)
    assert adj_score([0, 0]) == 0.0
    s = summarize([90, 100, 95])
    assert s["std"] == pytest.approx(np.std([90, 100, 95])) and s["median"] == 95
    assert (tier(90), tier(89.9), tier(70), tier(69.9)) == ("high", "mid", "mid", "low")


def test_sample_data_shape():
    queries = json.loads((DATA / "queries.json").read_text(encoding="utf-8"))
    assert len(queries) >= 15 and {"query", "resource", "datasets_id"} <= set(queries[0])
    assert (
        sum(
            1
            for q in queries
            if any("\u4e00" <= c <= "\u9fff" for c in q["query"])
            and not any("\u3040" <= c <= "\u30ff" for c in q["query"])
        )
        >= 2
    )  # a few in Chinese
    rows = [json.loads(x) for x in (DATA / "train.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) >= 80 and all(0 <= r["score"] <= 100 and r["conclusion"] in GRADES for r in rows)


@pytest.mark.parametrize(
    "text",
    [
        "<reasoning>内容は正確。</reasoning><ans>良好</ans>",
        "<reasoning:>内容は正確。</reasoning>\n<ans:> 良好 </ans>",
        "<reasoning>: 内容は正確。</reasoning> <ans>: 良好。</ans>",
    ],
)
def test_tags_with_and_without_colon(text):
    assert parse_tags(text) == ("内容は正確。", "良好")


@pytest.mark.parametrize(
    "text", ["<reasoning>x</reasoning>", "<ans>良好</ans>", "<reasoning>x</reasoning><ans>最高</ans>", ""]
)
def test_tags_missing_or_unknown_grade_is_a_parse_failure(text):
    assert parse_tags(text) is None


def test_json_conclusion_must_be_a_grade():
    assert parse_json('{"comment":"よい","conclusion":"妥当"}') == ("よい", "妥当")
    assert parse_json('{"comment":"よい","conclusion":"最高"}') is None
    assert parse_json('{"comment":"a\x01b","conclusion":"妥当"}') is None  # raw control character: not JSON


def _examples(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        good = rng.random() < 0.5
        out.append(
            {
                "query": f"質問{i % 7}：契約の解除について",
                "answer": f"回答{rng.randrange(100)}です。",
                "comment": rng.choice(["内容の質は普通。", "構成は明確。", "表現は適切。"]),
                "conclusion": "良好" if good else "不十分",
                "score": 90.0 if good else 20.0,
            }
        )
    return out


def test_shapes_and_gradient_flow(bert):
    s = Scorer(ScorerConfig(encoder=str(bert), max_length=64, dropout=0.0))
    s.model.train()
    batch = s.batch(_examples(4))
    y = s.model(**batch)
    assert y.shape == (4,) and bool(((y > 0) & (y < 1)).all())
    y.sum().backward()
    for name, p in s.model.named_parameters():
        if "pooler" in name:
            continue  # BERT's pooler is not used: the CLS vectors of the hidden layers are
        assert p.grad is not None and bool(p.grad.isfinite().all()), name
    for part in (
        "extractor.weights_low",
        "extractor.weights_high",
        "extractor.gate.0.weight",
        "fusion.gate.0.weight",
        "fusion.projection.0.weight",
        "regressor.0.weight",
        "regressor.3.linear.4.weight",
        "regressor.8.weight",
        "bert_ans.encoder.layer.0.attention.self.query.weight",
    ):
        assert dict(s.model.named_parameters())[part].grad.abs().sum() > 0, part


def test_training_learns_a_planted_feature_and_predicts_deterministically(fixed_bert, tmp_path):
    rep = train(
        _examples(80),
        str(fixed_bert),
        tmp_path / "sc",
        epochs=15,
        lr=1e-3,
        batch_size=16,
        patience=15,
        seed=1,
        max_length=64,
        progress=False,
    )
    assert rep["best_val_loss"] < 0.25 * rep["mean_predictor_val_loss"], rep
    s = Scorer.load(tmp_path / "sc")
    ex = _examples(6, seed=9)
    first, second = s.predict(ex), s.predict(ex)
    assert first == second  # eval mode: dropout stays off on every call
    assert all((p > 55) == (e["conclusion"] == "良好") for p, e in zip(first, ex))
    assert (tmp_path / "sc" / "scorer.safetensors").exists() and json.loads(
        (tmp_path / "sc" / "training.json").read_text()
    )["history"]


def test_error_inputs_swap_answers_with_score_zero():
    ex = _examples(10)
    out = with_error_inputs(ex, seed=0)
    neg = out[len(ex) :]
    assert len(neg) == len(ex) and all(n["score"] == 0.0 for n in neg)
    assert all(n["answer"] in {e["answer"] for e in ex if e["query"] != n["query"]} for n in neg)


def test_authors_checkpoint_is_read_with_weights_only(bert, tmp_path):
    """The layout and the scores are tested in test_legalevalq_scorer.py; here: pickled objects are refused."""
    theirs = Scorer(ScorerConfig(encoder=str(bert), max_length=64)).model.state_dict()

    class Evil:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (print, ("unpickled!",))

    import torch

    torch.save({"state_dict": theirs, "obj": Evil()}, tmp_path / "evil.pth")
    from offline_eval.runtime.errors import InputError

    with pytest.raises(InputError, match="refused"):
        Scorer.from_author_checkpoint(tmp_path / "evil.pth", str(bert))


def test_cli_train_predict_and_bad_input(bert, tmp_path):
    out = tmp_path / "sc"
    tr = run_cli(
        "legaleval-q",
        "train",
        "--data",
        str(DATA / "train.jsonl"),
        "--encoder",
        str(bert),
        "--out",
        str(out),
        "--epochs",
        "2",
        "--max-length",
        "64",
        "--error-input",
    )
    assert tr.returncode == 0, tr.stderr
    assert "epoch 1: train loss" in tr.stderr and "validation loss" in tr.stderr
    pr = run_cli(
        "legaleval-q",
        "predict",
        "--data",
        str(DATA / "train.jsonl"),
        "--scorer",
        str(out),
        "--out",
        str(tmp_path / "pred.jsonl"),
    )
    assert pr.returncode == 0, pr.stderr
    summary = json.loads(pr.stdout.strip().splitlines()[-1])
    assert {"mean", "std", "median", "adj_score", "tier"} <= set(summary)
    rows = [json.loads(x) for x in (tmp_path / "pred.jsonl").read_text().splitlines()]
    assert len(rows) == 96 and all(0 <= r["predicted"] <= 100 for r in rows)
    bad = tmp_path / "bad.jsonl"
    for content, needles in [
        ('{"query":"q","answer":"a","comment":"c","conclusion":"妥当","score":120}\n', ["line 1", "field 'score'"]),
        ('{"query":"q","answer":"a","comment":"c","score":50}\n', ["line 1", "field 'conclusion'", "missing"]),
        ("", ["empty"]),
    ]:
        bad.write_text(content, encoding="utf-8")
        p = run_cli("legaleval-q", "predict", "--data", str(bad), "--scorer", str(out))
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
        assert all(n in p.stderr for n in needles), (needles, p.stderr)


def _sweep_config(tmp: Path, mode: str) -> Path:
    import yaml
    from conftest import TINY

    cfg = {
        "output_dir": str(tmp / "out"),
        "models": [
            {
                "name": "cand",
                "backend": "llamacpp",
                "path": str(TINY / "gguf" / "tiny-q8_0.gguf"),
                "max_model_len": 1024,
                "variants": {
                    "q8_0": {"file": str(TINY / "gguf" / "tiny-q8_0.gguf")},
                    "q4_0": {"file": str(TINY / "gguf" / "tiny-q4_0.gguf")},
                },
            }
        ],
        "tasks": {
            "legalevalq": {
                "protocol": "offline-eval",  # ours: the JSON and tags evaluators (the paper's: test_legalevalq_protocol)
                "data": str(DATA / "queries.json"),
                "validation_data": str(DATA / "validation_queries.json"),
                "max_tokens": 48,
                "scorer": str(ROOT / "models" / "tiny-scorer"),
                "evaluator": {
                    "name": "judge",
                    "backend": "transformers",
                    "path": str(TINY / "hf"),
                    "max_model_len": 1024,
                },
                "evaluator_mode": mode,
                "evaluator_max_tokens": 96,
                "comment_max_chars": 40,
            }
        },
    }
    p = tmp / "m.yaml"
    p.write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True))
    return p


def test_end_to_end_sweep_with_tiny_candidate_evaluator_and_encoder(tmp_path, tiny, bert):
    proc = run_cli("sweep", str(_sweep_config(tmp_path, "json")))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.index("[evaluator] judge.transformers.default.ctx1024") > proc.stderr.index("[2/2]")
    assert proc.stderr.count("loading transformers model") == 1  # the evaluator is loaded once
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [r["run"] for r in s["runs"]] == ["cand.llamacpp.q4_0.ctx1024", "cand.llamacpp.q8_0.ctx1024"]
    for r in s["runs"]:
        m = typed(r)
        recs = [
            json.loads(x)
            for x in (tmp_path / "out" / "results" / r["run"] / "legalevalq.jsonl").read_text().splitlines()
        ]
        assert len(recs) == 22 and m["n_answers"] == 22
        tr = np.array([x["scores"]["quality"] for x in recs if x["scores"] and x["split"] == "train"])
        va = np.array([x["scores"]["quality"] for x in recs if x["scores"] and x["split"] == "validation"])
        adj = lambda a: a.mean() ** 2 / (a.mean() + a.std())  # noqa: E731
        assert m["adj_score_delta"] == pytest.approx(adj(va) - adj(tr), abs=2e-3)
        scores = np.array([x["scores"]["quality"] for x in recs if x["scores"]])
        assert m["n_scored"] == len(scores) == 22 - m["evaluator_parse_failures"] and len(scores) > 0
        assert all(0 <= v <= 100 for v in scores)
        mu, sd = scores.mean(), scores.std()
        assert m["adj_score"] == pytest.approx(mu * mu / (mu + sd), abs=1e-3)
        assert all(x["parsed"] in GRADES for x in recs if x["scores"])
        assert r["evaluator"]["run"] == "judge.transformers.default.ctx1024"
    assert "Leaderboard: legalevalq" in (tmp_path / "out" / "report.md").read_text()
    board = s["leaderboards"]["legalevalq"]
    assert [b["value"] for b in board] == sorted((metric(r, "adj_score") for r in s["runs"]), reverse=True)
    assert all(b["metric"] == "adj_score" and b["tier"] in ("high", "mid", "low") for b in board)
    assert any(a["kind"] == "quantization" for a in s["ablations"])
    # Re-run: candidates and evaluator come from the store; nothing is generated, results are identical.
    before = {p: p.read_bytes() for p in (tmp_path / "out" / "results").rglob("*.jsonl")}
    again = run_cli("sweep", str(_sweep_config(tmp_path, "json")))
    assert again.returncode == 0 and "loading" not in again.stderr
    assert {p: p.read_bytes() for p in before} == before


def test_tags_mode_counts_parse_failures(tmp_path, tiny, bert):
    proc = run_cli("sweep", str(_sweep_config(tmp_path, "tags")))
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    for r in s["runs"]:
        m = typed(r)
        # A random-weight evaluator never writes the tags: every answer is a counted failure, none is scored.
        assert m["n_evaluated"] == 22 and m["evaluator_parse_failures"] == 22 and m["n_scored"] == 0
        assert "adj_score" not in m


def test_missing_scorer_or_evaluator_is_named_before_anything_runs(tmp_path, tiny):
    import yaml

    cfg = _sweep_config(tmp_path, "json")
    raw = yaml.safe_load(cfg.read_text())
    raw["tasks"]["legalevalq"]["scorer"] = str(tmp_path / "no-scorer")
    cfg.write_text(yaml.safe_dump(raw, allow_unicode=True))
    for cmd in (["models", "check", str(cfg)], ["sweep", str(cfg)]):
        p = run_cli(*cmd)
        assert p.returncode == 2 and "Traceback" not in p.stderr
        assert f"{cfg}, field 'tasks.legalevalq.scorer': path does not exist" in p.stderr
    assert not (tmp_path / "out").exists()
    raw["tasks"]["legalevalq"]["scorer"] = str(ROOT / "models" / "tiny-scorer")
    raw["tasks"]["legalevalq"]["evaluator"]["path"] = "https://example.com/model"
    cfg.write_text(yaml.safe_dump(raw, allow_unicode=True))
    p = run_cli("sweep", str(cfg))
    assert p.returncode == 2 and "field 'tasks.legalevalq.evaluator.path': URLs are refused" in p.stderr
