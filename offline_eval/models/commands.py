"""The commands that make model files: `quantize` (llama.cpp and vLLM variants) and `adapter gguf` (a PEFT adapter
for llama.cpp). The CLI registers them; each prints one line per file written and one per failure."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from offline_eval.runtime.errors import InputError

from .adapter_gguf import peft_to_gguf
from .quantize import quantize


def add_commands(sub: Any) -> None:
    q = sub.add_parser(
        "quantize",
        help="make llama.cpp variants (q8_0, q4_k_m, ...) from an F16/BF16 GGUF, or vLLM's Int8/Int4 checkpoints "
        "(w8a8, w4a16, gptq, awq) from a Hugging Face folder",
    )
    q.add_argument("src", help="the F16 or BF16 .gguf file, or the BF16/F16/F32 model folder")
    q.add_argument("--to", required=True, help="comma-separated types, e.g. q8_0,q4_k_m or w8a8,w4a16,gptq,awq")
    q.add_argument("--out-dir", "--out", help="where to write (default: beside the input)")
    q.add_argument("--threads", type=int, default=0, help="llama.cpp's quantizer threads (0: all)")
    q.add_argument("--group-size", type=int, help="w4a16, gptq and awq: input columns per int4 scale (default 128)")
    q.set_defaults(func=cmd_quantize)

    a = sub.add_parser("adapter", help="LoRA adapter tools")
    asub = a.add_subparsers(dest="adapter_command", required=True)
    g = asub.add_parser("gguf", help="write a PEFT LoRA folder as llama.cpp's GGUF adapter")
    g.add_argument("peft_folder", help="adapter_config.json + adapter_model.safetensors")
    g.add_argument("--base", required=True, help="the GGUF model the adapter goes on (its architecture and names)")
    g.add_argument("--out", help="the .gguf file to write (default: beside the folder, PEFT_FOLDER.gguf)")
    g.add_argument("--force", action="store_true", help="replace an existing --out (never an input)")
    g.set_defaults(func=cmd_adapter_gguf)


def cmd_quantize(a: argparse.Namespace) -> int:

    to = [x.strip() for x in a.to.split(",") if x.strip()]
    if not to:
        raise InputError(f"empty list {a.to!r}; give comma-separated types", field="--to")
    made, failed = quantize(a.src, to, a.out_dir, a.threads, a.group_size)
    for path in made:
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size
        print(f"wrote {path} ({size / 2**20:.1f} MiB)", flush=True)
    for line in failed:
        print(f"offline-eval: error: {line}", file=sys.stderr)
    return 2 if failed else 0


def cmd_adapter_gguf(a: argparse.Namespace) -> int:

    path = peft_to_gguf(a.peft_folder, a.base, a.out, a.force)
    print(f"wrote {path} ({path.stat().st_size / 2**20:.2f} MiB)")
    return 0
