"""Greedy decoding on llama.cpp that asks the grammar only about the token it is about to take.

llama-cpp-python's sampler chain runs the grammar over every candidate of the vocabulary at every step: 262,144 of
them for Gemma 3, which costs more than the model's own step on a small model. Greedy decoding needs only the best
token the grammar allows. So: take the best token, ask the grammar about that one token, and filter the whole
vocabulary only when the grammar refuses it (llama.cpp's own common sampler does the same). The token is the one
the full filter gives.

Everything else is what `Llama.create_completion(temperature=0)` does from an empty cache, so the answers are the
same token for token: the stop on an end-of-generation token, `max_tokens` clipped to the
context, a token that ends inside a UTF-8 sequence not counted against `max_tokens`, and the text detokenized as a
whole at the end. The prompt is evaluated before, by `llamacpp_prefill.PromptCache.prefill`, which reuses
the KV cache and still gives a fresh start's logits.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from offline_eval.inference.backends.base import NonFiniteLogits
from offline_eval.inference.backends.llamacpp.prefill import last_logits

TOP = 64  # a refused step asks about this many best tokens before it filters the whole vocabulary


class GrammarCheck:
    """One llama.cpp grammar sampler, reset for each request, with the two token-data arrays it is applied to."""

    def __init__(self, llm: Any, text: str) -> None:
        import llama_cpp

        self._lib = llama_cpp
        n_vocab = llm.n_vocab()
        self.ptr = llama_cpp.llama_sampler_init_grammar(llm._model.vocab, text.encode("utf-8"), b"root")
        if not self.ptr:
            raise ValueError("llama.cpp refused the grammar")
        self._one = (llama_cpp.llama_token_data * 1)()
        self._one_arr = llama_cpp.llama_token_data_array(data=self._one, size=1, selected=-1, sorted=False)
        self._all = (llama_cpp.llama_token_data * n_vocab)()
        self._all_arr = llama_cpp.llama_token_data_array(data=self._all, size=n_vocab, selected=-1, sorted=False)
        self._view = np.ctypeslib.as_array(self._all)
        self._ids = np.arange(n_vocab, dtype=np.int32)
        # tokens asked about one at a time; steps whose best token was refused; of those, vocabulary-wide filters
        self.asked = self.filtered = self.filtered_all = 0

    def reset(self) -> None:
        self._lib.llama_sampler_reset(self.ptr)

    def allows(self, token: int) -> bool:
        self.asked += 1
        self._one[0] = self._lib.llama_token_data(token, 0.0, 0.0)
        self._one_arr.size, self._one_arr.selected = 1, -1
        self._lib.llama_sampler_apply(self.ptr, ctypes.byref(self._one_arr))
        return not math.isinf(self._one[0].logit)

    def best(self, logits: np.ndarray) -> int:
        """The highest-scoring token the grammar allows (the first of equals, as llama.cpp's greedy sampler).
        The grammar is asked about the TOP best tokens first; only when it refuses all of them, or the one it
        allows ties with the best token left out, is the whole vocabulary filtered."""
        self.filtered += 1
        k = min(TOP, len(logits) - 1)
        top = np.argpartition(-logits, k)[:k]
        top = top[np.lexsort((top, -logits[top]))]  # best first, equals by id
        for token in top.tolist():
            if self.allows(token):
                if logits[token] > logits[top[-1]]:  # every token left out scores lower
                    return int(token)
                break
        self.filtered_all += 1
        self._view["id"] = self._ids
        self._view["logit"] = logits
        self._view["p"] = 0.0
        self._all_arr.size, self._all_arr.selected, self._all_arr.sorted = len(self._ids), -1, False
        self._lib.llama_sampler_apply(self.ptr, ctypes.byref(self._all_arr))
        allowed = self._view["logit"]
        return int(self._view["id"][int(np.argmax(allowed))])

    def accept(self, token: int) -> None:
        self._lib.llama_sampler_accept(self.ptr, token)

    def close(self) -> None:
        if self.ptr:
            self._lib.llama_sampler_free(self.ptr)
            self.ptr = None


def check_finite(logits: np.ndarray) -> np.ndarray:
    """The logits, or NonFiniteLogits where one is NaN or +inf (a grammar would make noise parse)."""
    if np.isnan(logits).any() or np.isposinf(logits).any():
        raise NonFiniteLogits("llama.cpp")
    return logits


def _ends_inside_utf8(text: bytes, pending: int) -> int:
    """create_completion's count of tokens still to hold back because the text ends inside a UTF-8 sequence."""
    for k, char in enumerate(text[-3:]):
        k = 3 - k
        for num, pattern in ((2, 192), (3, 224), (4, 240)):
            if num > k and pattern & char == pattern:
                pending = num - k
    return pending


def _stop_at(text: str, stop: Sequence[str]) -> str | None:
    """The text before the first stop string in it, or None."""
    at = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return text[: min(at)] if at else None


def greedy(
    llm: Any, prompt: Sequence[int], max_tokens: int, grammar: GrammarCheck | None, stop: Sequence[str] = ()
) -> tuple[str, str, list[int]]:
    """(text, finish_reason, the generated tokens) of a greedy completion of `prompt`, which `prefill` has evaluated.
    It ends before the first of `stop` in the text (the tokens that spelled it are counted, as vLLM counts). With
    stop strings (a thinking phase) max_tokens is a hard cap, as on vLLM: a budget holds to the token even where
    the last token ends inside a character, which is then left out of the text."""
    import llama_cpp

    tokens = list(prompt)
    n_ctx = llm.n_ctx()
    if max_tokens is None or max_tokens <= 0:
        max_tokens = n_ctx - len(tokens)
    max_tokens = max_tokens if max_tokens + len(tokens) < n_ctx else n_ctx - len(tokens)
    if grammar is not None:
        grammar.reset()
    vocab = llm._model.vocab
    completion: list[int] = []
    finish, pending = "length", 0
    while True:
        logits = last_logits(llm)
        check_finite(logits)
        token = int(np.argmax(logits))
        if grammar is not None:
            if not grammar.allows(token):
                token = grammar.best(logits)
            grammar.accept(token)
        if llama_cpp.llama_vocab_is_eog(vocab, token):
            finish = "stop"
            break
        completion.append(token)
        so_far = llm.detokenize(completion)
        pending = _ends_inside_utf8(so_far, pending)
        if stop and (cut := _stop_at(so_far.decode("utf-8", errors="ignore"), stop)) is not None:
            return cut, "stop", completion
        if pending > 0 and not (stop and len(completion) >= max_tokens):
            pending -= 1
        elif len(completion) >= max_tokens:
            break
        llm.eval([token])
    return llm.detokenize(completion).decode("utf-8", errors="ignore"), finish, completion
