"""What one vLLM load starts with: `LLM`'s keywords and the environment, from the load's spec and the facts of the
platform it starts on (`Platform`, gathered by the backend). Pure: tests/test_vllm_args.py checks it without vLLM."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offline_eval.inference.backends.spec import LoadSpec
from offline_eval.inference.backends.vllm.lora import lora_args
from offline_eval.inference.backends.vllm.options import VLLMOptions
from offline_eval.modelfiles.quantization import FolderQuantization
from offline_eval.runtime.errors import InputError

W4A8 = "w4a8 (vLLM's CPU default with AMX: activations rounded to int8 per token)"
W4A16_AMX = "w4a16 (cpu_gemm_wna16, AMX)"


@dataclass(frozen=True)
class Platform:
    on_cpu: bool
    one_process: bool  # one shard and vLLM's own executor
    in_process: bool  # ...and multiprocessing not asked for by the user: the engine core runs in this process
    int4_kernel: str | None = None  # the kernel path this CPU takes for an int4 folder (quantized.int4_kernel)
    int4_problem: str | None = None  # why the CPU build has no W4A16 kernel here (quantized.int4_kernel_problem)


@dataclass(frozen=True)
class StartArgs:
    kwargs: dict[str, Any]  # LLM(**kwargs), but enforce_eager, which the compile cache decides (options.compile_choice)
    env: dict[str, str] = field(default_factory=dict)  # set where the user has not set them (Installed.setenv)
    int4: str | None = None  # the int4 kernel path taken (None: not an int4 folder on the CPU)
    piecewise: bool = False  # the model compiles in pieces (cpu_compile: piecewise, in this process)


def engine_args(spec: LoadSpec, folder_q: FolderQuantization | None, p: Platform) -> StartArgs:
    env: dict[str, str] = {}
    if p.on_cpu:
        env["VLLM_CPU_KVCACHE_SPACE"] = "1"
        if p.one_process:
            # The engine core in this process: on CPU the engine-core and worker processes each import torch and
            # vLLM again and trace the model in their own interpreter, which took half the start (Gemma 3 270M:
            # 41.9 s against 81.5 s with the compile cache warm; scripts/bench_engine_start.py).
            env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    kwargs: dict[str, Any] = dict(
        model=spec.path,
        tokenizer=spec.path,
        max_model_len=spec.max_model_len,
        seed=spec.seed,
        trust_remote_code=spec.trust_remote_code,
        tensor_parallel_size=spec.tensor_parallel_size,
        enable_prefix_caching=spec.enable_prefix_caching,
        structured_outputs_config=structured_config(spec.constraint_backend),
        # On CPU this is the share of RAM reserved, and the GPU default of 0.92 fails to start.
        gpu_memory_utilization=spec.gpu_memory_utilization or (0.1 if p.on_cpu else 0.9),
    )
    if spec.dtype:
        kwargs["dtype"] = spec.dtype
    if spec.quantization and folder_q is None:  # the folder's own config.json says what its weights are
        kwargs["quantization"] = spec.quantization
    int4 = None
    if p.on_cpu and folder_q is not None:
        int4 = _quantized_on_cpu(folder_q, spec, p)
        kwargs["dtype"] = "bfloat16"
        if int4 == W4A16_AMX and p.in_process:
            env["VLLM_CPU_INT4_W4A8"] = "0"
    kwargs.update({**(lora_args(spec.adapter, spec.adapter_group) if spec.adapter else {}), **spec.engine_args})
    pieces = p.on_cpu and p.in_process and VLLMOptions.model_validate(spec.engine_options).cpu_compile == "piecewise"
    return StartArgs(kwargs, env, int4, pieces)


def _quantized_on_cpu(q: FolderQuantization, spec: LoadSpec, p: Platform) -> str | None:
    """Refuses what the CPU build cannot run (its int8/int4 kernels take bfloat16 activations) and returns the int4
    path: what a GPU runs (W4A16) where this process can start the CPU's AMX unit, else vLLM's CPU default, which
    also rounds activations to int8 (W4A8)."""
    config = str(Path(spec.path) / "config.json")
    if why := q.cpu_problem():
        raise InputError(why, file=config, field="quantization_config")
    if spec.dtype and spec.dtype.lower() not in ("bfloat16", "bf16"):
        raise InputError(
            f"dtype {spec.dtype}: the vLLM CPU build's int8 and int4 kernels take bfloat16 activations (vLLM 0.32); "
            "leave dtype out for a quantized folder",
            field="dtype",
        )
    if p.int4_kernel is not None and p.int4_kernel != W4A8 and p.int4_problem:
        raise InputError(p.int4_problem, file=config, field="quantization_config")
    return p.int4_kernel


def structured_config(backend: str | None) -> dict[str, Any]:
    if backend == "outlines":  # vLLM refuses the whitespace switch for it: our regex for it has none
        return {"backend": backend}
    # Engine-wide: with the per-request flag alone, small models loop on whitespace inside JSON.
    return {"backend": backend or "xgrammar", "disable_any_whitespace": True}
