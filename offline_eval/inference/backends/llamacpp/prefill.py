"""Prompt evaluation on llama.cpp that reuses the KV cache and still gives the logits of a fresh start.

llama.cpp keeps the previous prompt's KV cache, and re-evaluating only what follows the shared prefix is what makes
sorted prompts fast. But llama.cpp's CPU kernels round differently depending on how a prompt is split into batches
(most likely the repacked quantized kernels, which take activation rows four at a time, and flash attention, whose
kernel depends on the batch's size: measured, not read in llama.cpp's source), so *where* the evaluated part starts
changes the logits: llama-cpp-python's own reuse moves Gemma 3 270M's logits by up to about 1 for the same prompt,
depending on the prompt evaluated before it. An answer would then depend on its neighbours in the sorted order, on
`--limit` and on what a resumed run had already done.

So every prompt is evaluated in batches whose starts depend on the prompt alone: every n_ubatch tokens from the first
token on, and, where the request says where the part that differs between its neighbours begins (`split`), every
n_ubatch tokens again from there. The cache is reused up to the last batch start it shares with the new prompt's own
batches: every batch is then the one a fresh start computes, on the same cache before it. Tested exactly equal, with
and without flash attention (`tests/test_llamacpp_prefill.py`). A prompt without a split recomputes up to
n_ubatch - 1 shared tokens; one whose split is the end of what its neighbour shared, none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def batch_starts(n: int, step: int, split: int = 0) -> list[int]:
    """Where the batches of a fresh evaluation of `n` tokens start: every `step` tokens, and again from `split`."""
    split = split if 0 < split < n else 0
    return [*range(0, split, step), *range(split, n, step)]


def carried_starts(n: int, step: int, split: int, span: tuple[int, int]) -> list[int]:
    """The batches of a prompt that continues an earlier generation: the prompt before `span` as any prompt, the
    carried generated tokens one at a time (as they were evaluated while they were generated), the rest in one
    batch. A fresh evaluation and one that continues the generation's own cache compute the same."""
    a, b = span
    return [*batch_starts(a, step, split), *range(a, b), *([b] if b < n else [])]


def last_logits(llm: Any) -> np.ndarray:
    """The logits after the last token evaluated (a view into llama.cpp's buffer, valid until the next eval)."""
    import llama_cpp

    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(llm.n_vocab(),))


class PromptCache:
    """What the KV cache holds: the last prompt evaluated (generated tokens after it are not reused) and the starts
    of the batches it was evaluated in."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.tokens: list[int] = []
        self.starts: list[int] = []

    def forget(self) -> None:
        """The cache was filled some other way: reuse none of it."""
        self.tokens, self.starts = [], []

    @property
    def step(self) -> int:
        """The size of the physical batches llama.cpp evaluates a prompt in (as the context clamped it)."""
        import llama_cpp

        return max(int(llama_cpp.llama_n_ubatch(self.llm._ctx.ctx)), 1)

    def reusable(self, tokens: Sequence[int], starts: Sequence[int]) -> int:
        """How many leading tokens of `tokens`, evaluated in batches starting at `starts`, the cache holds exactly
        as a fresh evaluation would compute them. At least one token is left to compute, for its logits."""
        llm = self.llm
        held = min(len(self.tokens), llm.n_tokens)
        limit = min(llm.longest_token_prefix(llm.input_ids[:held].tolist(), tokens), len(tokens) - 1)
        reuse = 0
        for a, b in zip([*self.starts, len(self.tokens)], starts):
            if a != b or a > limit:
                break
            reuse = a
        return reuse

    def extend(self, generated: Sequence[int]) -> None:
        """Generated tokens evaluated after the prompt, one at a time: a prompt that continues them reuses them."""
        n = len(self.tokens)
        self.tokens += list(generated)
        self.starts += range(n, n + len(generated))

    def prefill(self, tokens: Sequence[int], split: int = 0, span: tuple[int, int] | None = None) -> int:
        """Evaluate `tokens` so that the last one's logits are ready; returns how many tokens were computed.
        `span`: the tokens an earlier generation made, evaluated one at a time (carried_starts)."""
        llm = self.llm
        if not tokens:
            raise ValueError("an empty prompt has no logits to take")
        if len(tokens) >= llm.n_ctx():
            raise ValueError(f"Requested tokens ({len(tokens)}) exceed context window of {llm.n_ctx()}")
        starts = (
            carried_starts(len(tokens), self.step, split, span) if span else batch_starts(len(tokens), self.step, split)
        )
        reuse = self.reusable(tokens, starts)
        self.forget()  # until every batch is in: a failed eval leaves a cache batched some other way
        if reuse > 0 and llm._ctx.kv_cache_seq_rm(-1, reuse, -1):
            llm.n_tokens = reuse
        else:
            reuse = 0
            llm.reset()
        ends = [*starts[1:], len(tokens)]
        for start, end in zip(starts, ends):
            if start >= reuse:
                llm.eval(tokens[start:end])
        self.tokens, self.starts = list(tokens), starts
        return len(tokens) - reuse
