"""The vLLM patches' table against the pinned vLLM and torch, and one load's record: what it installs for a start,
for the engine's life, and that ending it leaves the process as it was."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.engine


def _fresh(check: str) -> None:
    """Runs a check in a process of its own: this session holds a vLLM engine open (conftest's), whose load has its
    patches installed until the session ends."""
    pytest.importorskip("vllm")
    code = f"import runpy; runpy.run_path({str(Path(__file__))!r})[{check!r}]()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]


def test_every_patch_target_is_in_the_pinned_vllm_and_torch() -> None:
    _fresh("_table")


def test_a_load_record_installs_and_removes_everything() -> None:
    _fresh("_cycle")


def _table() -> None:
    from offline_eval.inference.backends.vllm.patches import PATCHES, patch_targets_missing

    assert patch_targets_missing() == []
    assert len({p.name for p in PATCHES}) == len(PATCHES)
    assert all(p.why and p.remove_when for p in PATCHES)


def _cycle() -> None:
    from offline_eval.inference.backends.vllm.patches import _MISSING, PATCHES, Installed

    os.environ.pop("VLLM_OFFLINE_EVAL_TEST", None)
    os.environ["VLLM_OFFLINE_EVAL_USERS"] = "mine"
    before = {p.name: p.original() for p in PATCHES}
    env = dict(os.environ)

    def ours() -> set[str]:
        return {p.name for p in PATCHES if getattr(p.original(), "_offline_eval", False)}

    gpu = Installed()
    gpu.patch(cpu=False, piecewise=True)
    assert ours() == set() and gpu.installed == {}  # the GPU's vLLM runs as it ships

    record = Installed()
    record.setenv({"VLLM_OFFLINE_EVAL_TEST": "1", "VLLM_OFFLINE_EVAL_USERS": "ours"})
    assert os.environ["VLLM_OFFLINE_EVAL_TEST"] == "1" and os.environ["VLLM_OFFLINE_EVAL_USERS"] == "mine"
    record.patch(cpu=True, piecewise=False)
    assert ours() == {p.name for p in PATCHES if p.applies == "cpu"}  # not the piecewise ones: the bug it had
    record.end("engine")
    assert ours() == set() and dict(os.environ) == env

    record = Installed()
    record.patch(cpu=True, piecewise=True)
    assert ours() == {p.name for p in PATCHES} and all(record.installed.values()), record.installed
    record.end("start")  # the engine is built: the config check goes, the rest stay while it runs
    assert ours() == {p.name for p in PATCHES if p.scope == "engine"}
    record.end("engine")
    assert ours() == set()
    assert {p.name: p.original() for p in PATCHES} == before
    adds = [p for p in PATCHES if p.adds]
    assert adds and all(p.original() is _MISSING for p in adds)  # added for a load, taken away after it
