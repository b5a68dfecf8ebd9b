"""transformers' token masks: llguidance's or outlines-core's matchers over its tokenizer, applied by a logits
processor."""

from __future__ import annotations

from typing import Any

from offline_eval.inference.constrained.masks import Masks, allowed
from offline_eval.inference.constraints import Constraint


class HFProcessor:
    """transformers' logits processor: one matcher per row of the batch, advanced by the token each row took."""

    def __init__(self, masks: Masks, c: Constraint, rows: int, eos_ids: set[int]) -> None:
        self._m = [masks.matcher(c) for _ in range(rows)]
        self._n, self._eos = masks.n_vocab, eos_ids
        self._start: int | None = None
        self._done = [False] * rows

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self._start is None:
            self._start = input_ids.shape[1]
        elif input_ids.shape[1] > self._start:
            for row, token in enumerate(input_ids[:, -1].tolist()):
                if not self._done[row]:
                    self._done[row] = token in self._eos
                    if not self._done[row]:
                        self._m[row].accept(int(token))
        keep = torch.zeros(scores.shape, dtype=torch.bool)
        for row, m in enumerate(self._m):
            if self._done[row]:
                keep[row] = True
            else:
                keep[row, : self._n] = torch.from_numpy(allowed(m.bitmask(), self._n))
        return scores.masked_fill(~keep.to(scores.device), float("-inf"))


def hf_masks(backend: str, tokenizer: Any) -> Masks:
    """Masks over a transformers tokenizer's vocabulary (xgrammar's byte table: the same bytes it matches)."""
    eos = int(tokenizer.eos_token_id)
    if backend == "guidance":
        import llguidance.hf

        tok = llguidance.hf.from_tokenizer(tokenizer)
        return Masks(backend, tok.vocab_size, eos, None, set(), tok)
    import xgrammar as xgr

    info = xgr.TokenizerInfo.from_huggingface(tokenizer)
    table = list(info.decoded_vocab)
    return Masks(backend, len(table), eos, table, set(info.special_token_ids))
