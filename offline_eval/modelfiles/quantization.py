"""What a Hugging Face folder's config.json says its weights are quantized to, and whether the files hold them.

Read by the engines that load such folders (vLLM, transformers), by the provenance, and by `offline-eval quantize`.
Pure reading: the folder's own config decides the scheme, never a models.yaml key."""

from __future__ import annotations

import dataclasses
import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offline_eval.runtime.errors import InputError

# quant_method -> the names a models.yaml `quantization:` may give for a folder that declares it.
_SAME = {
    "compressed-tensors": {"compressed-tensors", "compressed_tensors"},
    "gptq": {"gptq", "auto_gptq", "gptq_marlin"},
    "awq": {"awq", "awq_marlin"},
    "fp8": {"fp8"},
}
# The tensor each on-disk format stores per quantized layer: its absence means the weights are not the declared ones.
_MARKER = {"int-quantized": "weight_scale", "pack-quantized": "weight_packed", "gptq": "qweight", "awq": "qweight"}
# What the vLLM CPU build has kernels for (vLLM 0.32: CPUInt8ScaledMMLinearKernel, CPUWNA16LinearKernel).
CPU_SCHEMES = "int8 W8A8, 4-bit W4A16 (compressed-tensors), 4-bit GPTQ and 4-bit AWQ"


@dataclass(frozen=True)
class FolderQuantization:
    method: str  # config.json's quant_method
    scheme: str  # w8a8, w4a16, w8a16, fp8, ... (weights' bits, activations' bits)
    format: str  # compressed-tensors' format, or the method's own
    bits: int | None
    group_size: int | None  # None: per channel
    activations: str | None  # "int8 dynamic per-token", None: kept at 16 bits
    symmetric: bool | None

    def describe(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def label(self) -> str:
        g = f", group {self.group_size}" if self.group_size else ""
        return f"{self.method} {self.scheme}{g}"

    def matches(self, quantization: str) -> bool:
        """Whether a models.yaml `quantization:` names what the folder declares."""
        return quantization.lower() in _SAME.get(self.method, {self.method})

    def cpu_problem(self) -> str | None:
        """Why the vLLM CPU build cannot run this scheme (None: it can)."""
        runs = (self.scheme == "w8a8" and self.format == "int-quantized") or (
            self.bits == 4 and self.activations is None and self.format in ("pack-quantized", "gptq", "awq")
        )
        return None if runs else f"the vLLM CPU build runs {CPU_SCHEMES}; {self.label} needs a GPU"


def folder_quantization(path: str | Path) -> FolderQuantization | None:
    """The quantization a model folder declares (None: a folder without one, or not a folder)."""
    folder = Path(path)
    cfg_path = folder / "config.json"
    if not folder.is_dir() or not cfg_path.is_file():
        return None
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"cannot read the model's config: {e}", file=str(cfg_path)) from None
    qc = cfg.get("quantization_config") if isinstance(cfg, dict) else None
    if not isinstance(qc, dict):
        return None
    try:
        return _parse(qc)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise InputError(
            f"quantization_config is not one this reads ({type(e).__name__}: {e})",
            file=str(cfg_path),
            field="quantization_config",
        ) from None


def _parse(qc: dict[str, Any]) -> FolderQuantization:
    method = str(qc["quant_method"])
    if method == "compressed-tensors":
        groups = list(qc["config_groups"].values())
        w, a = groups[0]["weights"], groups[0].get("input_activations")
        fmt = str(groups[0].get("format") or qc.get("format"))
        wbits = int(w["num_bits"])
        wkind = "fp" if w.get("type") == "float" else "w"
        acts = None
        abits = 16
        if a:
            abits = int(a["num_bits"])
            how = "dynamic" if a.get("dynamic") else "static"
            acts = f"{a.get('type', 'int')}{abits} {how} per-{a.get('strategy', 'tensor')}"
        scheme = f"fp{wbits}" if wkind == "fp" else f"w{wbits}a{abits}"
        group = w.get("group_size") if w.get("strategy") == "group" else None
        return FolderQuantization(method, scheme, fmt, wbits, group, acts, w.get("symmetric"))
    bits = qc.get("bits") or qc.get("w_bit")
    group = qc.get("group_size") or qc.get("q_group_size")
    if method == "fp8":
        return FolderQuantization(method, "fp8", "fp8", 8, None, "fp8", True)
    scheme = f"w{bits}a16" if bits else method
    symmetric = qc.get("sym") if method == "gptq" else (not qc.get("zero_point", True) if method == "awq" else None)
    return FolderQuantization(
        method,
        scheme,
        method,
        int(bits) if bits else None,
        int(group) if group and group > 0 else None,
        None,
        symmetric,
    )


