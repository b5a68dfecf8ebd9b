"""An engine's declaration, which its module makes as `ENGINE = Declared(...)`: what it is called, the class and library it loads, the weights it reads, its own models.yaml keys. Pure data, below the
registry that finds the modules by name (registry.py), so an engine module never imports the registry."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from pydantic import BaseModel

# remote: no local weights (a server); the engine's own `options` keys say where the model is served.
Weights = Literal["gguf", "hf", "any", "remote"]


@dataclass(frozen=True)
class Declared:
    name: str
    backend_class: str  # the class in the declaring module
    requires: str  # the Python module that must import for the engine to load
    extra: str  # what `pip install 'offline-eval[...]'` names
    dists: tuple[str, ...] = ()  # distributions whose version is part of the store key
    weights: Weights = "hf"  # a .gguf file, an HF model folder, anything that exists, or none (remote)
    options: type[BaseModel] | None = None  # models.yaml keys of this engine alone, validated by config
    path_options: tuple[str, ...] = ()  # those of its keys that are local paths (resolved against models.yaml)
    constraint_backends: tuple[str, ...] = ()  # the libraries it masks tokens with, `auto`'s first (none: a server)
    libraries: tuple[str, ...] = ()  # other distributions its runs depend on: a sweep records their versions
    tcmalloc_with: tuple[str, ...] = ()  # installed, any of these makes the CLI preload tcmalloc (runtime/preload.py)

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
