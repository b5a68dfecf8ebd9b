"""A sweep of chosen tasks (--tasks) reads no data of the others: a LegalRikai folder whose sub-tasks cannot be
read now is no error while it is not chosen, and its earlier runs stay in the summary."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml
from conftest import DATA, ROOT, run_cli


def test_an_unchosen_task_whose_data_cannot_be_read_keeps_its_runs(tmp_path: Path) -> None:
    (tmp_path / "w.bin").write_text("fake weights")
    rik = tmp_path / "rik"
    rik.mkdir()
    shutil.copy(ROOT / "data" / "legalrikai" / "amendexp.jsonl", rik)
    fake = {"backend": "fake", "path": str(tmp_path / "w.bin")}
    cfg = {
        "output_dir": str(tmp_path / "out"),
        "models": [{"name": "m", "max_model_len": 8192, **fake}],
        "tasks": {
            "jbeqa": {"data": str(DATA), "protocol": "offline-eval", "limit": 2},
            "legalrikai": {"data": str(rik), "protocol": "offline-eval", "limit": 1,
                           "judges": [{"name": "j", "max_model_len": 8192, **fake}]},
        },
    }  # fmt: skip
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    first = run_cli("sweep", str(path))
    assert first.returncode == 0, first.stderr[-2000:]
    summary = tmp_path / "out" / "summary.json"
    before = {(r["task"], r["setting"]) for r in json.loads(summary.read_text("utf-8"))["runs"]}
    assert ("legalrikai", "legalrikai.amendexp") in before
    (rik / "amendexp.jsonl").rename(rik / "amendexp.old")  # no sub-task left to read
    again = run_cli("sweep", str(path), "--tasks", "jbeqa")
    assert again.returncode == 0, again.stderr[-2000:]
    kept = json.loads(summary.read_text("utf-8"))
    assert {(r["task"], r["setting"]) for r in kept["runs"]} == before
    assert {x["setting"] for x in kept["provenance"]["settings"]} == {s for _, s in before}
    chosen = run_cli("sweep", str(path), "--tasks", "legalrikai")  # chosen, its data is read: one line
    assert chosen.returncode == 2 and "no data for any sub-task" in chosen.stderr and "Traceback" not in chosen.stderr


def test_a_setting_the_config_no_longer_plans_leaves_the_provenance_with_its_runs(tmp_path: Path) -> None:
    (tmp_path / "w.bin").write_text("fake weights")
    path = tmp_path / "m.yaml"

    def sweep(shots: list[int]) -> dict:
        cfg = {
            "output_dir": str(tmp_path / "out"),
            "models": [{"name": "m", "backend": "fake", "path": str(tmp_path / "w.bin"), "max_model_len": 4096}],
            "tasks": {"jbeqa": {"data": str(DATA), "protocol": "offline-eval", "limit": 2, "shots": shots}},
        }
        path.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
        got = run_cli("sweep", str(path))
        assert got.returncode == 0, got.stderr[-2000:]
        return json.loads((tmp_path / "out" / "summary.json").read_text("utf-8"))

    both = sweep([0, 4])
    assert {x["setting"] for x in both["provenance"]["settings"]} == {
        "jbeqa.0shot.constrained",
        "jbeqa.4shot.constrained",
    }
    one = sweep([0])
    assert {r["setting"] for r in one["runs"]} == {x["setting"] for x in one["provenance"]["settings"]}
    assert {r["setting"] for r in one["runs"]} == {"jbeqa.0shot.constrained"}
