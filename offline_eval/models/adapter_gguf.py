"""`offline-eval adapter gguf PEFT_FOLDER --base MODEL.gguf`: a PEFT LoRA adapter in llama.cpp's own adapter layout
(general.type adapter, adapter.type lora, adapter.lora.alpha, blk.N.<tensor>.weight.lora_a/.lora_b), so one adapter
runs on vLLM, transformers and llama.cpp. What convert_lora_to_gguf.py does, for the architectures below, with the
`gguf` package alone (llama.cpp's script needs its source tree and the base model's HF config)."""

from __future__ import annotations

import math
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from offline_eval.modelfiles.peft import WEIGHTS, gguf_field, read_peft
from offline_eval.runtime.errors import InputError
from offline_eval.runtime.fileio import remove_stale_temps, temp_prefix

# llama.cpp's converter interleaves the rotary halves of q and k for these architectures (LlamaModel.permute), so
# an adapter's lora_B rows for them are permuted the same way; the others keep HF's order.
PERMUTES_QK = {"llama": True, "gemma": False, "gemma2": False, "gemma3": False, "qwen2": False, "qwen3": False}


def _permute(a: np.ndarray, n_head: int) -> np.ndarray:
    return a.reshape(n_head, 2, a.shape[0] // n_head // 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape)


def _writable(target: Path, folder: str, base: str, force: bool) -> None:
    """Refused in one line: a target that is an input or inside the adapter's folder, a folder, or (without
    --force) an existing file."""
    where = target.resolve()
    inputs = [Path(folder).resolve(), Path(base).resolve()]
    if where in inputs or Path(folder).resolve() in where.parents:
        raise InputError(
            "is an input of the conversion (the adapter's folder or the base): give another --out", file=str(target),
            field="--out",
        )  # fmt: skip
    if target.is_dir():
        raise InputError("is a folder: give the .gguf file to write", file=str(target), field="--out")
    if target.exists() and not force:
        raise InputError(
            "already exists: give --force to replace it, or another --out", file=str(target), field="--out"
        )


def peft_to_gguf(folder: str, base: str, out: str | None = None, force: bool = False) -> Path:
    """Write the adapter in `folder` as a GGUF adapter for the GGUF model `base`; the file written. An existing
    file is replaced only with `force`, and never an input (the adapter's own files, the base)."""
    import gguf
    from safetensors.torch import load_file

    adapter = read_peft(folder)
    try:
        reader = gguf.GGUFReader(base)
    except (OSError, ValueError) as e:
        raise InputError(f"not a readable GGUF model ({e})", file=base, field="--base") from None
    target = Path(out) if out else Path(folder).with_suffix(".gguf")
    _writable(target, folder, base, force)
    arch = gguf_field(reader, "general.architecture")
    if arch not in PERMUTES_QK:
        raise InputError(
            f"architecture '{arch}' is not one the converter knows ({', '.join(sorted(PERMUTES_QK))}); "
            "use llama.cpp's convert_lora_to_gguf.py",
            file=base,
            field="general.architecture",
        )
    blocks = int(gguf_field(reader, f"{arch}.block_count"))
    heads = {"q_proj": gguf_field(reader, f"{arch}.attention.head_count")}
    heads["k_proj"] = gguf_field(reader, f"{arch}.attention.head_count_kv") or heads["q_proj"]
    arch_enum = next(k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == arch)
    names = gguf.get_tensor_name_map(arch_enum, blocks)
    base_tensors = {t.name for t in reader.tensors}
    shapes = {t.name: [int(x) for x in t.shape] for t in reader.tensors}  # GGUF lists the input size first
    for module, (a_shape, b_shape) in sorted(adapter.modules.items()):
        name = names.get_name(module)
        have = shapes.get(f"{name}.weight") if name else None
        if have is not None and len(have) == 2 and have != [a_shape[1], b_shape[0]]:
            raise InputError(
                f"the adapter maps {a_shape[1]} -> {b_shape[0]}, but the base's {name}.weight is {have[0]} -> "
                f"{have[1]}: it was trained on another model ({arch} here)",
                file=str(Path(folder) / WEIGHTS),
                field=module,
            )
    tensors = load_file(str(Path(folder) / WEIGHTS))
    target.parent.mkdir(parents=True, exist_ok=True)
    for line in remove_stale_temps(target.parent):
        print(line, file=sys.stderr, flush=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=temp_prefix(target), suffix=".part")
    os.close(fd)
    try:
        w = gguf.GGUFWriter(tmp, arch)
        w.add_type(gguf.GGUFType.ADAPTER)
        w.add_string(gguf.Keys.Adapter.TYPE, "lora")
        # llama.cpp scales B·A by alpha / r (r read from the tensors): rsLoRA's alpha / sqrt(r) needs alpha·sqrt(r)
        w.add_float32(gguf.Keys.Adapter.LORA_ALPHA, adapter.alpha * (math.sqrt(adapter.rank) if adapter.rslora else 1))
        if adapter.base:
            w.add_string("general.base_model.0.name", adapter.base)
        for module in sorted(adapter.modules):
            name = names.get_name(module)
            if name is None or f"{name}.weight" not in base_tensors:
                raise InputError(f"the base {base} has no tensor for {module}", file=folder, field=module)
            a = tensors[f"base_model.model.{module}.lora_A.weight"].float().numpy()
            b = tensors[f"base_model.model.{module}.lora_B.weight"].float().numpy()
            kind = module.rsplit(".", 1)[-1]
            if PERMUTES_QK[arch] and kind in heads:
                b = _permute(b, int(heads[kind]))
            w.add_tensor(f"{name}.weight.lora_a", a)
            w.add_tensor(f"{name}.weight.lora_b", b)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target
