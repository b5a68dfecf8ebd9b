"""vLLM's compile cache: where it is, what makes it load, and which loads' compiled models it holds."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from offline_eval.runtime.errors import InputError
from offline_eval.runtime.fileio import write_text_atomic

_INDEX = "offline-eval-compiled"
# Change the run, not the traced graph (a second load with another seed loads the first one's compiled model).
_NOT_TRACED = ("seed",)


def compile_cache() -> Path:
    """Where vLLM keeps its compiled model across loads and sweeps: VLLM_CACHE_ROOT where the user set it, else
    offline-eval's folder in the user's cache (an exported empty value counts as unset: as a path it is the working
    folder). vLLM's AOT compile cache is kept there, and when it compiles it points torch inductor's cache
    (TORCHINDUCTOR_CACHE_DIR) into it too. A load sets VLLM_CACHE_ROOT to it for as long as its engine runs."""
    if os.environ.get("VLLM_CACHE_ROOT", "").strip():
        return Path(os.environ["VLLM_CACHE_ROOT"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "offline-eval" / "vllm"


def compiled_graph(llm: Any) -> str | None:
    """How the engine compiled, read from its config, not from what was asked: piecewise (VLLM_COMPILE), whole
    (one graph), or None (not compiled)."""
    from vllm.config import CompilationMode

    config = getattr(getattr(llm, "llm_engine", None), "vllm_config", None)
    mode = getattr(getattr(config, "compilation_config", None), "mode", None)
    if mode == CompilationMode.VLLM_COMPILE:
        return "piecewise"
    if mode in (CompilationMode.DYNAMO_TRACE_ONCE, CompilationMode.STOCK_TORCH_COMPILE):
        return "whole"
    return None


def cache_roots(root: Path) -> set[Path]:
    """The compile cache, and inductor's where it is kept apart (VLLM_USE_AOT_COMPILE=0): read before vLLM starts,
    since an AOT compile points TORCHINDUCTOR_CACHE_DIR into the compile cache for the rest of the process."""
    return {root, Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR") or root)}


def cache_files(roots: set[Path]) -> set[str]:
    return {str(p) for r in roots if r.is_dir() for p in r.rglob("*") if p.is_file()}


class CompiledIndex:
    """Which engine arguments' compiled models the cache holds, so `compile: auto` can choose before vLLM starts.
    vLLM's own key needs the engine's whole config, which exists only once it has started; this one is the engine
    arguments, the model's config.json and the versions, and names the compiled model file vLLM saved or loaded.
    vLLM's key also hashes its VLLM_* environment, which vLLM itself changes during a process's first load, so a key
    with it would differ between a sweep's first load and its later ones. One small file per key, so two sweeps
    sharing the cache never merge. A wrong answer costs only speed: a load that compiles where it could have started
    eager, or the reverse."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.folder = root / _INDEX

    @staticmethod
    def key(engine_kwargs: dict[str, Any], graph: str = "whole") -> str | None:
        """None where the arguments cannot be keyed: the load then counts as not compiled. `graph`: how the model
        compiles (whole or piecewise), which vLLM's own key has in its config."""
        import torch
        import vllm

        traced = {k: v for k, v in engine_kwargs.items() if k not in _NOT_TRACED and k != "enforce_eager"}
        model = Path(str(traced.get("model", "")))
        config = model / "config.json"
        try:
            traced["model"] = str(model.resolve())
            made = config.read_bytes() if config.is_file() else b""
            blob = json.dumps(
                [traced, hashlib.sha256(made).hexdigest(), vllm.__version__, torch.__version__, graph],
                sort_keys=True,
                default=str,
            )
        except (OSError, TypeError, ValueError):
            return None
        return hashlib.sha256(blob.encode()).hexdigest()[:32]

    @staticmethod
    def _aot_on() -> bool:
        """vLLM loads a compiled model only with its AOT cache on and the compile cache not disabled."""
        from vllm import envs

        return bool(envs.VLLM_USE_AOT_COMPILE) and not envs.VLLM_DISABLE_COMPILE_CACHE

    def _model_file(self, at: str) -> Path | None:
        """A compiled model file in the cache's AOT folder, or None for anything else."""
        try:
            p = (self.root / at).resolve()
            p.relative_to((self.root / "torch_compile_cache" / "torch_aot_compile").resolve())
        except (OSError, ValueError):
            return None
        return p if p.name == "model" else None

    def holds(self, key: str | None) -> bool:
        """The compiled model recorded for these arguments is still in the cache, and vLLM would load it."""
        if key is None or not self._aot_on():
            return False
        try:
            at = (self.folder / key).read_text(encoding="utf-8").strip()
        except (OSError, ValueError):  # none yet, or not ours to read: not compiled
            return False
        found = self._model_file(at)
        return found is not None and found.is_file()

    def record(self, key: str | None, candidates: list[str]) -> None:
        """After a compiled load: the first of the candidate paths (the model file vLLM loaded from, the files it
        added) that is a compiled model file in the cache."""
        if key is None:
            return
        root = self.root.resolve()
        for c in candidates:
            found = self._model_file(c)
            if found is not None and found.is_file():
                try:
                    write_text_atomic(self.folder / key, str(found.relative_to(root)) + "\n")
                except (OSError, InputError):  # a cache it cannot write to: the next load chooses as if empty
                    pass
                return


