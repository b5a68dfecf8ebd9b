"""`offline-eval verify DIR`: exit 0 on an untouched sweep folder; exit 1 with one line per mismatch (naming the
run, the setting and the metric, with both values) after each tamper; exit 2 on a folder that is not a sweep's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_cli
from test_verdicts import _config

pytestmark = (
    pytest.mark.slow
)  # a sweep per test, edited and verified again: `make test` runs them, the fast tier does not


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from offline_eval.config import load_config
    from offline_eval.sweep import run_sweep

    tmp = tmp_path_factory.mktemp("swept")
    cfg = _config(tmp)
    run_sweep(load_config(cfg), source=str(cfg), log=lambda _: None)
    return tmp


@pytest.fixture
def copy(swept: Path, tmp_path: Path) -> Path:
    """The sweep folder with its weights and data, copied as they are (absolute paths in the provenance are the
    originals: the copy's summary is rewritten to point at the copies)."""
    dst = tmp_path / "c"
    shutil.copytree(swept, dst)
    data = dst / "data"
    shutil.copytree(Path(_data_dir(swept)), data)
    summary = dst / "out" / "summary.json"
    text = summary.read_text(encoding="utf-8")
    text = text.replace(str(swept / "w.bin"), str(dst / "w.bin")).replace(_data_dir(swept), str(data))
    summary.write_text(text, encoding="utf-8")
    return dst


def _data_dir(swept: Path) -> str:
    raw = json.loads((swept / "out" / "summary.json").read_text(encoding="utf-8"))
    return str(Path(raw["provenance"]["settings"][0]["data_files"][0]["path"]).parent)


def _verify(folder: Path) -> tuple[int, list[str]]:
    proc = run_cli("verify", str(folder))
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, [x for x in proc.stdout.split("\n") if x]


def test_an_untouched_folder_verifies(copy):
    code, lines = _verify(copy / "out")
    assert code == 0 and lines[-1].endswith(
        "OK (every file, metric, verdict and constrained answer matches summary.json)"
    )


def test_a_hand_edited_metric_is_named_with_both_values(copy):
    summary = copy / "out" / "summary.json"
    raw = json.loads(summary.read_text(encoding="utf-8"))
    run = next(r for r in raw["runs"] if r["variant"] == "broken")
    real = run["metrics"]["accuracy"]
    run["metrics"]["accuracy"] = 0.99
    summary.write_text(json.dumps(raw), encoding="utf-8")
    code, lines = _verify(copy / "out")
    assert code == 1
    assert (
        f"{run['run']} / jbeqa.0shot.constrained: metric accuracy: summary.json says 0.99, the results files give {real}"
        in lines
    )


def test_a_flipped_record_changes_the_metrics_and_the_verdict(copy):
    results = copy / "out" / "results" / "m.fake.same.ctx4096" / "jbeqa.0shot.constrained.jsonl"
    rows = [json.loads(x) for x in results.read_text(encoding="utf-8").split("\n") if x]
    r = rows[0]
    r["parsed"] = r["pred"] = 1 - r["pred"]
    r["output"] = str(r["parsed"])
    r["scores"]["correct"] = 1 - r["scores"]["correct"]
    results.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in rows), encoding="utf-8")
    code, lines = _verify(copy / "out")
    assert code == 1
    assert any(line.startswith("m.fake.same.ctx4096 / jbeqa.0shot.constrained: metric accuracy:") for line in lines)
    assert any("verdict against m.fake.bf16.ctx4096, estimate: summary.json says 0.0" in line for line in lines)


def test_a_parsed_answer_outside_its_constraint_is_named(copy):
    results = copy / "out" / "results" / "m.fake.bf16.ctx4096" / "jbeqa.0shot.constrained.jsonl"
    rows = [json.loads(x) for x in results.read_text(encoding="utf-8").split("\n") if x]
    rows[0]["output"] = "1 (yes)"  # parsed 1 all the same: what a constrained answer could never be
    results.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in rows), encoding="utf-8")
    code, lines = _verify(copy / "out")
    assert code == 1
    assert any(f"record {rows[0]['id']}: the parsed answer breaks its constraint" in line for line in lines), lines


def test_a_changed_data_file_is_named(copy):
    f = copy / "data" / "test.jsonl"
    f.write_text(f.read_text(encoding="utf-8").replace("保証契約", "保証の契約", 1), encoding="utf-8")
    code, lines = _verify(copy / "out")
    assert code == 1
    assert any(line.startswith(f"setting jbeqa.0shot.constrained: data file {f} changed: sha256 ") for line in lines)


def test_changed_or_missing_weights_are_named(copy):
    (copy / "w.bin").write_text("other fake weights")
    code, lines = _verify(copy / "out")
    assert code == 1 and any(f"weights file {copy / 'w.bin'} changed: sha256" in line for line in lines)
    (copy / "w.bin").unlink()
    code, lines = _verify(copy / "out")
    assert code == 1 and any(f"weights file {copy / 'w.bin'} is missing" in line for line in lines)


def test_a_folder_that_is_not_a_sweeps_is_exit_2(tmp_path):
    proc = run_cli("verify", str(tmp_path))
    assert proc.returncode == 2 and "no summary.json here" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("verify", str(tmp_path / "nowhere"))
    assert proc.returncode == 2 and "not a folder" in proc.stderr
