"""A prompt evaluated after a reused KV-cache prefix gives exactly the logits of the same prompt evaluated from an
empty cache, whatever the previous prompt shared with it: with and without flash attention, on the tiny model and
on Gemma 3 270M. (llama-cpp-python's own reuse does not: on this machine Gemma's logits moved by up to 1.8.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from offline_eval.backends.llamacpp_prefill import ALIGN, prefill

GEMMA_GGUF = ROOT / "models" / "gemma-3-270m" / "gguf" / "gemma-3-270m-q4_k_m.gguf"


def _logits(llm) -> np.ndarray:  # type: ignore[no-untyped-def]
    return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).copy()


def _check(path: Path, flash_attn: bool, n: int, shared: tuple[int, ...]) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    llm = llama_cpp.Llama(
        model_path=str(path), n_ctx=2048, n_batch=512, n_threads=2, flash_attn=flash_attn, verbose=False, seed=0
    )
    rng = np.random.default_rng(0)
    prompt = [llm.token_bos(), *rng.integers(100, min(20000, llm.n_vocab()), n - 1).tolist()]
    try:
        llm.reset()
        assert prefill(llm, prompt) == n
        fresh = _logits(llm)
        for r in shared:
            previous = prompt[:r] + rng.integers(100, min(20000, llm.n_vocab()), 50).tolist()
            prefill(llm, previous)
            computed = prefill(llm, prompt)
            assert computed == n - min(r, n - 1) // ALIGN * ALIGN, r
            np.testing.assert_array_equal(_logits(llm), fresh, err_msg=f"{r} tokens shared with the previous prompt")
        assert prefill(llm, prompt) == n - (n - 1) // ALIGN * ALIGN  # the same prompt again: its last block only
        np.testing.assert_array_equal(_logits(llm), fresh)
    finally:
        llm.close()


@pytest.mark.parametrize("flash_attn", [False, True])
def test_the_tiny_model_gives_a_fresh_starts_logits_after_any_reuse(tiny: Path, flash_attn: bool) -> None:
    _check(tiny / "gguf" / "tiny-q8_0.gguf", flash_attn, 1100, (1, 2, 7, 33, 61, 100, 513, 600, 1030))


@pytest.mark.engine
@pytest.mark.parametrize("flash_attn", [False, True])
def test_gemma_gives_a_fresh_starts_logits_after_any_reuse(flash_attn: bool) -> None:
    if not GEMMA_GGUF.exists():
        pytest.skip("Gemma 3 270M is built by scripts/setup.sh")
    _check(GEMMA_GGUF, flash_attn, 700, (7, 61, 600))
