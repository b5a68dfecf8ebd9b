"""docs/architecture.md's worked example as a shipped task: the skeleton copied into a copy of the package as
offline_eval/tasks/shortqa/ touches that folder alone, and the lint (layers, circles, a task knowing no other) and
the architecture tests pass on the copy as they stand."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_declared import skeleton_source

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_a_shipped_task_touches_its_own_folder_only(tmp_path: Path) -> None:
    copy = tmp_path / "checkout"
    copy.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for d in ("offline_eval", "tests", "docs"):
        shutil.copytree(ROOT / d, copy / d, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    for d in ("data", "models"):
        (copy / d).symlink_to(ROOT / d)
    before = {p.relative_to(copy): p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    task = copy / "offline_eval" / "tasks" / "shortqa" / "__init__.py"
    task.parent.mkdir()
    task.write_text(skeleton_source(), "utf-8")
    after = {p.relative_to(copy): p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    assert {p for p in after if before.get(p) != after[p]} == {task.relative_to(copy)}

    env = {**os.environ, "PYTHONPATH": str(copy)}
    probe = subprocess.run(
        [sys.executable, "-c", "import offline_eval.tasks as t; print(t.__file__, 'shortqa' in t.task_names())"],
        cwd=copy, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert probe.stdout.split() == [str(copy / "offline_eval" / "tasks" / "__init__.py"), "True"], probe.stderr
    lint = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=copy, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert lint.returncode == 0 and "0 broken" in lint.stdout, lint.stdout + lint.stderr
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow",
         "tests/test_architecture.py", "tests/test_import_contracts.py", "tests/test_declared.py"],
        cwd=copy, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
