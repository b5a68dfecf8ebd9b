"""vLLM's compile cache: where it is, what makes it load, and which loads' compiled models it holds."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..fileio import write_json_atomic

_INDEX = "offline-eval-compiled.json"
# Change the run, not the traced graph (a second load with another seed loads the first one's compiled model).
_NOT_TRACED = ("seed",)


def compile_cache() -> Path:
    """Where vLLM keeps its compiled model across loads and sweeps: VLLM_CACHE_ROOT where the user set it, else
    offline-eval's folder in the user's cache. vLLM's AOT compile cache is kept there, and when it compiles it points
    torch inductor's cache (TORCHINDUCTOR_CACHE_DIR) into it too."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(os.environ.setdefault("VLLM_CACHE_ROOT", str(base / "offline-eval" / "vllm")))


def aot_cache_loads() -> None:
    """vLLM 0.32 on CPU compiles with torch's inductor backend, whose saved model torch 2.13 hands back as a
    BundledAOTAutogradSerializableCallable; vLLM then calls finalize_loading on it, which only vLLM's own backend's
    function has, and compiles everything again ("'function' object has no attribute 'finalize_loading'"). The
    bundled function needs no finalizing: it is the compiled model. Without this every start compiled again."""
    try:
        from torch._dynamo.aot_compile_types import BundledAOTAutogradSerializableCallable as Bundled
    except ImportError:  # another torch: vLLM's own code path, whatever it is
        return
    if "finalize_loading" not in vars(Bundled):
        Bundled.finalize_loading = lambda self, vllm_config: None  # type: ignore[attr-defined]


def cache_roots(root: Path) -> set[Path]:
    """The compile cache, and inductor's where it is kept apart (VLLM_USE_AOT_COMPILE=0): read before vLLM starts,
    since an AOT compile points TORCHINDUCTOR_CACHE_DIR into the compile cache for the rest of the process."""
    return {root, Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR") or root)}


def cache_files(roots: set[Path]) -> set[str]:
    return {str(p) for r in roots if r.is_dir() for p in r.rglob("*") if p.is_file()}


class CompiledIndex:
    """Which engine arguments' compiled models the cache holds, so `compile: auto` can choose before vLLM starts.
    vLLM's own key needs the engine's whole config, which exists only once it has started; this one is the engine
    arguments and the versions, and names the compiled model file vLLM saved. A wrong answer costs only speed: a
    load that compiles where it could have started eager, or the reverse."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / _INDEX

    @staticmethod
    def key(engine_kwargs: dict[str, Any]) -> str:
        import torch
        import vllm

        traced = {k: v for k, v in engine_kwargs.items() if k not in _NOT_TRACED and k != "enforce_eager"}
        if "model" in traced:
            traced["model"] = str(Path(str(traced["model"])).resolve())
        blob = json.dumps([traced, vllm.__version__, torch.__version__], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:32]

    def _read(self) -> dict[str, str]:
        try:
            got = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # none yet, or not ours to trust: every model counts as not compiled
            return {}
        return (
            {k: v for k, v in got.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(got, dict) else {}
        )

    def holds(self, key: str) -> bool:
        """The compiled model recorded for these arguments is still in the cache."""
        at = self._read().get(key)
        return at is not None and (self.root / at).is_file()

    def record(self, key: str, added: set[str]) -> None:
        """After a load that compiled: the model file vLLM saved among the files it added."""
        saved = sorted(p for p in added if Path(p).name == "model" and "torch_aot_compile" in Path(p).parts)
        if not saved:
            return
        try:
            rel = str(Path(saved[0]).relative_to(self.root))
        except ValueError:  # saved outside the cache root: nothing this index can find again
            return
        try:
            write_json_atomic(self.path, {**self._read(), key: rel})
        except (OSError, InputError):  # a cache it cannot write to: the next load chooses as if it were empty
            return
