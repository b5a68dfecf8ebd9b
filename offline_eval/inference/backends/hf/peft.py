"""transformers' adapter loading: the PEFT adapter over the loaded model, through peft."""

from __future__ import annotations

from typing import Any

from offline_eval.runtime.errors import InputError


def with_peft(model: Any, adapter: str, scale: float) -> Any:
    """A transformers model with the PEFT adapter over it (unmerged, as vLLM and llama.cpp compute it)."""
    try:
        from peft import PeftModel
    except ImportError:
        raise InputError(
            "transformers loads adapters through peft, which is not installed: pip install 'offline-eval[hf]'",
            file=adapter,
            field="adapter",
        ) from None
    wrapped = PeftModel.from_pretrained(model, adapter, is_trainable=False)
    if scale != 1.0:
        for module in wrapped.modules():
            scaling = getattr(module, "scaling", None)
            if isinstance(scaling, dict):
                for k in scaling:
                    scaling[k] *= scale
    return wrapped.eval()
