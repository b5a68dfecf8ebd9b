"""A quantized folder on vLLM's CPU build: what it refuses, the dtype its kernels take, and the int4 path."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from offline_eval.inference.backends.quantized import FolderQuantization
from offline_eval.inference.backends.spec import LoadSpec
from offline_eval.runtime.errors import InputError

from .patches import Installed


def quantized_on_cpu(
    q: FolderQuantization, spec: LoadSpec, kwargs: dict[str, Any], in_process: bool, env: Installed
) -> str | None:
    """Refuses what the CPU build cannot run, sets the dtype its int8/int4 kernels take, and chooses the int4 path:
    what a GPU runs (W4A16) where this process can start the CPU's AMX unit, else vLLM's CPU default, which also
    rounds activations to int8 (W4A8). Returns that choice for an int4 scheme."""
    import torch

    config = str(Path(spec.path) / "config.json")
    if why := q.cpu_problem():
        raise InputError(why, file=config, field="quantization_config")
    if spec.dtype and spec.dtype.lower() not in ("bfloat16", "bf16"):
        raise InputError(
            f"dtype {spec.dtype}: the vLLM CPU build's int8 and int4 kernels take bfloat16 activations (vLLM 0.32); "
            "leave dtype out for a quantized folder",
            field="dtype",
        )
    kwargs["dtype"] = "bfloat16"
    if q.bits != 4:
        return None
    amx = bool(getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)())
    if not amx:
        return "w4a16 (cpu_gemm_wna16)"
    if in_process and torch.cpu._init_amx():  # without it the AMX int4 kernel dies on an illegal instruction
        env.setenv({"VLLM_CPU_INT4_W4A8": "0"})
    if os.environ.get("VLLM_CPU_INT4_W4A8", "").strip() == "0":  # ours, or the user's
        return "w4a16 (cpu_gemm_wna16, AMX)"
    return "w4a8 (vLLM's CPU default with AMX: activations rounded to int8 per token)"
