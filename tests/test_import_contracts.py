"""The lint's no-circle contract (offline_eval/lint_contracts.py) on a planted package: the circle offline-eval once had
(base -> fingerprint -> registry, deferred inside a function -> the package's __init__ -> base) breaks it, while
import-linter's own acyclic_siblings passes it, which is how that circle went unseen; without the deferred import
both pass."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CONFIG = """[importlinter]
root_package = planted
contract_types =
    acyclic_modules: offline_eval.lint_contracts.AcyclicModulesContract

[importlinter:contract:siblings]
name = siblings
type = acyclic_siblings
ancestors = planted

[importlinter:contract:modules]
name = modules
type = acyclic_modules
root = planted
"""


def _plant(tmp: Path, deferred: bool) -> Path:
    pkg = tmp / "planted"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .base import Backend\n")
    (pkg / "base.py").write_text("from .fingerprint import digest\n\n\nclass Backend:\n    pass\n")
    body = "    from .registry import engines\n\n    return str(engines())\n" if deferred else "    return ''\n"
    (pkg / "fingerprint.py").write_text(f"def digest() -> str:\n{body}")
    (pkg / "registry.py").write_text(
        "def engines() -> list[str]:\n    import planted\n\n    return [planted.__name__]\n"
    )
    (tmp / ".importlinter").write_text(CONFIG)
    return tmp


def _lint(tmp: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports_command; lint_imports_command()",
            str(tmp / ".importlinter"),
            "--no-cache",
        ],  # fmt: skip
        cwd=tmp,
        env={"PYTHONPATH": str(tmp), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_deferred_circle_through_a_package_init_fails_the_lint(tmp_path: Path) -> None:
    got = _lint(_plant(tmp_path, deferred=True))
    assert got.returncode == 1, got.stdout + got.stderr
    assert "siblings KEPT" in got.stdout  # what let the circle through before
    assert "modules BROKEN" in got.stdout
    assert "planted.fingerprint -> planted.registry -> planted" in got.stdout


def test_without_the_deferred_import_the_lint_passes(tmp_path: Path) -> None:
    got = _lint(_plant(tmp_path, deferred=False))
    assert got.returncode == 0, got.stdout + got.stderr
    assert "2 kept, 0 broken" in got.stdout
