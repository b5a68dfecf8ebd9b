#!/usr/bin/env python
"""The Int8/Int4 check on your GPU, in one command: Gemma 3 270M BF16, W8A8 and W4A16 (and FP8 where the GPU has
FP8 kernels, compute capability 8.9 or above) on vLLM CUDA over the full-size JBE-QA set (3,464 statements in the
release's form, 0- and 4-shot, constrained and logprob): items/s, peak GPU memory, the share of answers that flip
against BF16 and the verdict table. About 5 minutes on one GPU (vLLM's start included).

    python scripts/gpu_check.py                # needs vLLM's CUDA build and the folders scripts/setup.sh makes
    python scripts/gpu_check.py --cpu-quick    # the same path on the vLLM CPU build, tiny model, 40 statements

On a machine without a CUDA GPU it says so in one line and exits 0 (the test suite runs --cpu-quick)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from bench_quant import GEMMA, measure, schemes  # noqa: E402


def cuda() -> tuple[bool, str, tuple[int, int] | None]:
    """(a CUDA GPU is usable, what it is or why not, its compute capability)."""
    try:
        import torch
    except ImportError:
        return False, "torch is not installed", None
    if not torch.cuda.is_available():
        build = "a CPU-only torch build" if torch.version.cuda is None else "no CUDA device visible"
        return False, f"no CUDA GPU here ({build}, torch {torch.__version__})", None
    return True, torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0)


def gpu_entries(capability: tuple[int, int] | None) -> dict[str, dict[str, Any]]:
    entries = {k: v for k, v in schemes(tiny=False).items() if k.startswith("vllm.")}
    for e in entries.values():
        e["max_model_len"] = 2048
        e["gpu_memory_utilization"] = 0.5
    if capability is not None and capability >= (8, 9):  # vLLM's FP8 W8A8 kernels (Ada, Hopper and later)
        bf16 = str(GEMMA / "hf")
        entries["vllm.fp8"] = {**entries["vllm.bf16"], "variants": {"fp8": {"file": bf16, "quantization": "fp8"}}}
    return entries


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu-quick", action="store_true", help="the tiny model on the vLLM CPU build, 40 statements")
    ap.add_argument("--items", type=int, help="statements (default: 3,464 on a GPU, 40 with --cpu-quick)")
    ap.add_argument("--out", default="runs/gpu_check")
    a = ap.parse_args()
    if a.cpu_quick:
        entries = {k: v for k, v in schemes(tiny=True).items() if k.startswith("vllm.")}
        return measure(entries, a.items or 40, [0], Path(a.out), "tiny, vLLM CPU build (--cpu-quick)")
    usable, what, capability = cuda()
    if not usable:
        print(f"gpu_check: {what}; nothing to check on a GPU (--cpu-quick runs the same path on the CPU build)")
        return 0
    print(f"gpu_check: {what}, compute capability {capability}", flush=True)
    return measure(gpu_entries(capability), a.items or 3464, [0, 4], Path(a.out), f"Gemma 3 270M on {what}", gpu=True)


if __name__ == "__main__":
    sys.exit(main())
