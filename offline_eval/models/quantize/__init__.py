"""`offline-eval quantize`: llama.cpp types from a GGUF file (gguf.py), vLLM's Int8/Int4 checkpoints from a Hugging
Face folder (hf.py). The source decides which: a .gguf file or a model folder."""

from __future__ import annotations

from pathlib import Path

from offline_eval.runtime.errors import InputError, is_url

from . import gguf, hf


def quantize(
    src: str, to: list[str], out_dir: str | None = None, threads: int = 0, group_size: int | None = None
) -> tuple[list[Path], list[str]]:
    """The files or folders written, and one line per variant that could not be made (the others still are)."""
    if is_url(src):
        raise InputError("URLs are refused; give a local .gguf file or model folder", file=src)
    names = [t.lower() for t in to]
    unknown = [t for t in names if t not in gguf.TYPES and t not in hf.SCHEMES]
    if unknown or not names:
        raise InputError(
            f"unknown type(s) {', '.join(unknown) or '(none given)'}; expected some of {', '.join(gguf.TYPES)} "
            f"(from a .gguf file) or {', '.join(hf.SCHEMES)} (from a Hugging Face folder)",
            field="--to",
        )
    if out_dir is not None and Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise InputError("is a file: give the folder to write the variants into", file=out_dir, field="--out")
    if twice := sorted({t for t in names if names.count(t) > 1}):
        raise InputError(f"{', '.join(twice)} given twice: each type is made once", field="--to")
    p = Path(src)
    folder_kinds = [t for t in names if t in hf.SCHEMES]
    if p.is_dir() or (folder_kinds and not p.exists()):
        wrong = [t for t in names if t not in hf.SCHEMES]
        if wrong:
            raise InputError(
                f"{', '.join(wrong)}: llama.cpp types are made from a .gguf file, not a folder", file=src, field="--to"
            )
        if group_size is not None and group_size <= 0:
            raise InputError(f"group size {group_size}: must be a positive integer", field="--group-size")
        return hf.quantize_folder(src, names, out_dir, group_size or hf.DEFAULT_GROUP)
    if folder_kinds:
        hf.check_source(p)  # a file: one line saying what these schemes are made from
    if group_size is not None:
        raise InputError(
            "--group-size applies to w4a16, gptq and awq (a Hugging Face folder), not llama.cpp types",
            field="--group-size",
        )
    return gguf.quantize(src, names, out_dir, threads), []
