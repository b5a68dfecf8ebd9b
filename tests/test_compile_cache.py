"""vLLM's compile cache (issue 33): a second load of the same model reuses what the first compiled, and the
provenance says which load compiled and which reused. The cache is a fresh folder here (TORCHINDUCTOR_CACHE_DIR), so
the first load must compile."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import DATA, TINY

import offline_eval


def test_a_second_vllm_load_reuses_the_compile_cache(tmp_path: Path, tiny: Path, monkeypatch) -> None:
    pytest.importorskip("vllm")
    cache = tmp_path / "compiled"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    model = {"backend": "vllm", "path": str(TINY / "hf"), "max_model_len": 1024}
    summary = offline_eval.sweep(
        {
            "output_dir": str(tmp_path / "out"),
            # the same weights twice (another seed: the store serves neither's outputs to the other), two loads
            "models": [{"name": "first", **model}, {"name": "second", "seed": 1, **model}],
            "tasks": {"jbeqa": {"data": str(DATA), "shots": [0], "mode": ["constrained"], "limit": 2}},
        },
        progress=False,
        log=lambda _: None,
    )
    assert summary.provenance is not None
    started = {x.run.split(".")[0]: x.engine_start for x in summary.provenance.loads}
    first, second = started["first"], started["second"]
    assert first is not None and second is not None, started
    assert first["compile"] == "compiled" and first["compile_cache_files_added"] > 0, first
    assert second["compile"] == "reused" and second["compile_cache_files_added"] == 0, second
    assert first["compile_cache"] == second["compile_cache"] == str(cache)
    assert second["start_s"] < first["start_s"], started
    from offline_eval.verify import verify

    assert verify(tmp_path / "out") == []  # the start's facts are claimed, as timings are: a rebuild keeps them


def test_the_compile_cache_is_the_users_even_after_torch_pins_its_own(tmp_path: Path) -> None:
    """torch writes its default (/tmp/torchinductor_USER) into the environment on first use, so offline-eval sets
    the folder when it is imported, before torch is."""
    import os
    import subprocess
    import sys

    pytest.importorskip("torch")
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHINDUCTOR_CACHE_DIR", "XDG_CACHE_HOME")}
    code = (
        "import offline_eval, torch\n"
        "from torch._inductor.runtime.cache_dir_utils import cache_dir\n"
        "from offline_eval.backends.vllm_backend import compile_cache\n"
        "print(cache_dir()); print(compile_cache())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={**env, "HOME": str(tmp_path)}, capture_output=True, text=True, check=True
    )
    want = str(tmp_path / ".cache" / "offline-eval" / "torchinductor")
    assert out.stdout.split() == [want, want], out.stderr[-2000:]
