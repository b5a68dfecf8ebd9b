"""vLLM 0.32's start on the CPU, changed where it costs time for nothing: the compile, and the model's inspection.

The piecewise compile, where vLLM compiles the whole model as one graph on the CPU.

On a GPU vLLM splits the model at its attention calls and compiles the pieces between them; the pieces of one layer
are the pieces of every other, so inductor compiles a few and reuses them. On the CPU, vLLM's platform turns that
mode into DYNAMO_TRACE_ONCE, one graph of all the layers, which inductor lowers layer by layer: about a minute of a
first start on 2 cores for Gemma 3 270M, against about half that piecewise (scripts/bench_engine_start.py). Two
changes make the piecewise mode run on the CPU:

- the platform's config check keeps VLLM_COMPILE where it would have set DYNAMO_TRACE_ONCE with inductor, and gives
  the compile an empty list of single sizes (the piecewise backend looks a shape up in it, and finds nothing in None);
- vLLM's FixFunctionalizationPass is skipped on the CPU, as vLLM itself skips it on XPU: it looks up CUDA-only ops
  (`torch.ops._C.fused_add_rms_norm_static_fp8_quant`) that the CPU build lacks. Inductor then handles the
  functionalized calls itself (copies where the pass would have written in place): the same values.

Both are patches of vLLM's classes, in this process only: `piecewise(True)` where the engine core runs in this
process, and False elsewhere, where an engine-core process would build its graph unpatched. Even then the config
check keeps vLLM's whole graph unless the engine is one process (world size 1, vLLM's in-process executor), the model
is not quantized, vLLM's fusion passes are all off (several are imported only on CUDA or XPU) and the splitting ops
are vLLM's own: piecewise is tried only where it was proven, and `compiled_graph` reads what the engine did.

The model's inspection: the first time a model class is seen (per vLLM cache), vLLM inspects it in a fresh Python
process, so that importing it cannot initialize CUDA in this one. That process imports torch and vLLM again, about
11 s on 2 cores; on the CPU there is no CUDA to protect, and this process imports the model class to load it anyway.
`inspect_here()` runs the inspection in this process on the CPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_wanted = {"on": False}


@contextmanager
def piecewise(on: bool) -> Iterator[None]:
    """Whether an engine started inside compiles piecewise (where vLLM would compile on the CPU); no config built
    after it is touched."""
    _wanted["on"] = on and _patch()
    try:
        yield
    finally:
        _wanted["on"] = False


def inspect_here() -> None:
    """vLLM inspects a new model class in this process, on the CPU (elsewhere in a fresh one, as it does)."""
    from vllm.model_executor.models import registry
    from vllm.platforms import current_platform

    run = getattr(registry, "_run_in_subprocess", None)
    if run is None or getattr(run, "_offline_eval", False):  # another vLLM release: its own way
        return

    def run_here(fn: Any) -> Any:
        return fn() if current_platform.is_cpu() else run(fn)

    run_here._offline_eval = True  # type: ignore[attr-defined]
    registry._run_in_subprocess = run_here


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


def _patch() -> bool:
    """False where this vLLM lacks what the patches change (another release): its own whole graph then."""
    try:
        from vllm.compilation.passes.utility import fix_functionalization
        from vllm.config import CompilationMode
        from vllm.platforms import cpu, current_platform

        platform = cpu.CpuPlatform
        fix = fix_functionalization.FixFunctionalizationPass
    except (ImportError, AttributeError):
        return False
    if not all(hasattr(CompilationMode, m) for m in ("VLLM_COMPILE", "DYNAMO_TRACE_ONCE")):
        return False
    if getattr(platform.check_and_update_config, "_offline_eval", False):
        return True
    check = platform.check_and_update_config.__func__  # type: ignore[attr-defined]

    def check_and_update_config(cls: Any, vllm_config: Any) -> None:
        asked, splits = vllm_config.compilation_config.mode, vllm_config.compilation_config.splitting_ops
        check(cls, vllm_config)  # sets the executor to mp where the engine core runs in a process of its own
        c = vllm_config.compilation_config
        if (
            _wanted["on"]
            and asked == CompilationMode.VLLM_COMPILE
            and c.mode == CompilationMode.DYNAMO_TRACE_ONCE
            and c.backend == "inductor"
            and _proven(vllm_config, splits)
        ):
            c.mode = CompilationMode.VLLM_COMPILE
            if c.compile_sizes is None:
                c.compile_sizes = []

    check_and_update_config._offline_eval = True  # type: ignore[attr-defined]
    platform.check_and_update_config = classmethod(check_and_update_config)  # type: ignore[assignment,method-assign]

    call = fix.__call__

    def fix_call(self: Any, graph: Any) -> None:
        if current_platform.is_cpu():
            return None
        return call(self, graph)

    fix.__call__ = fix_call  # type: ignore[method-assign]
    return True
