"""A prompt evaluated after a reused KV-cache prefix gives exactly the logits of the same prompt evaluated from an
empty cache, whatever the previous prompt shared with it: with and without flash attention, on the tiny model and
on Gemma 3 270M. llama-cpp-python's own reuse fails these tests: on this machine the same cases move the tiny model's
logits by up to 0.40 with flash attention, Gemma's by up to 1.03 with it and 0.78 without."""

from __future__ import annotations

from itertools import takewhile
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from offline_eval.inference.backends.llamacpp.prefill import PromptCache, batch_starts, last_logits

GEMMA_GGUF = ROOT / "models" / "gemma-3-270m" / "gguf" / "gemma-3-270m-q4_k_m.gguf"


def _logits(llm) -> np.ndarray:  # type: ignore[no-untyped-def]
    return last_logits(llm).copy()


def _check(path: Path, flash_attn: bool, n_ubatch: int, n: int, shared: tuple[int, ...], split: int = 0) -> None:
    """`prompt` (split at `split`) after a previous prompt that shares its first r tokens, for each r in `shared`,
    the previous one split where it stops sharing (as a judge's next candidate) or not split: the same logits as
    from an empty cache, and the reuse expected."""
    llama_cpp = pytest.importorskip("llama_cpp")
    llm = llama_cpp.Llama(
        model_path=str(path),
        n_ctx=2048,
        n_batch=512,
        n_ubatch=n_ubatch,
        n_threads=2,
        flash_attn=flash_attn,
        verbose=False,
        seed=0,
    )
    rng = np.random.default_rng(0)
    vocab = min(20000, llm.n_vocab())
    prompt = [llm.token_bos(), *rng.integers(100, vocab, n - 1).tolist()]
    cache = PromptCache(llm)
    try:
        llm.reset()
        assert cache.prefill(prompt, split) == n
        fresh = _logits(llm)
        for r in shared:
            for previous_split in (0, r):
                previous = prompt[:r] + rng.integers(100, vocab, 50).tolist()
                cache.prefill(previous, previous_split)
                for t in rng.integers(100, vocab, 3).tolist():  # tokens generated after it, one batch each
                    llm.eval([t])
                computed = cache.prefill(prompt, split)
                pairs = zip(batch_starts(n, n_ubatch, split), batch_starts(r + 50, n_ubatch, previous_split))
                same = [a for a, _ in takewhile(lambda p: p[0] == p[1], pairs)]
                expected = max(a for a in same if a <= min(r, n - 1))
                assert computed == n - expected, (r, previous_split, split)
                np.testing.assert_array_equal(
                    _logits(llm), fresh, err_msg=f"{r} tokens shared with the previous prompt"
                )
        reuse = max(a for a in batch_starts(n, n_ubatch, split) if a <= n - 1)
        assert cache.prefill(prompt, split) == n - reuse  # the same prompt again: its last batch only
        np.testing.assert_array_equal(_logits(llm), fresh)
    finally:
        llm.close()


@pytest.mark.parametrize(("flash_attn", "n_ubatch"), [(False, 128), (True, 128), (True, 512)])
def test_the_tiny_model_gives_a_fresh_starts_logits_after_any_reuse(
    tiny: Path, flash_attn: bool, n_ubatch: int
) -> None:
    _check(tiny / "gguf" / "tiny-q8_0.gguf", flash_attn, n_ubatch, 1100, (1, 2, 7, 33, 61, 100, 513, 600, 1030))


@pytest.mark.engine
@pytest.mark.parametrize("flash_attn", [False, True])
def test_gemma_gives_a_fresh_starts_logits_after_any_reuse(flash_attn: bool) -> None:
    if not GEMMA_GGUF.exists():
        pytest.skip("Gemma 3 270M is built by scripts/setup.sh")
    _check(GEMMA_GGUF, flash_attn, 128, 700, (7, 61, 600))


@pytest.mark.parametrize("flash_attn", [False, True])
def test_a_split_prompt_reuses_all_its_neighbour_shared(tiny: Path, flash_attn: bool) -> None:
    """A judge prompt split where the candidate's response begins: the next candidate's prompt, split at the same
    place, reuses everything up to it, not only up to the last multiple of n_ubatch, and still computes a fresh
    start's logits."""
    _check(tiny / "gguf" / "tiny-q8_0.gguf", flash_attn, 128, 1100, (700, 701, 750, 1030, 60), split=700)


def test_answers_do_not_depend_on_the_request_before(tiny: Path) -> None:
    """Through the engine: greedy and sampled answers of a request are the same after a neighbour that shares most
    of its prompt as alone on an empty cache, and the shared prefix was reused."""
    pytest.importorskip("llama_cpp")
    from conftest import spec_for

    from offline_eval.inference.backends.registry import load_backend
    from offline_eval.inference.requests import Request, Sampling

    rng = np.random.default_rng(1)
    shared = " ".join(f"{w}" for w in rng.integers(0, 10_000, 400).tolist())
    backend = load_backend(spec_for("llamacpp", tiny))
    try:
        for sampling in (Sampling(max_tokens=24), Sampling(temperature=0.9, top_p=0.95, seed=3, max_tokens=24)):
            first, second = (Request(prompt=f"{shared} {tail}", sampling=sampling) for tail in ("甲", "乙は"))
            count = backend.prompt_count
            assert count is not None
            backend.llm.reset()  # type: ignore[attr-defined]
            backend.generate([first])
            before = count.computed
            after_neighbour = backend.generate([second])[0]
            computed = count.computed - before
            assert computed < after_neighbour.prompt_tokens // 2  # most of it came from the cache
            evaluated = backend._evaluated  # type: ignore[attr-defined]
            if sampling.temperature > 0:  # create_completion sampled from the prompt we evaluated, not its own
                assert sum(evaluated[: evaluated.index(0)]) == computed
            backend.llm.reset()  # type: ignore[attr-defined]
            alone = backend.generate([second])[0]
            assert after_neighbour.text == alone.text and after_neighbour.output_tokens == alone.output_tokens > 0
    finally:
        backend.close()


