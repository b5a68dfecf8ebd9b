"""Library noise goes to OUT/engines.log, offline-eval's own lines to the terminal; -v shows the noise; a failed
load shows what its engine said; vLLM's stopped engine-core process is reaped, not left a zombie. Real engines on
the tiny models."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import DATA, run_cli

from offline_eval.runtime.preload import tcmalloc_library

pytestmark = pytest.mark.engine

# What offline-eval itself writes to stderr during a sweep; anything else there is a library's.
OURS = re.compile(r"^(\[|  |timings: |offline-eval: |wrote |\s*$)")


def _config(tmp: Path, tiny: Path, models: list[dict] | None = None) -> Path:
    cfg = {
        "output_dir": str(tmp / "out"),
        "models": models
        or [
            {"name": "v", "backend": "vllm", "path": str(tiny / "hf"), "max_model_len": 1024},
            {"name": "g", "backend": "llamacpp", "path": str(tiny / "gguf" / "tiny-q8_0.gguf"), "max_model_len": 1024},
        ],
        "tasks": {
            "jbeqa": {
                "protocol": "offline-eval",
                "data": str(DATA),
                "shots": [0],
                "mode": ["constrained"],
                "limit": 2,
                "bootstrap": 0,
            }
        },
    }
    p = tmp / "m.yaml"
    p.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    return p


def test_library_output_goes_to_the_engine_log_and_ours_to_the_terminal(tmp_path, tiny):  # type: ignore[no-untyped-def]
    cfg = _config(tmp_path, tiny)
    proc = run_cli("sweep", str(cfg))
    assert proc.returncode == 0, proc.stderr
    theirs = [line for line in proc.stderr.split("\n") if not OURS.match(line)]
    assert not theirs, theirs
    # stdout too: vLLM logs there, from this process and its engine-core and worker processes
    assert [line for line in proc.stdout.split("\n") if line.strip()] == [
        f"wrote {tmp_path / 'out'}/summary.json and report.md (2 runs)"
    ], proc.stdout
    log = (tmp_path / "out" / "engines.log").read_text(encoding="utf-8", errors="replace")
    # what buried offline-eval's lines: torchao's failed kernel loads, torch's pytree deprecations, NUMA binding,
    # vLLM's LD_PRELOAD advice from its worker process
    noise = [s for s in ("_C_mxfp8", "_pytree.py", "NUMA binding", "LD_PRELOAD") if s in log]
    assert "LD_PRELOAD" in noise, log[-2000:]
    assert noise and not [s for s in noise if s in proc.stderr]
    # The command started again with tcmalloc preloaded where setup installed it (preload.py), and vLLM says so.
    loads = json.loads((tmp_path / "out" / "summary.json").read_text("utf-8"))["provenance"]["loads"]
    started = {x["engine"]: x["engine_start"] for x in loads}
    assert started["vllm"]["tcmalloc"] is (tcmalloc_library() is not None)
    loud = run_cli("sweep", str(cfg), "--fresh", "-v")
    assert loud.returncode == 0 and [line for line in loud.stderr.split("\n") if not OURS.match(line)]
    assert all(s in loud.stderr for s in noise)


def test_a_failed_load_shows_what_its_engine_said(tmp_path, tiny):  # type: ignore[no-untyped-def]
    """The tiny HF folder with its weights cut short: vLLM's engine core fails in its own process, whose
    traceback went to engines.log; the failed run's lines show its end."""
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(tiny / "hf", broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:4096])
    cfg = _config(tmp_path, tiny, [{"name": "b", "backend": "vllm", "path": str(broken), "max_model_len": 1024}])
    proc = run_cli("sweep", str(cfg))
    assert proc.returncode == 1 and "FAILED" in proc.stderr
    shown = proc.stderr[proc.stderr.index("the engine's last lines (") :]
    assert "engines.log" in shown and len(shown.split("\n")) > 3, proc.stderr


def test_vllm_engine_process_is_reaped_on_close(tiny):  # type: ignore[no-untyped-def]
    import psutil
    from conftest import spec_for

    from offline_eval.inference.backends.registry import load_backend

    backend = load_backend(spec_for("vllm", tiny, ctx=1024))
    mine = {c.pid for c in psutil.Process().children(recursive=True)}
    backend.close()
    zombies = [c.pid for c in psutil.Process().children() if c.pid in mine and c.status() == psutil.STATUS_ZOMBIE]
    assert not zombies
