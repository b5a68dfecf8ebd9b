"""A re-sweep into a folder holds exactly the runs its config plans now (issue 49): a model renamed, or a
thinking budget given as a list, leaves the earlier names' runs in the store, not in the summary, the report or
results/; and the store is keyed by what the engine computes, so the renamed runs generate nothing again."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from conftest import DATA, run_cli


def _config(tmp: Path, name: str, reasoning: dict[str, Any] | None = None) -> Path:
    (tmp / "w.bin").write_text("fake weights")
    model: dict[str, Any] = {"name": name, "backend": "fake", "path": str(tmp / "w.bin"), "max_model_len": 4096,
                             "engine_args": {"default": "<think>条文を読む。</think>1"}}  # fmt: skip
    if reasoning:
        model["reasoning"] = reasoning
    cfg = {"output_dir": str(tmp / "out"), "models": [model],
           "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(DATA), "shots": [0, 4],
                               "mode": ["constrained"], "limit": 5}}}  # fmt: skip
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    return path


def _sweep(path: Path) -> tuple[dict[str, Any], list[tuple[str, int, int]]]:
    """The summary, and (run, generated, cached) per phase as the sweep logs them."""
    got = run_cli("sweep", str(path))
    assert got.returncode == 0, got.stderr[-2000:]
    pattern = r"\[([^\]]+)\] jbeqa[^\n]*\((\d+) generated, (\d+) cached"
    counts = [(r, int(g), int(c)) for r, g, c in re.findall(pattern, got.stdout + got.stderr)]
    return json.loads((path.parent / "out" / "summary.json").read_text("utf-8")), counts


def _runs(summary: dict[str, Any]) -> set[str]:
    return {r["run"] for r in summary["runs"]}


def test_a_renamed_model_leaves_the_summary_and_generates_nothing_again(tmp_path):
    first, counts = _sweep(_config(tmp_path, "old"))
    assert _runs(first) == {"old.fake.default.ctx4096"} and len(counts) == 2 and all(g > 0 for _, g, _ in counts)
    again, counts = _sweep(_config(tmp_path, "new"))
    assert _runs(again) == {"new.fake.default.ctx4096"}
    assert len(counts) == 2 and all(g == 0 for _, g, _ in counts), counts  # the store keys what the engine computes
    out = tmp_path / "out"
    assert not (out / "results" / "old.fake.default.ctx4096").exists()
    assert "old.fake" not in (out / "report.md").read_text("utf-8")
    got = run_cli("verify", str(out))
    assert got.returncode == 0, got.stdout[-2000:]


def test_a_budget_given_as_a_list_keeps_no_run_of_the_single_budget(tmp_path):
    _sweep(_config(tmp_path, "m", {"think": True, "budget": 48}))
    again, counts = _sweep(_config(tmp_path, "m", {"think": True, "budget": [48, 24]}))
    assert _runs(again) == {"m.fake.default.think48.ctx4096", "m.fake.default.think24.ctx4096"}
    generated = {run: 0 for run, _, _ in counts}
    for run, g, _ in counts:
        generated[run] += g
    assert generated["m.fake.default.think48.ctx4096"] == 0 and generated["m.fake.default.think24.ctx4096"] > 0
    # no "quantization" ablation of the old name against the new ones: the summary holds only configured runs
    text = json.dumps(again, ensure_ascii=False)
    assert "m.fake.default.ctx4096" not in text
    got = run_cli("verify", str(tmp_path / "out"))
    assert got.returncode == 0, got.stdout[-2000:]
