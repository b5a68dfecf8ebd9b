"""Make llama.cpp variants from one GGUF with llama.cpp's own quantizer (no network, no tools).

From F32/F16/BF16 this is ordinary quantization. From an already quantized GGUF (say the Q4_K_M a model is
published as) it is requantization: the new file starts from the rounded weights, never the original ones, so it
is named `<stem>-<type>-from-<source type>.gguf` and each one prints a line saying so."""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

from offline_eval.runtime.errors import InputError, MissingExtraError, is_url
from offline_eval.runtime.fileio import remove_stale_temps, temp_prefix
from offline_eval.runtime.quiet import native_stderr_silenced

# Names users write -> llama.cpp's LLAMA_FTYPE_MOSTLY_* constant.
TYPES = ("f16", "bf16", "q8_0", "q6_k", "q5_k_m", "q5_0", "q4_k_m", "q4_k_s", "q4_0", "q3_k_m", "q2_k")
FULL = ("f32", "f16", "bf16")

# LLAMA_FTYPE values (llama.h) of the types a source file may have.
_FTYPE_NAMES = {
    0: "f32",
    1: "f16",
    32: "bf16",
    2: "q4_0",
    3: "q4_1",
    7: "q8_0",
    8: "q5_0",
    9: "q5_1",
    10: "q2_k",
    11: "q3_k_s",
    12: "q3_k_m",
    13: "q3_k_l",
    14: "q4_k_s",
    15: "q4_k_m",
    16: "q5_k_s",
    17: "q5_k_m",
    18: "q6_k",
}


def _gguf_file_type(path: Path) -> str | None:
    """`general.file_type` from a GGUF header, as a name ("q4_k_m"); None if the header does not say.

    Reads only the metadata block: the header is a list of typed key/value pairs (GGUF v2/v3, little-endian)."""
    scalars = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
    with path.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise InputError("not a GGUF file", file=str(path))
        version, _n_tensors, n_kv = struct.unpack("<IQQ", f.read(20))
        if version < 2:
            return None

        def read(fmt: str):
            return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]

        def string() -> str:
            return f.read(read("<Q")).decode("utf-8", "replace")

        def skip(vtype: int) -> None:
            if vtype == 8:
                f.seek(read("<Q"), 1)
            elif vtype == 9:
                etype, n = read("<I"), read("<Q")
                if etype in scalars:
                    f.seek(struct.calcsize(scalars[etype]) * n, 1)
                else:
                    for _ in range(n):
                        skip(etype)
            else:
                f.seek(struct.calcsize(scalars[vtype]), 1)

        for _ in range(n_kv):
            key, vtype = string(), read("<I")
            if key == "general.file_type" and vtype in scalars:
                value = int(read(scalars[vtype]))
                return _FTYPE_NAMES.get(value, f"ftype{value}")
            skip(vtype)
    return None


def quantize(src: str, to: list[str], out_dir: str | None = None, threads: int = 0) -> list[Path]:
    """Write one GGUF per type in `to`; from an already quantized source each is a labelled requantization."""
    if is_url(src):
        raise InputError("URLs are refused; give a local .gguf file", file=src)
    p = Path(src)
    if not p.is_file():
        raise InputError("file not found", file=src)
    unknown = [t for t in to if t.lower() not in TYPES]
    if unknown:
        raise InputError(f"unknown type(s) {', '.join(unknown)}; expected some of {', '.join(TYPES)}", field="--to")
    try:
        source = _gguf_file_type(p)
    except (struct.error, UnicodeDecodeError, OSError):
        raise InputError("cannot read the GGUF header", file=src) from None
    src_type = source if source is not None and source not in FULL else None  # None: ordinary quantization
    requant = src_type is not None
    if src_type is not None and src_type in [t.lower() for t in to]:
        raise InputError(
            f"the file is already {src_type.upper()}; requantizing it to the same type would only add rounding error",
            file=src,
            field="--to",
        )
    try:
        import llama_cpp
    except ImportError:
        raise MissingExtraError("llamacpp", "llamacpp") from None
    dest = Path(out_dir) if out_dir else p.parent
    dest.mkdir(parents=True, exist_ok=True)
    for line in remove_stale_temps(dest):
        print(line, file=sys.stderr, flush=True)
    stem = p.stem
    for suffix in ("f16", "bf16", "F16", "BF16") + ((src_type, src_type.upper()) if src_type else ()):
        stem = stem.removesuffix(f"-{suffix}").removesuffix(f".{suffix}")
    out = []
    for t in (t.lower() for t in to):
        target = dest / (f"{stem}-{t}-from-{src_type}.gguf" if src_type else f"{stem}-{t}.gguf")
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{t.upper()}")
        params.nthread = threads
        params.allow_requantize = requant
        part = target.with_name(f"{temp_prefix(target)}part")  # renamed into place whole: a kill leaves no half
        try:
            with native_stderr_silenced():
                rc = llama_cpp.llama_model_quantize(str(p).encode(), str(part).encode(), params)
            if rc != 0:
                raise InputError(f"llama.cpp could not quantize to {t} (code {rc}); is it a valid GGUF?", file=src)
            os.replace(part, target)
        finally:
            part.unlink(missing_ok=True)
        if src_type:
            effect = "no more precise than its source" if _bits(t) > _bits(src_type) else "rounding errors compound"
            print(
                f"{target.name}: requantized from {src_type.upper()}, not from the original weights ({effect})",
                flush=True,
            )
        out.append(target)
    return out


def _bits(name: str) -> float:
    """Approximate bits per weight, to say whether a requantization adds loss or only size."""
    return {
        "f32": 32,
        "f16": 16,
        "bf16": 16,
        "q8_0": 8.5,
        "q6_k": 6.6,
        "q5_k_m": 5.7,
        "q5_k_s": 5.5,
        "q5_1": 6,
        "q5_0": 5.5,
        "q4_k_m": 4.9,
        "q4_k_s": 4.6,
        "q4_1": 5,
        "q4_0": 4.5,
        "q3_k_l": 4.3,
        "q3_k_m": 3.9,
        "q3_k_s": 3.5,
        "q2_k": 2.6,
    }.get(name, 0)
