"""Reliability round 5 (issue 62), each case through the CLI: the config refuses what would lose or mix results."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import run_cli
from test_bad_input import assert_one_line_error


def _write(tmp: Path, models: list[dict]) -> Path:  # type: ignore[type-arg]
    (tmp / "w.gguf").write_bytes(b"GGUF")
    cfg = {
        "output_dir": str(tmp / "out"),
        "models": models,
        "tasks": {"jbeqa": {"data": "data/jbeqa", "protocol": "offline-eval"}},
    }
    p = tmp / "m.yaml"
    p.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    return p


@pytest.mark.parametrize("command", [("models", "check"), ("sweep", "--dry-run"), ("sweep",)])
def test_two_legal_names_that_make_one_run_name_are_refused(tmp_path, command):  # type: ignore[no-untyped-def]
    """Model `m.llamacpp.v` variant `w` and model `m` variant `v.llamacpp.w` both made m.llamacpp.v.llamacpp.w.ctx1024:
    the sweep kept one run's results, exited 0, and verify said OK."""
    w = str(tmp_path / "w.gguf")
    cfg = _write(
        tmp_path,
        [
            {"name": "m.llamacpp.v", "backend": "llamacpp", "path": w, "max_model_len": 1024, "variants": {"w": {}}},
            {"name": "m", "backend": "llamacpp", "path": w, "max_model_len": 1024, "variants": {"v.llamacpp.w": {}}},
        ],
    )
    if command[0] == "sweep":
        args = ["sweep", str(cfg), *command[1:]]
    else:
        args = ["models", "check", str(cfg)]
    got = run_cli(*args)
    last = assert_one_line_error(got, str(cfg), "'models'", "both make the run name 'm.llamacpp.v.llamacpp.w.ctx1024'")
    assert got.returncode == 2 and "models.0 ('m.llamacpp.v') variant 'w'" in last
    assert "models.1 ('m') variant 'v.llamacpp.w'" in last and not (tmp_path / "out").exists()
