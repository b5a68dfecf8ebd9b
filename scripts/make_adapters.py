#!/usr/bin/env python
"""Build random LoRA adapters with `peft` over a local HF model, offline and deterministically, and each one's
llama.cpp GGUF form where a GGUF of the same weights is given.

    python scripts/make_adapters.py BASE_HF_FOLDER OUT --names a,b,c,d [--gguf BASE.gguf] [--rank 8]

OUT/NAME/        PEFT folder (adapter_config.json + adapter_model.safetensors), float32
OUT/NAME.gguf    the same adapter for llama.cpp (offline-eval adapter gguf), with --gguf

lora_B is not zero (PEFT's default initialisation makes it zero, which changes nothing): both matrices are drawn
from a normal distribution scaled so that the adapter moves the base's greedy answers on some items, not all.
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib
from pathlib import Path

ALL_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def make_adapter(base: Path, out: Path, seed: int, rank: int, targets: list[str], strength: float) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    cfg = LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=targets, lora_dropout=0.0, init_lora_weights=False)
    peft_model = get_peft_model(model, cfg)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_A" in name:
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[1] ** 0.5)
            elif "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * strength / p.shape[1] ** 0.5)
    peft_model.save_pretrained(str(out), safe_serialization=True)
    # the base as the folder names it, so the provenance's base check has something real to compare
    cfg_file = out / "adapter_config.json"
    import json

    data = json.loads(cfg_file.read_text())
    data["base_model_name_or_path"] = base.parent.name if base.name == "hf" else base.name
    cfg_file.write_text(json.dumps(data, indent=2, sort_keys=True))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", type=Path, help="the HF model folder")
    ap.add_argument("out", type=Path, help="output folder")
    ap.add_argument("--names", default="a", help="comma-separated adapter names (each its own seed)")
    ap.add_argument("--gguf", help="the GGUF of the same weights: also write NAME.gguf")
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--targets", default=",".join(ALL_LINEAR))
    ap.add_argument("--strength", type=float, default=0.5, help="lora_B's scale (the adapter's size against the base)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from offline_eval.models.adapter_gguf import peft_to_gguf

    t0 = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in [n.strip() for n in args.names.split(",") if n.strip()]:
        folder = args.out / name
        make_adapter(args.base, folder, zlib.crc32(name.encode()), args.rank, args.targets.split(","), args.strength)
        if args.gguf:
            peft_to_gguf(str(folder), args.gguf, str(args.out / f"{name}.gguf"))
    print(f"adapters written to {args.out} in {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
