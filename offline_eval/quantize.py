"""Make llama.cpp variants from one F16/BF16 GGUF with llama.cpp's own quantizer (no network, no tools)."""

from __future__ import annotations

from pathlib import Path

from .errors import InputError, MissingExtraError, is_url
from .quiet import native_stderr_silenced

# Names users write -> llama.cpp's LLAMA_FTYPE_MOSTLY_* constant.
TYPES = ("f16", "bf16", "q8_0", "q6_k", "q5_k_m", "q5_0", "q4_k_m", "q4_k_s", "q4_0", "q3_k_m", "q2_k")


def quantize(src: str, to: list[str], out_dir: str | None = None, threads: int = 0) -> list[Path]:
    if is_url(src):
        raise InputError("URLs are refused; give a local .gguf file", file=src)
    p = Path(src)
    if not p.is_file():
        raise InputError("file not found", file=src)
    unknown = [t for t in to if t.lower() not in TYPES]
    if unknown:
        raise InputError(f"unknown type(s) {', '.join(unknown)}; expected some of {', '.join(TYPES)}",
                         field="--to")
    try:
        import llama_cpp
    except ImportError:
        raise MissingExtraError("llamacpp", "llamacpp") from None
    dest = Path(out_dir) if out_dir else p.parent
    dest.mkdir(parents=True, exist_ok=True)
    stem = p.stem
    for suffix in ("-f16", "-bf16", "-F16", "-BF16", ".f16", ".bf16"):
        stem = stem.removesuffix(suffix)
    out = []
    for t in to:
        target = dest / f"{stem}-{t.lower()}.gguf"
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{t.upper()}")
        params.nthread = threads
        with native_stderr_silenced():
            rc = llama_cpp.llama_model_quantize(str(p).encode(), str(target).encode(), params)
        if rc != 0:
            target.unlink(missing_ok=True)
            raise InputError(f"llama.cpp could not quantize to {t} (code {rc}); is it a valid F16/BF16 GGUF?",
                             file=src)
        out.append(target)
    return out

