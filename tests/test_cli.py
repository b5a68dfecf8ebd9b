"""`run`, `--dry-run`, `--only`/`--tasks`, `data validate` and `report` from the command line."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import DATA, ROOT, TINY, has_metric, run_cli, run_tiny_jbeqa


def test_run_one_model_one_task_writes_the_sweep_layout(tmp_path, tiny):
    out = tmp_path / "one"
    proc = run_tiny_jbeqa(
        "--name",
        "q4",
        "--shots",
        "4",
        "--mode",
        "free",
        "--limit",
        "5",
        "--max-model-len",
        "1024",
        "--out",
        str(out),
        gguf="tiny-q4_0.gguf",
    )
    assert proc.returncode == 0, proc.stderr
    s = json.loads((out / "summary.json").read_text())
    [r] = s["runs"]
    assert r["run"] == "q4.llamacpp.default.ctx1024" and r["setting"] == "jbeqa.4shot.free"
    assert r["n_items"] == 5 and has_metric(r, "faithfulness")
    assert len((out / "results" / r["run"] / "jbeqa.4shot.free.jsonl").read_text().splitlines()) == 5
    assert (out / "report.md").exists() and (out / "store.sqlite").exists()


@pytest.mark.slow
def test_data_validate(tmp_path):
    ok = run_cli("data", "validate", "jbeqa", str(DATA))
    assert ok.returncode == 0 and "all: 38 items; train: 12 items" in ok.stdout
    f = tmp_path / "x.jsonl"
    f.write_text(json.dumps({"id": 1}) + "\n", encoding="utf-8")
    bad = run_cli("data", "validate", "jbeqa", str(f))
    assert bad.returncode == 2 and "line 1 (id 1)" in bad.stderr and "Traceback" not in bad.stderr
    unknown = run_cli("data", "validate", "nosuchtask", str(DATA))
    assert unknown.returncode == 2 and "unknown task 'nosuchtask'" in unknown.stderr


def test_models_check_ok_and_report_regenerates(tmp_path, tiny):
    ok = run_cli("models", "check", str(ROOT / "models.yaml"))
    assert ok.returncode == 0, ok.stderr
    cfg = {
        "output_dir": "out",
        "models": [
            {"name": "m", "backend": "llamacpp", "path": str(TINY / "gguf" / "tiny-q8_0.gguf"), "max_model_len": 1024}
        ],
        "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(DATA), "limit": 3, "mode": "logprob"}},
    }
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(cfg))
    assert run_cli("sweep", str(p)).returncode == 0
    out = tmp_path / "out"  # relative output_dir resolves against the config's folder
    (out / "report.md").unlink()
    rep = run_cli("report", str(out))
    assert rep.returncode == 0 and (out / "report.md").exists() and (out / "report.html").exists()
    assert "jbeqa.0shot.logprob" in (out / "report.md").read_text()
