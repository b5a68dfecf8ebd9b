"""Which variants of a model an adapter variant goes with: the adapters over the same base (one engine load), its
base (the run its gain is measured against), and the same adapter on the model's own weights (what an adapter over
an Int8/Int4 base is held to)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class VariantSpec(Protocol):
    """What of a models.yaml variant (spec.VariantSpec) decides which runs go together."""

    file: str | None
    dtype: str | None
    quantization: str | None
    options: dict[str, Any]
    reasoning: dict[str, Any] | None
    sampling: dict[str, Any] | None
    adapter: str | None
    adapter_scale: float | None


def _base(v: VariantSpec) -> tuple[Any, ...]:
    """What besides the adapter makes a run: its weights, load options, and how it thinks and samples."""
    return (v.file, v.dtype, v.quantization, v.options, v.reasoning, v.sampling)


def adapter_group(variants: Mapping[str, VariantSpec], name: str) -> tuple[str, ...]:
    """The adapters of every variant over the same weights and options as `name` (none without an adapter)."""
    v = variants[name]
    if v.adapter is None:
        return ()
    return tuple(w.adapter for w in variants.values() if w.adapter and _base(w) == _base(v))


def adapter_base(variants: Mapping[str, VariantSpec], name: str) -> str | None:
    """The variant of the same weights and options without an adapter (None: not an adapter, or no such run)."""
    v = variants[name]
    if v.adapter is None:
        return None
    return next((k for k, w in variants.items() if w.adapter is None and _base(w) == _base(v)), None)


def adapter_on_own_weights(variants: Mapping[str, VariantSpec], name: str) -> str | None:
    """For an adapter over another file (an Int8/Int4 base), the variant running the same adapter at the same scale
    on the model's own weights; None otherwise."""
    v = variants[name]
    if v.adapter is None or v.file is None:
        return None
    return next(
        (
            k
            for k, w in variants.items()
            if (w.adapter, w.adapter_scale, w.file, w.quantization) == (v.adapter, v.adapter_scale, None, None)
            and (w.dtype, w.options, w.reasoning, w.sampling) == (v.dtype, v.options, v.reasoning, v.sampling)
        ),
        None,
    )
