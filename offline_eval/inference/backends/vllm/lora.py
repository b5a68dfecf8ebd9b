"""A LoRA adapter on vLLM: the engine arguments its load needs and the request every prompt carries."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from offline_eval.modelfiles.peft import CONFIG, WEIGHTS, PeftAdapter, read_peft
from offline_eval.runtime.errors import InputError

# vLLM's LoRAConfig.max_lora_rank accepts these values alone (config/lora.py, MaxLoRARanks).
RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def lora_args(adapter: str, others: Sequence[str] = ()) -> dict[str, Any]:
    """enable_lora with the smallest max_lora_rank vLLM accepts that holds the adapter's rank and those of the
    others this load may serve next (one that cannot be read fails its own run, not this one)."""
    own = read_peft(adapter)
    if why := rank_problem(own):
        raise InputError(why)
    ranks = [own.rank]
    for other in others:
        try:
            ranks.append(read_peft(other).rank)
        except InputError:
            pass
    rank = max(r for r in ranks if r <= RANKS[-1])  # one vLLM cannot hold fails its own run, not the others'
    return {"enable_lora": True, "max_lora_rank": next(r for r in RANKS if r >= rank), "max_loras": 1}


def rank_problem(adapter: PeftAdapter) -> str | None:
    """Why vLLM cannot hold this adapter's rank (None: it can)."""
    if adapter.rank <= RANKS[-1]:
        return None
    return (
        f"{Path(adapter.path) / CONFIG}: field 'r': rank {adapter.rank} is above vLLM's largest max_lora_rank "
        f"({RANKS[-1]}): run it on transformers, or merge it into the weights"
    )


class Lora:
    """The adapter as vLLM is given it: a LoRARequest, over a scaled copy where `adapter_scale` is not 1 (vLLM
    takes no scale per request: B scaled by s gives s·(alpha/r)·B·A, which is what PEFT and llama.cpp compute)."""

    def __init__(self, adapter: str, scale: float, lora_id: int = 1) -> None:
        from vllm.lora.request import LoRARequest

        self._tmp: str | None = None
        path = Path(adapter)
        if scale != 1.0:
            self._tmp = tempfile.mkdtemp(prefix="offline-eval-lora-")
            path = scaled_copy(adapter, scale, Path(self._tmp))
        self.request = LoRARequest(f"adapter-{lora_id}", lora_id, str(path))
        self.id = lora_id

    def close(self) -> None:
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


def scaled_copy(adapter: str, scale: float, out: Path) -> Path:
    """The PEFT folder with every lora_B multiplied by `scale`."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(Path(adapter) / WEIGHTS))
    scaled = {k: (v.float() * scale).to(v.dtype) if ".lora_B" in k else v for k, v in tensors.items()}
    save_file(scaled, str(out / WEIGHTS))
    shutil.copyfile(Path(adapter) / CONFIG, out / CONFIG)
    return out
