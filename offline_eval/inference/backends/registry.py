"""The one list of engines. Every `inference/backends/*_backend.py` module (or `<name>/backend.py`, for an engine with
modules of its own) declares `ENGINE = Declared(...)` (declare.py); the config schema, the CLI's choices, the path
rules, the store key and the dry-run planner read it from here. Engine libraries are imported only when a model is
loaded, so a missing one never breaks the CLI."""

from __future__ import annotations

import hashlib
import importlib
import json
import pkgutil
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

from offline_eval.inference.backends.base import Backend
from offline_eval.inference.backends.declare import Declared
from offline_eval.modelfiles.fingerprint import PINS, HashCache, files_fingerprint, served_key
from offline_eval.modelfiles.peft import adapter_problem
from offline_eval.modelfiles.quantization import folder_quantization
from offline_eval.runtime.errors import InputError, MissingExtraError, OfflineEvalError

if TYPE_CHECKING:
    from offline_eval.inference.backends.spec import LoadSpec, PromptCounter


@dataclass(frozen=True)
class Engine(Declared):
    """A declared engine as the registry found it: its module, and what needs the module by name."""

    module: str = ""

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

    def adapter_problem(self, adapter: str, base: str) -> str | None:
        """Why this engine cannot run `adapter` over `base` (None: it can)."""
        return adapter_problem(self.weights, adapter, base, self.declared_class().peft_problem)

    def load_quantization_problem(self, path: str, quantization: str | None) -> str | None:
        """Why this engine cannot quantize these unquantized weights as a variant's `quantization:` says while it
        loads them (None: it can, the weights are a quantized folder, or nothing is asked)."""
        if not quantization or folder_quantization(path) is not None:
            return None
        return self.declared_class().load_quantization_problem(quantization)

    def version(self) -> str:
        """The installed engine library's version (a rebuild from the store: the one the sweep ran)."""
        pins = PINS.get()
        if pins is not None and self.name in pins.versions:
            return pins.versions[self.name]
        for dist in self.dists:
            try:
                return f"{dist}=={version(dist)}"
            except PackageNotFoundError:
                continue
        return "unknown"

    def fingerprint(self, spec: LoadSpec, cache: HashCache | None = None) -> str:
        """The store key's model part: the weights' identity, the engine version and the output-affecting load
        options. Computed without loading the engine, so a fully stored run never starts one."""
        pins = PINS.get()
        if pins is not None and self.remote:
            options = {k: v for k, v in spec.describe().items() if k not in ("path", "variant")}
            key = served_key(spec.path, json.loads(json.dumps(options, default=str)))
            if key not in pins.served:
                raise OfflineEvalError(f"no load in the provenance serves {spec.path} with these options")
            return pins.served[key]
        opts = {
            k: v
            for k, v in spec.describe().items()
            if k not in ("path", "threads", "batch_size", "gpu_memory_utilization", "variant", "engine_options")
        }
        cls = self.declared_class()
        identity = cls.weights_identity(spec, cache)
        if opts.pop("adapter", None) is not None:  # its files, wherever the folder is (its scale stays in opts)
            identity["adapter"] = files_fingerprint(str(spec.adapter), cache)
        if cls.load_defaults:  # the engine's own defaults count as if the user had written them
            opts["engine_args"] = {**cls.load_defaults, **spec.engine_args}
        blob = json.dumps(
            {**identity, "engine": spec.backend, "engine_version": self.version(), "opts": opts},
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:32]


@lru_cache(maxsize=1)
def _engines() -> dict[str, Engine]:
    found: dict[str, Engine] = {}
    for mod in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda m: m.name):
        if mod.name.endswith("_backend"):
            full = f"{__package__}.{mod.name}"
        elif mod.ispkg and (Path(__file__).parent / mod.name / "backend.py").is_file():
            full = f"{__package__}.{mod.name}.backend"  # an engine with modules of its own: <name>/backend.py
        else:
            continue
        declared = getattr(importlib.import_module(full), "ENGINE", None)
        if isinstance(declared, Declared):
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


def engine_version(backend: str) -> str:
    return get_engine(backend).version()


def spec_fingerprint(spec: LoadSpec, cache: HashCache | None = None) -> str:
    return get_engine(spec.backend).fingerprint(spec, cache)


def tcmalloc_with(backends: set[str]) -> set[str]:
    """The distributions whose presence makes these engines ask for tcmalloc (runtime/preload.py)."""
    return {d for b in backends for d in get_engine(b).tcmalloc_with}


def prompt_counter(spec: LoadSpec) -> PromptCounter | None:
    """Prompts encoded as `spec`'s engine would, without loading the weights (the dry run's planner, a served model's
    local tokenizer); None: that engine cannot count locally."""
    return get_engine(spec.backend).declared_class().prompt_counter(spec)


Backend.counter_of = staticmethod(prompt_counter)
