"""llama.cpp's token masks: llguidance's or outlines-core's matchers over the GGUF's vocabulary, asked by the greedy
loop or applied as a logits_processor when sampling."""

from __future__ import annotations

from typing import Any

import numpy as np

from offline_eval.inference.constrained.masks import Masks, Matcher, allowed


class MaskCheck:
    """llama.cpp's greedy loop asks its grammar `allows`, `best`, `accept` (llamacpp_greedy.GrammarCheck): the same
    questions answered from a matcher's mask."""

    def __init__(self, matcher: Matcher, n_vocab: int) -> None:
        self._m, self._n = matcher, n_vocab
        self._mask: np.ndarray | None = None
        self._prompt = 0  # the prompt's length, under llama-cpp-python's logits_processor

    def _allowed(self) -> np.ndarray:
        if self._mask is None:
            self._mask = allowed(self._m.bitmask(), self._n)
        return self._mask

    def reset(self) -> None:
        self._m.reset()
        self._mask = None

    def allows(self, token: int) -> bool:
        return bool(self._allowed()[token])

    def best(self, logits: np.ndarray) -> int:
        return int(np.argmax(np.where(self._allowed(), logits[: self._n], -np.inf)))

    def accept(self, token: int) -> None:
        self._m.accept(token)
        self._mask = None

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """llama-cpp-python's logits_processor (sampling): the prompt is set by `start`."""
        if len(input_ids) > self._prompt:
            self.accept(int(input_ids[-1]))
        self._prompt = len(input_ids)
        out = np.full_like(scores, -np.inf)
        keep = self._allowed()
        out[: self._n][keep] = scores[: self._n][keep]
        return out

    def close(self) -> None:
        self._mask = None

    def start(self, prompt_len: int) -> MaskCheck:
        self.reset()
        self._prompt = prompt_len
        return self


def llamacpp_masks(backend: str, llm: Any) -> Masks:
    """Masks over a GGUF's vocabulary, each token's bytes as llama.cpp detokenizes them (control tokens left out)."""
    import llama_cpp

    vocab = llm._model.vocab
    eos = int(llama_cpp.llama_vocab_eos(vocab))
    if backend == "guidance":
        import warnings

        from llguidance.llamacpp import lltokenizer_from_vocab

        with warnings.catch_warnings():  # it asks llama_token_get_attr, deprecated, once per token
            warnings.simplefilter("ignore", DeprecationWarning)
            tok = lltokenizer_from_vocab(vocab)
        return Masks(backend, tok.vocab_size, eos, None, set(), tok)
    n = llm.n_vocab()
    control = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL
    special = {i for i in range(n) if llama_cpp.llama_vocab_get_attr(vocab, i) & control}
    table = [llm.detokenize([i], special=False) for i in range(n)]
    return Masks(backend, n, eos, table, special)
