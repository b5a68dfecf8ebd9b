"""Several LoRA adapters over one base are one engine load: a load released by one adapter's run is kept, and the
next run over the same weights and options takes it with its own adapter (vLLM's multi-LoRA) instead of starting
the engine again. A load for anything else closes the kept one first, so no two engines are ever held."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from offline_eval.inference.backends.base import Backend
from offline_eval.inference.backends.registry import get_engine, load_backend
from offline_eval.inference.backends.spec import LoadSpec


def shared_base(spec: LoadSpec) -> LoadSpec | None:
    """What the adapter runs of one engine load have in common (None: this load is its own)."""
    if spec.adapter is None or len(spec.adapter_group) < 2:
        return None
    if not get_engine(spec.backend).declared_class().swaps_adapters:
        return None
    return replace(spec, variant="", adapter=None, adapter_scale=1.0, planned_prompt_tokens=None)


class AdapterPool:
    """Loads engines, keeping the last adapter load for the next adapter over the same base."""

    def __init__(self, load: Callable[[LoadSpec], Backend] = load_backend) -> None:
        self._load = load
        self._kept: tuple[LoadSpec, Backend] | None = None

    def load(self, spec: LoadSpec) -> Backend:
        base = shared_base(spec)
        if base is not None and self._kept is not None and self._kept[0] == base:
            backend = self._kept[1]
            self._kept = None
            try:
                backend.use_adapter(str(spec.adapter), spec.adapter_scale)
            except BaseException:
                backend.close()
                raise
            return backend
        self.close()
        return self._load(spec)

    def release(self, backend: Backend) -> None:
        """A run is done with its engine: kept where another adapter over its base may come next, else closed."""
        base = shared_base(backend.spec)
        if base is None:
            backend.close()
            return
        self.close()
        self._kept = (base, backend)

    def close(self) -> None:
        if self._kept is not None:
            kept, self._kept = self._kept[1], None
            kept.close()
