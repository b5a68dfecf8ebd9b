"""The one list of engines. Every `offline_eval/backends/*_backend.py` module declares `ENGINE = Engine(...)`;
the config schema, the CLI's choices, the path rules, the store key and the dry-run planner read it from here.
Engine libraries are imported only when a model is loaded, so a missing one never breaks the CLI."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..errors import InputError, MissingExtraError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .base import Backend
    from .spec import LoadSpec

# remote: no local weights (a server); the engine's own `options` keys say where the model is served.
Weights = Literal["gguf", "hf", "any", "remote"]


@dataclass(frozen=True)
class Engine:
    name: str
    backend_class: str  # the class in the declaring module
    requires: str  # the Python module that must import for the engine to load
    extra: str  # what `pip install 'offline-eval[...]'` names
    dists: tuple[str, ...] = ()  # distributions whose version is part of the store key
    weights: Weights = "hf"  # a .gguf file, an HF model folder, anything that exists, or none (remote)
    options: type[BaseModel] | None = None  # models.yaml keys of this engine alone, validated by config
    path_options: tuple[str, ...] = ()  # those of its keys that are local paths (resolved against models.yaml)
    module: str = ""

    @property
    def remote(self) -> bool:
        return self.weights == "remote"

    def connects_to(self, engine_options: dict[str, Any]) -> list[str]:
        """The URLs a model of this engine is reached at (none for local weights)."""
        declared = self.options
        if declared is None or not hasattr(declared, "connects_to"):
            return []
        return list(declared.model_validate(engine_options).connects_to())

    def path_problem(self, value: str) -> str | None:
        """Why `value` cannot be this engine's weights (None: it can)."""
        p = Path(value)
        if self.weights == "gguf" and not p.is_file():
            return f"{self.name} needs a .gguf file"
        if self.weights == "hf" and not p.is_dir():
            return f"{self.name} needs a model folder"
        return None

    def backend(self) -> type[Backend]:
        """The engine's class, once its library imports (else: one line naming the extra to install)."""
        try:
            importlib.import_module(self.requires)
        except ImportError:
            raise MissingExtraError(self.extra, self.name) from None
        return self.declared_class()

    def declared_class(self) -> type[Backend]:
        """The class alone: the module imports its engine library lazily, so this is cheap."""
        return getattr(importlib.import_module(self.module), self.backend_class)


@lru_cache(maxsize=1)
def _engines() -> dict[str, Engine]:
    from .. import backends

    found: dict[str, Engine] = {}
    for mod in sorted(pkgutil.iter_modules(backends.__path__), key=lambda m: m.name):
        if not mod.name.endswith("_backend"):
            continue
        full = f"{backends.__name__}.{mod.name}"
        declared = getattr(importlib.import_module(full), "ENGINE", None)
        if isinstance(declared, Engine):
            found[declared.name] = Engine(**{**declared.__dict__, "module": full})
    return found


def engine_names() -> tuple[str, ...]:
    return tuple(_engines())


def get_engine(name: str) -> Engine:
    engines = _engines()
    if name not in engines:
        raise InputError(f"unknown backend '{name}', expected one of {', '.join(engines)}", field="backend")
    return engines[name]


def load_backend(spec: LoadSpec) -> Backend:
    return get_engine(spec.backend).backend()(spec)
