"""Non-inferiority verdicts of a sweep, on the fake engine (our own logic): a variant answering "0" to every
item is inferior to its reference, one answering like it is non-inferior; models.yaml's reference and margin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import DATA, run_cli


def _golds() -> dict[str, str]:
    items = [json.loads(x) for x in (DATA / "test.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    return {it["question"]: "1" if it["answer"] else "0" for it in items}


def _config(tmp: Path, **extra: object) -> Path:
    weights = tmp / "w.bin"
    weights.write_text("fake weights")
    right = {"answers": _golds(), "default": "1"}
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
                        "variants": {
                            "bf16": {"options": right},
                            "same": {"options": right},
                            "broken": {"options": {"default": "0"}},
                        },
                        **extra,
                    }
                ],
                "tasks": {
                    "jbeqa": {"protocol": "offline-eval", "data": str(DATA), "shots": [0], "mode": ["constrained"]}
                },
            },
            allow_unicode=True,
        )
    )
    return cfg


@pytest.mark.slow
def test_a_broken_variant_is_inferior_and_an_identical_one_non_inferior(tmp_path):
    from offline_eval.pipeline.config import load_config
    from offline_eval.pipeline.options import SweepOptions
    from offline_eval.pipeline.orchestrate import run_sweep

    cfg = _config(tmp_path)
    summary = run_sweep(load_config(cfg), SweepOptions(source=str(cfg), log=lambda _: None)).to_json()
    (model,) = summary["noninferiority"]
    assert model["reference"] == "m.fake.bf16.ctx4096"  # the bf16 variant by default
    by_variant = {c["variant"]: c for c in model["comparisons"]}
    assert set(by_variant) == {"same", "broken"}
    golds = list(_golds().values())
    broken, same = by_variant["broken"], by_variant["same"]
    assert broken["metric"] == "accuracy" and broken["margin"] == 0.02 and broken["n"] == len(golds) == 26
    # The reference is always right; "0" is right on the false items only.
    assert broken["estimate"] == -golds.count("1") / 26 and broken["verdict"] == "inferior"
    # Identical answers on 26 items: Tango's interval is +-z^2/(26 + z^2) = +-0.129, which does not clear 0.02.
    assert (same["estimate"], same["verdict"], same["method"]) == (0.0, "inconclusive", "tango score, clustered")
    assert same["ci_low"] == pytest.approx(-0.1287, abs=1e-4) and same["ci_high"] == pytest.approx(0.1287, abs=1e-4)
    assert same["n_clusters"] == 26 and same["design_effect"] == 1.0 and same["items_needed"] == 189
    assert broken["p_noninferiority_holm"] is not None
    written = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert written["noninferiority"] == json.loads(json.dumps(summary["noninferiority"]))


@pytest.mark.slow
def test_reference_and_margin_come_from_models_yaml(tmp_path):
    from offline_eval.pipeline.config import load_config
    from offline_eval.pipeline.options import SweepOptions
    from offline_eval.pipeline.orchestrate import run_sweep

    cfg = _config(tmp_path, reference="broken")
    raw = yaml.safe_load(cfg.read_text())
    raw["margin"] = {"accuracy": 0.9}
    cfg.write_text(yaml.safe_dump(raw, allow_unicode=True))
    summary = run_sweep(load_config(cfg), SweepOptions(source=str(cfg), log=lambda _: None)).to_json()
    (model,) = summary["noninferiority"]
    assert model["reference"] == "m.fake.broken.ctx4096"
    assert {c["variant"]: (c["margin"], c["verdict"]) for c in model["comparisons"]} == {
        "bf16": (0.9, "non-inferior"),
        "same": (0.9, "non-inferior"),
    }


@pytest.mark.slow
def test_bad_reference_or_margin_is_one_line_naming_the_field(tmp_path):
    cfg = _config(tmp_path, reference="int4")
    proc = run_cli("models", "check", str(cfg))
    assert proc.returncode == 2 and "models.0" in proc.stderr and "reference 'int4' must name a variant" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    for margin, said in (({"f1": 0.02}, "margin.f1"), ({"accuracy": -1}, "margin.accuracy")):
        raw = yaml.safe_load(_config(tmp_path).read_text())
        raw["margin"] = margin
        cfg.write_text(yaml.safe_dump(raw, allow_unicode=True))
        proc = run_cli("models", "check", str(cfg))
        assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_report_on_damaged_verdicts_names_the_field(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text(
        json.dumps(
            {
                "schema_version": 3,
                "runs": [],
                "noninferiority": [{"model": "m", "reference": "r", "comparisons": [{"run": "x"}]}],
            }
        )
    )
    proc = run_cli("report", str(out))
    assert proc.returncode == 2 and "noninferiority.0" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
