"""Prompt evaluation on llama.cpp that reuses the KV cache and still gives the logits of a fresh start.

llama.cpp keeps the previous prompt's KV cache, and re-evaluating only what follows the shared prefix is what makes
sorted prompts fast. But llama.cpp's CPU matrix kernels work on groups of rows (four activation rows at a time in the
repacked quantized kernels, tiles in flash attention) and round differently for the rows left over, so *where* the
evaluated part starts and where its batches split changes the logits: llama-cpp-python's own reuse gives Gemma 3 270M
logits up to 1.8 apart for the same prompt, depending on the prompt evaluated before it. An answer would then depend on
its neighbours in the sorted order, on `--limit` and on what a resumed run had already done.

So the reused prefix is cut back to a multiple of ALIGN tokens, and the rest is evaluated in batches that end where a
fresh evaluation's batches end (multiples of the physical batch size): every row is computed in the same group of
rows, with the same cache before it, as from an empty cache. Tested exactly equal, with and without flash attention
(`tests/test_llamacpp_prefill.py`). The cost is at most ALIGN - 1 tokens more per prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

ALIGN = 32  # a multiple of every CPU kernel's row group (4 in the repacked kernels, 16 in AMX tiles)


def shared_prefix(llm: Any, tokens: Sequence[int]) -> int:
    """How many leading tokens of `tokens` the KV cache holds."""
    n = 0
    for a, b in zip(llm.input_ids[: llm.n_tokens].tolist(), tokens):
        if a != b:
            break
        n += 1
    return n


def prefill(llm: Any, tokens: Sequence[int]) -> int:
    """Evaluate `tokens` so that the last one's logits are ready; returns how many tokens were computed.
    At least one token is computed: the logits left by the previous request may come from a different batch."""
    if len(tokens) >= llm.n_ctx():
        raise ValueError(f"Requested tokens ({len(tokens)}) exceed context window of {llm.n_ctx()}")
    reuse = min(shared_prefix(llm, tokens), len(tokens) - 1) // ALIGN * ALIGN
    if reuse > 0 and llm._ctx.kv_cache_seq_rm(-1, reuse, -1):
        llm.n_tokens = reuse
    else:
        llm.reset()
    step = min(llm.n_batch, llm.context_params.n_ubatch)
    pos = llm.n_tokens
    while pos < len(tokens):
        end = min(len(tokens), (pos // step + 1) * step)
        llm.eval(tokens[pos:end])
        pos = end
    return len(tokens) - reuse