def test_a_request_split_where_it_differs_reuses_its_neighbours_whole_head(tiny: Path) -> None:
    """JBE-QA's few-shot requests say the last message is where they differ (shared_chars=0): the next item reuses
    the system prompt and every exemplar, not only the last multiple of n_ubatch, with the same answer as alone."""
    pytest.importorskip("llama_cpp")
    from conftest import spec_for

    from offline_eval.inference.backends.registry import load_backend
    from offline_eval.inference.constraints import Choice
    from offline_eval.inference.requests import Request, Sampling

    rng = np.random.default_rng(2)
    shots = []
    for _ in range(4):
        shots += [
            {"role": "user", "content": " ".join(str(w) for w in rng.integers(0, 10_000, 60).tolist())},
            {"role": "assistant", "content": "1"},
        ]
    first, second = (
        Request.chat(
            [{"role": "system", "content": "判定"}, *shots, {"role": "user", "content": q}],
            Sampling(max_tokens=2),
            Choice(["0", "1"]),
            shared_chars=0,
        )
        for q in ("甲は正しいか。", "乙は誤りか。")
    )
    backend = load_backend(spec_for("llamacpp", tiny))
    try:
        count = backend.prompt_count
        assert count is not None
        ids = backend.encode([second])[0]  # type: ignore[attr-defined]
        split = backend._split_token(second, ids)  # type: ignore[attr-defined]
        assert split > 128 and split % 128 and len(ids) - split < 20
        backend.generate([first])
        before = count.computed
        after_neighbour = backend.generate([second])[0]
        assert count.computed - before == len(ids) - split
        backend.llm.reset()  # type: ignore[attr-defined]
        assert backend.generate([second])[0].text == after_neighbour.text
        # logprob mode, the numbers themselves: after the neighbour exactly as alone
        backend.choice_logprobs([first], ["0", "1"])
        after = backend.choice_logprobs([second], ["0", "1"])[0].logprobs
        backend.llm.reset()  # type: ignore[attr-defined]
        assert backend.choice_logprobs([second], ["0", "1"])[0].logprobs == after
    finally:
        backend.close()


def test_a_template_that_refuses_the_cut_message_only_loses_the_hint(tiny: Path) -> None:
    pytest.importorskip("llama_cpp")
    from conftest import spec_for

    from offline_eval.inference.backends.registry import load_backend
    from offline_eval.inference.requests import Request, Sampling

    template = (
        "{% for m in messages %}{% if not m['content'].endswith('。') %}{{ raise_exception('unfinished') }}{% endif %}"
        "<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}<assistant>"
    )
    backend = load_backend(spec_for("llamacpp", tiny, chat_template=template))
    try:
        req = Request.chat([{"role": "user", "content": "甲は正しいか。"}], Sampling(max_tokens=2), shared_chars=0)
        ids = backend.encode([req])[0]  # type: ignore[attr-defined]
        assert backend._split_token(req, ids) == 0  # type: ignore[attr-defined]
        assert backend.generate([req])[0].output_tokens > 0
    finally:
        backend.close()


@pytest.mark.parametrize("flash_attn", [False, True])
@pytest.mark.parametrize("path", [GEMMA_GGUF, None], ids=["gemma", "tiny"])
def test_a_prompt_that_continues_a_generation_gets_a_fresh_starts_logits(
    tiny: Path, path: Path | None, flash_attn: bool
) -> None:
    """Greedy generation evaluates its tokens one at a time after the prompt; a later prompt that carries them
    (the answer after the thinking) is evaluated in the same batches (carried_starts), so continuing the generation's
    own cache, which computes only what follows, and evaluating it from an empty cache (a resumed sweep) give
    exactly the same logits."""
    from offline_eval.inference.backends.llamacpp.greedy import greedy
    from offline_eval.inference.backends.llamacpp.prefill import carried_starts

    llama_cpp = pytest.importorskip("llama_cpp")
    model = path or tiny / "think" / "gguf" / "tiny-think-f16.gguf"
    llm = llama_cpp.Llama(
        model_path=str(model), n_ctx=2048, n_ubatch=64, n_threads=2, flash_attn=flash_attn, verbose=False, seed=0
    )
    rng = np.random.default_rng(1)
    vocab = min(20000, llm.n_vocab())
    prompt = [llm.token_bos(), *rng.integers(100, vocab, 150).tolist()]
    cache = PromptCache(llm)
    try:
        cache.prefill(prompt)
        _, _, made = greedy(llm, prompt, 40, None)
        cache.extend(made[: llm.n_tokens - len(prompt)])
        tail = rng.integers(100, vocab, 3).tolist()
        answer = [*prompt, *made, *tail]
        span = (len(prompt), len(prompt) + len(made))
        assert carried_starts(len(answer), 64, 0, span)[-1] == span[1]
        computed = cache.prefill(answer, 0, span)
        assert computed <= len(tail) + 1  # the tail, and the last generated token where generation never took it
        warm = _logits(llm)
        cache.forget()
        llm.reset()
        assert cache.prefill(answer, 0, span) == len(answer)
        np.testing.assert_array_equal(warm, _logits(llm))
    finally:
        llm.close()
