"""An engine loaded on first use: a re-run whose outputs are all stored starts none."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from offline_eval.inference.backends.base import Backend
from offline_eval.inference.backends.registry import get_engine, load_backend, spec_fingerprint
from offline_eval.inference.backends.spec import LoadSpec
from offline_eval.modelfiles.fingerprint import HashCache


class LazyBackend:
    """Loads the engine on first use, so a re-run whose outputs are all stored starts no engine. `plan` counts the
    prompt tokens planned on the load, for an engine that chooses how to start from them (Backend.plans_start)."""

    def __init__(
        self,
        spec: LoadSpec,
        hashes: HashCache | None = None,
        load: Callable[[LoadSpec], Backend] = load_backend,
        plan: Callable[[], int | None] | None = None,
        release: Callable[[Backend], None] | None = None,
    ) -> None:
        self.spec = spec
        self.fingerprint = spec_fingerprint(spec, hashes)
        self._load = load  # in this process, or an engine on a Ray worker (offline_eval.pipeline.executors)
        self._plan = plan
        self._release = release  # what the run does with its engine when done (default: close it)
        self._backend: Backend | None = None

    @property
    def loaded(self) -> bool:
        return self._backend is not None

    def get(self) -> Backend:
        if self._backend is None:
            spec = self.spec
            if self._plan is not None and get_engine(spec.backend).declared_class().plans_start:
                spec = replace(spec, planned_prompt_tokens=self._plan())
            self._backend = self._load(spec)
        return self._backend

    def engine_start(self) -> dict[str, Any] | None:
        """What the engine's start did (None: it never started: every output came from the store)."""
        if self._backend is None:
            return None
        got = getattr(self._backend, "engine_start", None)  # an engine on a Ray worker may not say
        return got() if callable(got) else None

    def close(self, keep: bool = True) -> None:
        """`keep`: the run ended well, so the engine may serve the next one (release); else it is closed."""
        if self._backend is not None:
            backend, self._backend = self._backend, None
            if self._release is not None and keep:
                self._release(backend)
            else:
                backend.close()