def missing_weights(path: str | Path, q: FolderQuantization) -> str | None:
    """Why the folder's weights are not the ones its config declares (None: they look it, or this cannot tell)."""
    marker = _MARKER.get(q.format)
    if marker is None:
        return None
    names: set[str] = set()
    files = sorted(Path(path).glob("*.safetensors"))
    if not files:
        return "no .safetensors file"
    for f in files:
        names |= _safetensors_names(f)
    if not any(n.endswith("." + marker) for n in names):
        return f"its config declares {q.label} ({q.format}), but no tensor in the weights ends in .{marker}"
    return None


def _safetensors_names(path: Path) -> set[str]:
    return set(safetensors_header(path))


def safetensors_header(path: Path) -> dict[str, Any]:
    """A safetensors file's tensors as its header lists them (8-byte length, then JSON): name -> dtype, shape."""
    try:
        with path.open("rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            room = min(path.stat().st_size - 8, MAX_SAFETENSORS_HEADER)
            if n > room:  # random bytes: reading n would exhaust memory, or overflow
                raise ValueError(f"its header claims {n:,} bytes, past the {room:,} it can hold")
            header = json.loads(f.read(n))
        if not isinstance(header, dict):
            raise ValueError("its header is not a JSON object")
    except (OSError, struct.error, ValueError) as e:
        raise InputError(f"not a readable safetensors file ({e})", file=str(path)) from None
    return {k: v for k, v in header.items() if k != "__metadata__"}


MAX_SAFETENSORS_HEADER = 100_000_000  # the safetensors format's own bound on its JSON header

# A float is NaN or infinite exactly when its exponent bits are all ones: (bytes per value, the exponent's mask).
_EXPONENT = {"F16": (2, 0x7C00), "BF16": (2, 0x7F80), "F32": (4, 0x7F800000), "F64": (8, 0x7FF0000000000000)}


_SCANNED: dict[tuple[str, int, int, int, int], list[str]] = {}


def non_finite_tensors(path: Path) -> list[str]:
    """The float tensors of a safetensors file holding a NaN or an infinity (read through a memory map, a tensor
    at a time; once per version of the file in this process)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    if key not in _SCANNED:
        _SCANNED[key] = _scan(path)
    return list(_SCANNED[key])


def _scan(path: Path) -> list[str]:
    import numpy as np

    header = safetensors_header(path)
    with path.open("rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n) if path.stat().st_size > 8 + n else None
    bad = []
    for name, info in header.items():
        width, mask = _EXPONENT.get(str(info.get("dtype")), (0, 0))
        begin, end = (info.get("data_offsets") or [0, 0])[:2]
        if not width or data is None or not isinstance(begin, int) or not isinstance(end, int):
            continue
        if not 0 <= begin <= end <= len(data) or (end - begin) % width:
            raise InputError(f"tensor {name}'s data_offsets lie outside the file", file=str(path), field=name)
        bits = data[begin:end].view(f"<u{width}")
        if bool(np.any((bits & mask) == mask)):
            bad.append(name)
    return bad


def checked(path: str | Path, quantization: str | None) -> FolderQuantization | None:
    """The folder's quantization, refused in one line where a models.yaml `quantization:` contradicts it or its
    weights are missing."""
    q = folder_quantization(path)
    if q is None:
        return None
    cfg = str(Path(path) / "config.json")
    if quantization and not q.matches(quantization):
        raise InputError(
            f"models.yaml says quantization '{quantization}', but the folder's config.json declares {q.label}; "
            "leave `quantization:` out (the folder's own config is read)",
            file=cfg,
            field="quantization_config.quant_method",
        )
    if why := missing_weights(path, q):
        raise InputError(why, file=cfg, field="quantization_config")
    return q


def quantization_problem(path: str | Path, quantization: str | None) -> str | None:
    """What `checked` refuses, as a line (None: nothing)."""
    try:
        checked(path, quantization)
    except InputError as e:
        return str(e)
    return None
