"""The lint's no-circle contract (offline_eval/lint_contracts.py) on a planted package: the circle offline-eval once had
(base -> fingerprint -> registry, deferred inside a function -> the package's __init__ -> base) breaks it, while
import-linter's own acyclic_siblings passes it, which is how that circle went unseen; without the deferred import
both pass."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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


# ---- the kinds of edge the project's lint counts, each planted where it closes a circle or breaks a rule
KINDS = """[importlinter]
root_package = planted
exclude_type_checking_imports = false
contract_types =
    acyclic_modules: offline_eval.lint_contracts.AcyclicModulesContract
    independent_children: offline_eval.lint_contracts.IndependentChildrenContract
    reached_by_name: offline_eval.lint_contracts.ReachedByNameContract

[importlinter:contract:modules]
name = modules
type = acyclic_modules
root = planted
dynamic =
    planted.registry -> planted.engines.*_engine
    planted.tasks -> planted.tasks.*

[importlinter:contract:tasks]
name = tasks
type = independent_children
container = planted.tasks
shared = kit

[importlinter:contract:engines]
name = engines
type = reached_by_name
home = planted.engines
modules = planted.engines.*_engine
"""


def _plant_kinds(tmp: Path, plant: str) -> Path:
    pkg = tmp / "planted"
    files = {
        "__init__.py": "",
        "registry.py": "import importlib\n\n\ndef load(n: str) -> object:\n"
        "    return importlib.import_module(f'planted.engines.{n}_engine')\n",
        "engines/__init__.py": "",
        "engines/base.py": "class Base:\n    pass\n",
        "engines/a_engine.py": "from .base import Base\n\n\nclass A(Base):\n    pass\n",
        "tasks/__init__.py": "import importlib\n\nTASKS = [importlib.import_module(f'planted.tasks.{n}') for n in ('one', 'two')]\n",
        "tasks/kit/__init__.py": "",
        "tasks/one/__init__.py": "from planted.tasks.kit import __name__ as kit\n",
        "tasks/two/__init__.py": "",
        "report.py": "from planted import registry\n",
    }
    files.update(
        {
            "type-only": {
                "report.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from planted.tasks.two import x\n",
                "tasks/two/__init__.py": "from planted import report\n\nx = 1\n",
            },
            "by-name": {"engines/a_engine.py": "from planted.registry import load\n"},
            "task-to-task": {"tasks/two/__init__.py": "from planted.tasks.one import kit\n"},
            "engine-by-name": {"report.py": "from planted.engines.a_engine import A\n"},
            "none": {},
        }[plant]
    )
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    (tmp / ".importlinter").write_text(KINDS)
    return tmp


@pytest.mark.parametrize(
    ("plant", "broken"),
    [
        ("none", None),
        ("type-only", "modules BROKEN"),  # a circle through an import under TYPE_CHECKING only
        ("by-name", "modules BROKEN"),  # engine -> registry -> (importlib) engine
        ("task-to-task", "tasks BROKEN"),  # a task folder the config never named
        ("engine-by-name", "engines BROKEN"),
    ],
)
def test_each_kind_of_edge_breaks_the_lint(tmp_path: Path, plant: str, broken: str | None) -> None:
    got = _lint(_plant_kinds(tmp_path, plant))
    if broken is None:
        assert got.returncode == 0 and "3 kept, 0 broken" in got.stdout, got.stdout + got.stderr
    else:
        assert got.returncode == 1 and broken in got.stdout, got.stdout + got.stderr
        assert got.stdout.count("BROKEN") == 1, got.stdout


def test_the_lints_lists_are_the_registries() -> None:
    """The contracts find the task folders and the engine modules themselves: what they find is what the registries
    load, so a new task or engine is covered without an edit to pyproject.toml."""
    import tomllib

    import grimp

    from offline_eval.inference.backends.registry import engine_names, get_engine
    from offline_eval.lint_contracts import IndependentChildrenContract, _matching
    from offline_eval.tasks import task_classes

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["importlinter"]["contracts"]
    by_type = {c["type"]: c for c in contracts}
    graph = grimp.build_graph("offline_eval")
    engines = {m for p in by_type["reached_by_name"]["modules"] for m in _matching(graph, p)}
    assert engines == {get_engine(n).module for n in engine_names()}
    independent = {c["container"]: c for c in contracts if c["type"] == "independent_children"}

    def children(container: str) -> set[str]:
        c = independent[container]
        options = {"container": container, "shared": c.get("shared", [])}
        check = IndependentChildrenContract(name="t", session_options={}, contract_options=options)
        return set(check.check(graph, verbose=False).metadata["children"])

    assert children("offline_eval.tasks") == {".".join(t.__module__.split(".")[:3]) for t in task_classes()}
    # every engine with modules of its own is a folder the contract keeps apart (fake is one module)
    folders = {m.rsplit(".", 1)[0] for m in engines if m.endswith(".backend")}
    assert children("offline_eval.inference.backends") == folders and len(folders) == 4
