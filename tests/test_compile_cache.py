"""vLLM's compile cache (issue 33): a second load of the same model reuses what the first compiled, and the
provenance says which load compiled and which reused. The cache is a fresh folder here (VLLM_CACHE_ROOT), so the
first load must compile."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import DATA, TINY

import offline_eval
from offline_eval.inference.backends.vllm.options import COMPILE_ABOVE_TOKENS_CACHED


def test_a_second_vllm_load_reuses_the_compile_cache(tmp_path: Path, tiny: Path, monkeypatch) -> None:
    """Also: a load planned for few prompt tokens starts eager (compile: auto), and says how many it planned (the
    count `sweep --dry-run` gives for it) and that the cache holds its compiled model (the first load's, with
    another seed)."""
    pytest.importorskip("vllm")
    cache = tmp_path / "compiled"
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(cache))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))  # vLLM's AOT compile points it into cache
    model = {"backend": "vllm", "path": str(TINY / "hf"), "max_model_len": 1024}
    config = {
        "output_dir": str(tmp_path / "out"),
        # the same weights three times (another seed: the store serves none's outputs to another), three loads
        "models": [
            {"name": "first", "compile": "always", **model},
            {"name": "second", "seed": 1, "compile": "always", **model},
            {"name": "auto", "seed": 2, **model},
            # vLLM's own CPU compile, the model as one graph
            {"name": "whole", "seed": 4, "compile": "always", "cpu_compile": "whole", **model},
        ],
        "tasks": {
            "jbeqa": {"protocol": "offline-eval", "data": str(DATA), "shots": [0], "mode": ["constrained"], "limit": 8}
        },
    }
    lines: list[str] = []
    from vllm.compilation.counter import compilation_counter

    from offline_eval.inference.backends.vllm.patches import PATCHES

    def vllm_env() -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if k.startswith("VLLM_")}

    def patched() -> list[str]:
        return [p.name for p in PATCHES if getattr(p.original(), "_offline_eval", False)]

    env, held = vllm_env(), patched()  # held: the patches of an engine this session keeps open (conftest's)
    pieces = compilation_counter.num_piecewise_graphs_seen
    summary = offline_eval.sweep(config, progress=False, log=lines.append)
    # every load closed: vLLM and torch as they were, and the environment too (a later whole-graph compile of
    # another engine in this process runs vLLM's functionalization pass again)
    assert patched() == held and vllm_env() == env, (patched(), held, vllm_env(), env)
    assert compilation_counter.num_piecewise_graphs_seen - pieces > 1  # the first load's graph was split
    assert summary.provenance is not None
    started = {x.run.split(".")[0]: x.engine_start for x in summary.provenance.loads}
    first, second, auto, whole = started["first"], started["second"], started["auto"], started["whole"]
    assert first is not None and second is not None and auto is not None and whole is not None, started
    assert first["compile_graph"] == second["compile_graph"] == "piecewise" and auto["compile_graph"] is None, started
    assert whole["compile_graph"] == "whole" and whole["compile"] == "compiled", whole
    assert first["compile"] == "compiled" and first["compile_cache_files_added"] > 0, first
    assert second["compile"] == "reused" and second["compile_cache_files_added"] == 0, second
    # the compiled model itself loaded (vLLM's AOT cache, vllm/cache.aot_cache_loads), not only inductor's kernels
    assert not first["compiled_model_loaded"] and second["compiled_model_loaded"], started
    assert not [x for x in (tmp_path / "inductor").rglob("*") if x.is_file()]  # torch makes the folder, no more
    assert first["compile_choice"] == second["compile_choice"] == "compile: always"
    assert first["compile_cache"] == second["compile_cache"] == str(cache)
    assert second["start_s"] < first["start_s"], started
    planned: list[str] = []
    offline_eval.sweep(config, progress=False, log=planned.append, dry_run=True)
    tokens = next(x for x in planned if x.startswith("total:")).split(", ")[1].split()[0]  # four equal loads
    assert auto["compile"] == "eager", auto
    assert (
        auto["compile_choice"]
        == f"compile: auto, {int(tokens) // 4:,} prompt tokens planned < {COMPILE_ABOVE_TOKENS_CACHED:,} (the "
        "compiled model is in the cache)"
    ), auto
    assert auto["compile_cache_files_added"] == 0 and auto["start_s"] < second["start_s"], started
    assert any("vllm started in" in x and "eager, not compiled" in x for x in lines), lines
    from offline_eval.verify import verify

    answers = {
        name: (
            tmp_path / "out" / "results" / f"{name}.vllm.default.ctx1024" / "jbeqa.0shot.constrained.jsonl"
        ).read_text(encoding="utf-8")
        for name in started
    }
    # the model compiled piecewise, loaded from the cache, eager and compiled as one graph: the same answers
    assert len(set(answers.values())) == 1 and answers["first"].count("\n") == 8, answers
    assert verify(tmp_path / "out") == []  # the start's facts are claimed, as timings are: a rebuild keeps them
    # The index lost (or a cache filled before it existed): a compiled load that finds the model in the cache adds no
    # file, and still records where the model is.
    index = cache / "offline-eval-compiled"
    recorded = {p.name: p.read_text() for p in index.iterdir()}
    assert len(recorded) == 2, recorded  # three loads of one piecewise graph, and the whole one
    shutil.rmtree(index)
    again = {**config, "output_dir": str(tmp_path / "again"), "models": [{"name": "again", "seed": 3, **model}]}
    again["models"][0]["compile"] = "always"
    summary = offline_eval.sweep(again, progress=False, log=lines.append)
    assert summary.provenance is not None
    f = summary.provenance.loads[0].engine_start
    assert f is not None and f["compiled_model_loaded"] and f["compile_cache_files_added"] == 0, f
    relearned = {p.name: p.read_text() for p in index.iterdir()}
    assert len(relearned) == 1 and relearned.items() < recorded.items(), (relearned, recorded)


def test_the_compile_cache_is_the_users_even_after_torch_pins_its_own(tmp_path: Path) -> None:
    """torch writes its default (/tmp/torchinductor_USER) into the environment on first use, so offline-eval sets
    the folder when it is imported, before torch is."""
    import os
    import subprocess
    import sys

    pytest.importorskip("torch")
    drop = ("TORCHINDUCTOR_CACHE_DIR", "VLLM_CACHE_ROOT", "XDG_CACHE_HOME")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    code = (
        "import offline_eval, torch\n"
        "from torch._inductor.runtime.cache_dir_utils import cache_dir\n"
        "from offline_eval.inference.backends.vllm.cache import compile_cache\n"
        "print(cache_dir()); print(compile_cache())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={**env, "HOME": str(tmp_path)}, capture_output=True, text=True, check=True
    )
    ours = tmp_path / ".cache" / "offline-eval"
    assert out.stdout.split() == [str(ours / "torchinductor"), str(ours / "vllm")], out.stderr[-2000:]


def test_vllm_inspects_a_new_model_class_in_this_process_on_the_cpu(monkeypatch) -> None:
    """vLLM inspects a model class it has not seen in a fresh Python process (about 11 s of a first start on 2 cores),
    lest importing it initialize CUDA here; on the CPU it runs here, while an engine is open."""
    import os

    pytest.importorskip("vllm")
    from vllm.model_executor.models import registry
    from vllm.platforms import current_platform

    from offline_eval.inference.backends.vllm.patches import Installed

    if not current_platform.is_cpu():
        pytest.skip("vLLM's own subprocess on a GPU")
    own = registry._run_in_subprocess
    one, two = Installed(), Installed()
    one.patch(cpu=True, piecewise=False)
    patched = registry._run_in_subprocess
    two.patch(cpu=True, piecewise=False)
    assert registry._run_in_subprocess is patched is not own  # once, not wrapped again per load
    assert registry._run_in_subprocess(os.getpid) == os.getpid()
    two.end("engine")
    assert registry._run_in_subprocess is patched  # the load that installed it removes it
    one.end("engine")
    assert registry._run_in_subprocess is own
