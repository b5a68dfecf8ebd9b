"""Every change offline-eval makes to vLLM (and torch) in this process, in one table, and the one context that
installs them with vLLM's environment for an engine load and takes both away when the engine closes.

Each `Patch` names its target (`module:attribute.path`), why it exists, the upstream report where one fits, when to
remove it, and when it applies. All of them apply on the CPU only (the GPU build of vLLM is not pinned, and runs as
vLLM ships it); two apply only to a piecewise compile. `start` patches are removed as soon as the engine is built
(they change how its config is made), the others when it closes (they act while it compiles and loads).

The piecewise compile. On a GPU vLLM splits the model at its attention calls and compiles the pieces between them;
the pieces of one layer are the pieces of every other, so inductor compiles a few and reuses them. On the CPU, vLLM's
platform turns that mode into DYNAMO_TRACE_ONCE, one graph of all the layers, which inductor lowers layer by layer:
about a minute of a first start on 2 cores for Gemma 3 270M, against about half that piecewise
(scripts/bench_engine_start.py). Piecewise is tried only where it was proven (`_proven`): one process (world size 1,
vLLM's in-process executor), an unquantized model, vLLM's fusion passes all off, vLLM's own splitting ops.

`Installed` is one load's record: the vLLM backend sets each `VLLM_*` variable the user has not set and installs the
patches that apply when it starts, ends the `start` ones once the engine is built, and restores everything at
close() (or when the start fails): the process is then as it was (a later whole-graph compile runs the
functionalization pass again)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

_MISSING = object()


@dataclass(frozen=True)
class Patch:
    name: str
    target: str  # "module:Class.attribute" (or "module:attribute")
    why: str
    remove_when: str
    make: Callable[[Any], Any]  # the original (_MISSING where the patch adds the attribute) -> the replacement
    applies: Literal["cpu", "piecewise"] = "cpu"
    scope: Literal["start", "engine"] = "engine"
    upstream: str = ""
    classmethod_: bool = False
    adds: bool = False  # the attribute is new (installed only where the release lacks it)

    def owner(self) -> tuple[Any, str]:
        """The object that holds the attribute, and its name; ImportError/AttributeError where this vLLM lacks it."""
        module, _, path = self.target.partition(":")
        obj: Any = importlib.import_module(module)
        *parents, attr = path.split(".")
        for p in parents:
            obj = getattr(obj, p)
        return obj, attr

    def original(self) -> Any:
        """What the target is now (inherited included; a classmethod's function), or _MISSING."""
        obj, attr = self.owner()
        now: Any = getattr(obj, attr, _MISSING)
        return now.__func__ if self.classmethod_ and now is not _MISSING else now


def _ours(fn: Any) -> Any:
    fn._offline_eval = True
    return fn


def _config_check(check: Any) -> Any:
    def check_and_update_config(cls: Any, vllm_config: Any) -> None:
        from vllm.config import CompilationMode

        asked, splits = vllm_config.compilation_config.mode, vllm_config.compilation_config.splitting_ops
        check(cls, vllm_config)  # sets the executor to mp where the engine core runs in a process of its own
        c = vllm_config.compilation_config
        if (
            asked == CompilationMode.VLLM_COMPILE
            and c.mode == CompilationMode.DYNAMO_TRACE_ONCE
            and c.backend == "inductor"
            and _proven(vllm_config, splits)
        ):
            c.mode = CompilationMode.VLLM_COMPILE
            if c.compile_sizes is None:  # the piecewise backend looks a shape up in it, and finds nothing in None
                c.compile_sizes = []

    return _ours(check_and_update_config)


def _skip(_: Any) -> Any:
    return _ours(lambda self, graph: None)


def _in_process(_: Any) -> Any:
    return _ours(lambda fn: fn())


def _finalized(_: Any) -> Any:
    return _ours(lambda self, vllm_config: None)


aot_loaded: list[str] = []  # the compiled model files vLLM loaded in this process, in order


def _noting(load: Any) -> Any:
    def try_load(model: Any, path: str) -> Any:
        fn = load(model, path)
        if fn is not None:
            aot_loaded.append(path)
        return fn

    return _ours(try_load)


def _lora_device(get: Any) -> Any:
    def device(base_layer: Any) -> Any:
        if getattr(base_layer, "weight", 0) is None:  # the int8 kernel handed its weight to oneDNN
            import torch

            return torch.device("cpu")
        return get(base_layer)

    return _ours(device)


PATCHES: tuple[Patch, ...] = (
    Patch(
        "piecewise-config",
        "vllm.platforms.cpu:CpuPlatform.check_and_update_config",
        "the CPU platform turns VLLM_COMPILE into one whole graph; this keeps the piecewise mode where proven",
        "when vLLM's CPU platform compiles piecewise itself",
        _config_check,
        applies="piecewise",
        scope="start",
        classmethod_=True,
    ),
    Patch(
        "skip-fix-functionalization",
        "vllm.compilation.passes.utility.fix_functionalization:FixFunctionalizationPass.__call__",
        "the pass looks up CUDA-only ops (torch.ops._C.fused_add_rms_norm_static_fp8_quant) that the CPU build lacks; "
        "inductor then handles the functionalized calls itself (copies where the pass wrote in place): the same values",
        "when vLLM skips the pass on the CPU, as it already does on XPU",
        _skip,
        applies="piecewise",
    ),
    Patch(
        "inspect-in-process",
        "vllm.model_executor.models.registry:_run_in_subprocess",
        "vLLM inspects a new model class in a fresh Python process lest importing it initialize CUDA: about 11 s "
        "of a first start on 2 cores, and on the CPU there is no CUDA to protect",
        "when vLLM inspects in-process on the CPU",
        _in_process,
    ),
    Patch(
        "finalize-bundled-aot",
        "torch._dynamo.aot_compile_types:BundledAOTAutogradSerializableCallable.finalize_loading",
        "vLLM calls finalize_loading on the saved model torch 2.13 hands back for inductor, which only vLLM's own "
        "backend's function has, and compiles everything again; the bundled function is the compiled model",
        "when vLLM's AOT cache loads inductor's bundled callable (or torch adds the method)",
        _finalized,
        upstream="'function' object has no attribute 'finalize_loading'",
        adds=True,
    ),
    Patch(
        "note-aot-loads",
        "vllm.compilation.decorators:_try_load_aot_compiled_fn",
        "records which compiled model file each load read, for the compile index (a piecewise load points its "
        "config's local_cache_dir elsewhere)",
        "when vLLM reports the AOT artifact it loaded",
        _noting,
    ),
    Patch(
        "lora-over-int8",
        "vllm.lora.layers.base_linear:_get_lora_device",
        "LoRA places its tensors on the device of the base layer's weight, which the CPU W8A8 kernel (oneDNN) "
        "sets to None once it has packed it: an adapter over an Int8 base failed to start; the device is the CPU",
        "when _get_lora_device handles a released weight (vllm/lora/layers/utils.py)",
        _lora_device,
        upstream="'NoneType' object has no attribute 'device'",
    ),
)


def _proven(vllm_config: Any, splitting_ops: Any) -> bool:
    """The case piecewise was measured on: one process, an unquantized model, no fusion pass, vLLM's own splits."""
    parallel, model = vllm_config.parallel_config, vllm_config.model_config
    passes = vllm_config.compilation_config.pass_config
    fusions = [v for k, v in vars(passes).items() if k.startswith(("fuse_", "enable_"))]
    return (
        parallel.world_size == 1
        and parallel.distributed_executor_backend == "uni"
        and getattr(model, "quantization", None) is None
        and vllm_config.quant_config is None
        and not any(fusions)
        and splitting_ops is None
    )


class Installed:
    """The patches and environment one load installed; `end(scope)` restores what that scope installed."""

    def __init__(self) -> None:
        self._undo: list[tuple[str, Callable[[], None]]] = []
        # vLLM's environment as it was: ours and what vLLM itself sets while it runs (VLLM_DIST_IDENT, ...) go
        self._env = {k: v for k, v in os.environ.items() if k.startswith("VLLM_")}
        self.installed: dict[str, bool] = {}  # patch name -> whether this release took it

    def install(self, p: Patch) -> bool:
        try:
            obj, attr = p.owner()
            before = p.original()
        except (ImportError, AttributeError):  # another release: its own way
            return False
        if (before is _MISSING) != p.adds:  # another release: nothing to mend, or not what the patch mends
            return False
        if getattr(before, "_offline_eval", False):  # a load still open installed it: that load removes it
            return True
        raw = vars(obj).get(attr, _MISSING) if isinstance(obj, type) else getattr(obj, attr, _MISSING)
        new = p.make(before)
        setattr(obj, attr, classmethod(new) if p.classmethod_ else new)

        def undo() -> None:
            if raw is _MISSING:
                delattr(obj, attr)
            else:
                setattr(obj, attr, raw)

        self._undo.append((p.scope, undo))
        return True

    def patch(self, *, cpu: bool, piecewise: bool) -> None:
        """Every patch that applies: on the CPU only, the piecewise ones only for a piecewise compile."""
        for p in PATCHES:
            if cpu and (p.applies == "cpu" or piecewise):
                self.installed[p.name] = self.install(p)

    def setenv(self, env: dict[str, str]) -> None:
        for k, v in env.items():
            if not os.environ.get(k, "").strip():  # else the user's
                os.environ[k] = v

    def end(self, scope: Literal["start", "engine"]) -> None:
        keep = []
        for s, undo in reversed(self._undo):
            if scope == "engine" or s == "start":
                undo()
            else:
                keep.append((s, undo))
        self._undo = list(reversed(keep))
        if scope == "engine":
            for k in [k for k in os.environ if k.startswith("VLLM_") and k not in self._env]:
                del os.environ[k]
            os.environ.update(self._env)


def patch_targets_missing() -> list[str]:
    """The targets this vLLM and torch lack (the table's test: every one is there in the pinned releases)."""
    missing = []
    for p in PATCHES:
        try:
            p.owner()
        except (ImportError, AttributeError):
            missing.append(p.target)
            continue
        if (p.original() is _MISSING) != p.adds:
            missing.append(p.target)
    return missing