def loaded_from(llm: Any) -> list[str]:
    """The compiled model file vLLM keys this engine on, where its config is in this process (the engine core
    in-process): a load that found it in the cache adds no file, and still tells the index where it is."""
    config = getattr(getattr(llm, "llm_engine", None), "vllm_config", None)
    at = getattr(getattr(config, "compilation_config", None), "local_cache_dir", None)
    parallel = getattr(config, "parallel_config", None)
    if not at or parallel is None:
        return []
    # vLLM's own layout (compilation/decorators.py): {local_cache_dir}/rank_{rank}_{dp_rank}/model
    return [os.path.join(at, f"rank_{parallel.rank}_{parallel.data_parallel_index}", "model")]


class StartRecord:
    """What one engine start did, measured around it: its seconds, the compile cache's new files, whether the
    compiled model came from vLLM's AOT cache, and the engine-core process it started."""

    def __init__(self, cache: Path, aot_loaded: list[str]) -> None:
        self.cache, self._aot = cache, aot_loaded

    def __enter__(self) -> StartRecord:
        import multiprocessing

        from vllm.compilation.counter import compilation_counter

        self._roots = cache_roots(self.cache)
        self._before, self._had = set(multiprocessing.active_children()), cache_files(self._roots)
        self._loaded, self._paths = compilation_counter.num_aot_artifacts_loaded, len(self._aot)
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        import multiprocessing

        from vllm.compilation.counter import compilation_counter

        self.seconds = round(time.perf_counter() - self._t0, 1)
        self.made = cache_files(self._roots) - self._had
        self.model_loaded = compilation_counter.num_aot_artifacts_loaded > self._loaded
        self.aot_loaded = self._aot[self._paths :]
        self.children = set(multiprocessing.active_children()) - self._before

    def record(self, llm: Any, eager: bool, why: str) -> dict[str, Any]:
        """provenance.loads[].engine_start: a loaded piecewise model may still build a kernel its first start never
        ran, so 'compiled' where files were made and the model was not loaded."""
        return {
            "start_s": self.seconds,
            "compile": "eager" if eager else ("compiled" if self.made and not self.model_loaded else "reused"),
            "compile_graph": None if eager else compiled_graph(llm),
            "compile_choice": why,
            "compile_cache": str(self.cache),
            "compile_cache_files_added": len(self.made),
            "compiled_model_loaded": self.model_loaded,
        }
