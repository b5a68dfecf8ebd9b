"""offline-eval: Japanese legal benchmarks on local open-weight models, with no network."""

import os as _os

# No hub is ever reachable for our users; make every HF library fail fast instead of retrying.
_os.environ.setdefault("HF_HUB_OFFLINE", "1")
_os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
_os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# torch inductor's compiled kernels are kept in the user's cache (vLLM's AOT compile cache, where it runs, points it
# into its own: inference/backends/vllm/cache.compile_cache). Set before torch is imported: torch pins its own default
# (/tmp/torchinductor_USER) into the environment on first use.
# An exported empty value counts as unset: torch would otherwise cache into the working folder.
if not _os.environ.get("TORCHINDUCTOR_CACHE_DIR", "").strip():
    _os.environ["TORCHINDUCTOR_CACHE_DIR"] = _os.path.join(
        _os.environ.get("XDG_CACHE_HOME") or _os.path.expanduser("~/.cache"), "offline-eval", "torchinductor"
    )

__version__ = "0.1.0"

__all__ = ["compare", "load", "sweep"]


def __getattr__(name: str) -> object:
    # The API is imported when first used, so `import offline_eval` stays light.
    if name in ("sweep", "load", "compare"):
        from offline_eval import api

        return getattr(api, name)
    raise AttributeError(f"module 'offline_eval' has no attribute {name!r}")
