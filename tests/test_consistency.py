"""Same weights on different engines: the consistency table (pairing, agreement, paired test, P(true))."""

from __future__ import annotations

import json
import math

import pytest
import yaml
from conftest import DATA, TINY, run_cli


def _jbeqa():  # type: ignore[no-untyped-def]
    from offline_eval.tasks import make_task

    return make_task("jbeqa", {"protocol": "offline-eval", "data": str(DATA)})


def _rec(i: int, parsed: int | None, gold: int, lp1: float | None = None):  # type: ignore[no-untyped-def]
    from offline_eval.tasks.jbeqa.task import JBEQARecord

    r = JBEQARecord(
        id=f"q{i}",
        subject="民法",
        year=2020,
        output="",
        finish_reason="stop",
        gold=gold,
        parsed=parsed,
        pred=int(parsed == 1),
        scores={"correct": int((parsed == 1) == bool(gold))},
    )
    if lp1 is not None:
        r.logprobs = {"0": math.log(1 - math.exp(lp1)), "1": lp1}
    return r


def _entry(run: str, model: str = "m", variant: str = "default", setting: str = "s", metrics: dict | None = None):  # type: ignore[no-untyped-def]
    from offline_eval.metrics.flat import metrics_v3
    from offline_eval.results.records import RunEntry

    return RunEntry(
        model=model,
        variant=variant,
        backend="fake",
        run=run,
        max_model_len=1,
        task="jbeqa",
        setting=setting,
        options={},
        prompt_format="plain",
        n_items=0,
        primary_metric="f1",
        metrics=metrics_v3(metrics or {}, "f1"),
        weights_mb=0.0,
        throughput={},
    )


def test_pairs_follow_the_declaration_either_way():
    from offline_eval.pipeline.analyses.consistency import twin_pairs

    runs = [
        _entry("g.llamacpp.f16.ctx1", "g", "f16"),
        _entry("g.llamacpp.q4.ctx1", "g", "q4"),
        _entry("h.transformers.bf16.ctx1", "h", "bf16"),
        _entry("x.vllm.default.ctx1", "x", "default"),
    ]
    declared = {("g", "f16"): "h", ("x", "default"): "h"}
    assert twin_pairs(runs, lambda m, v: declared.get((m, v))) == [
        ("g.llamacpp.f16.ctx1", "h.transformers.bf16.ctx1"),
        ("h.transformers.bf16.ctx1", "x.vllm.default.ctx1"),
    ]


def test_mcnemar_exact_by_hand():
    from offline_eval.metrics.paired import mcnemar_exact

    # 5 discordant pairs, all one way: p = 2 * 0.5**5
    assert mcnemar_exact([0] * 5 + [1] * 3, [1] * 5 + [1] * 3) == pytest.approx(0.0625)
    # 1 vs 3 discordant: p = 2 * P(X <= 1 | n=4) = 2 * 5/16
    assert mcnemar_exact([1, 0, 0, 0, 1], [0, 1, 1, 1, 1]) == pytest.approx(0.625)
    assert mcnemar_exact([1, 0], [1, 0]) == 1.0


def test_a_row_by_hand():
    from offline_eval.pipeline.analyses.consistency import compare

    task = _jbeqa()
    a = [
        _rec(0, 1, 1, math.log(0.9)),
        _rec(1, 0, 0, math.log(0.2)),
        _rec(2, 1, 0, math.log(0.6)),
        _rec(3, None, 1, math.log(0.5)),
    ]
    b = [
        _rec(0, 1, 1, math.log(0.8)),
        _rec(1, 1, 0, math.log(0.7)),
        _rec(2, 1, 0, math.log(0.6)),
        _rec(9, 1, 1, math.log(0.5)),
    ]
    ea, eb = _entry("a", metrics={"f1": 0.5}), _entry("b", metrics={"f1": 0.4})
    row = compare(task, ea, eb, a, b).model_dump()
    assert row["n_items"] == 3  # q3 only in a, q9 only in b
    assert row["identical"] == pytest.approx(2 / 3)
    # answers a = (1, 0, 1), b = (1, 1, 1): po = 2/3, pe = (2/3)(1) + (1/3)(0) = 2/3 -> kappa 0
    assert row["kappa"] == pytest.approx(0.0)
    assert row["delta"] == pytest.approx(0.1)
    assert row["paired_test"] == "mcnemar" and row["p"] == pytest.approx(1.0)  # one discordant pair
    assert row["mean_abs_diff_p_true"] == pytest.approx((0.1 + 0.5 + 0.0) / 3)


def test_same_weights_as_must_name_another_model(tmp_path):
    cfg = tmp_path / "m.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "models": [{"name": "g", "backend": "llamacpp", "path": "x.gguf", "same_weights_as": "nope"}],
                "tasks": {"jbeqa": {"protocol": "offline-eval", "data": "d"}},
            }
        )
    )
    proc = run_cli("models", "check", str(cfg))
    assert proc.returncode == 2 and "same_weights_as 'nope'" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.engine
def test_tiny_f16_gguf_and_hf_folder_agree_across_engines(tmp_path, tiny):
    """Measured: 26/26 identical constrained answers at 0 and 4 shots (llama.cpp F16 vs transformers bf16);
    logprob P(true) within 0.02 on average (bf16 rounding moves near-ties)."""
    cfg = tmp_path / "m.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "output_dir": str(tmp_path / "out"),
                "models": [
                    {
                        "name": "g",
                        "backend": "llamacpp",
                        "path": str(TINY / "gguf" / "tiny-f16.gguf"),
                        "max_model_len": 4096,
                        "same_weights_as": "h",
                    },
                    {
                        "name": "h",
                        "backend": "transformers",
                        "path": str(TINY / "hf"),
                        "max_model_len": 4096,
                        "variants": {"bf16": {"dtype": "bfloat16"}},
                    },
                ],
                "tasks": {
                    "jbeqa": {
                        "protocol": "offline-eval",
                        "data": str(DATA),
                        "shots": [0, 4],
                        "mode": ["constrained", "logprob"],
                    }
                },
            }
        )
    )
    proc = run_cli("sweep", str(cfg))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    rows = {c["setting"]: c for c in summary["consistency"]}
    assert set(rows) == {
        "jbeqa.0shot.constrained",
        "jbeqa.4shot.constrained",
        "jbeqa.0shot.logprob",
        "jbeqa.4shot.logprob",
    }
    for s in ("jbeqa.0shot.constrained", "jbeqa.4shot.constrained"):
        assert rows[s]["n_items"] == 26 and rows[s]["identical"] >= 0.95, rows[s]
        assert rows[s]["run_a"] == "g.llamacpp.default.ctx4096" and rows[s]["run_b"] == "h.transformers.bf16.ctx4096"
    for s in ("jbeqa.0shot.logprob", "jbeqa.4shot.logprob"):
        assert rows[s]["mean_abs_diff_p_true"] < 0.05, rows[s]
    assert "Same weights, different engines" in (tmp_path / "out" / "report.md").read_text()
