"""The tiny reasoning model (scripts/make_tiny_model.py: <think> and </think> added tokens, a Qwen3-style template)
on vLLM, llama.cpp and transformers, all three in float32 (an F32 GGUF, dtype float32): random weights think until
the budget, which is the forcing path. The budget holds to the token, every constrained answer is one of the
choices, and greedy thinking is the same on the three engines.

Random weights emit lone byte-fallback tokens, which are not UTF-8 text: each engine decodes them its own way
(llama.cpp drops them, vLLM's incremental detokenizer writes U+FFFD, transformers' whole-sequence decode merges
neighbours). So the thinking is compared as tokens (each token's bytes: the GGUF numbers its vocabulary apart from
the HF folder), and phase 2 continues from those tokens, not from their text (docs/reasoning.md, "Token for
token")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import eager

from offline_eval.inference.backends.registry import load_backend
from offline_eval.inference.backends.spec import LoadSpec
from offline_eval.inference.constraints import Choice
from offline_eval.inference.requests import Phase, Request, Result, Sampling
from offline_eval.inference.runner import Runner
from offline_eval.inference.store import Store
from offline_eval.models.spec import ReasoningSpec
from offline_eval.models.thinking import ModelSettings, planned, solve

BUDGET = 24
QUESTIONS = [
    "民法上、未成年者が法定代理人の同意を得ないでした法律行為は、取り消すことができる。",
    "刑法上、正当防衛が成立する場合であっても、その行為は違法である。",
    "憲法上、裁判官は、その良心に従い独立してその職権を行う。",
    "民法上、時効の利益は、あらかじめ放棄することができる。",
]
SETTINGS = ModelSettings(reasoning=ReasoningSpec(think=True, budget=BUDGET, template_kwargs={"enable_thinking": True}))


def _spec(backend: str, tiny: Path) -> LoadSpec:
    think = tiny / "think"
    if backend == "llamacpp":
        return LoadSpec(name="think", backend=backend, path=str(think / "gguf" / "tiny-think-f32.gguf"),
                        max_model_len=1024)  # fmt: skip
    return LoadSpec(name="think", backend=backend, path=str(think / "hf"), max_model_len=1024, dtype="float32",
                    engine_options=eager(backend))  # fmt: skip


def _phase(method: str = "generate") -> Phase:
    reqs = [
        Request.chat(
            [{"role": "system", "content": "正しければ1、誤りなら0とだけ答えよ。"}, {"role": "user", "content": q}],
            Sampling(max_tokens=2),
            Choice(("0", "1")) if method == "generate" else None,
        )
        for q in QUESTIONS
    ]
    return Phase("jbeqa", reqs, [str(i) for i in range(len(reqs))], method=method, choices=("0", "1"))


_RUNS: dict[str, list[Result]] = {}
_TOKENS: dict[str, list[tuple[bytes, ...] | None]] = {}  # each statement's thinking, token by token


@pytest.fixture(scope="module", params=["llamacpp", "transformers", "vllm"])
def thought(request, tiny, tmp_path_factory):  # type: ignore[no-untyped-def]
    backend = load_backend(_spec(request.param, tiny))
    try:
        store = Store(tmp_path_factory.mktemp(request.param) / "store.sqlite")
        runner = Runner(backend, store, "f32", progress=False)
        generated, stats = solve(runner, _phase(), SETTINGS)
        scored, _ = solve(runner, _phase("choice_logprobs"), SETTINGS)
        thoughts, again = runner.run(planned(_phase(), SETTINGS))  # the thinking phase, served from the store
        assert again.n_cached == len(QUESTIONS)
        vocab = backend.vocab_bytes()  # type: ignore[attr-defined]
        _TOKENS[request.param] = [
            tuple(bytes(vocab[t]) for t in th.token_ids) if th.token_ids is not None else None for th in thoughts
        ]
    finally:
        backend.close()
    _RUNS[request.param] = generated
    yield request.param, generated, scored, stats


def test_the_budget_holds_to_the_token_and_every_constrained_answer_is_a_choice(thought) -> None:  # type: ignore[no-untyped-def]
    name, generated, scored, stats = thought
    for r in generated:
        assert r.reasoning is not None and r.reasoning_cut is True, name  # random weights never close the block
        assert r.reasoning_tokens == BUDGET, name
        assert r.text in ("0", "1") and r.finish_reason == "stop", name
    for r in scored:  # logprob mode after thinking: the choice scored after the closing delimiter
        assert r.reasoning_tokens == BUDGET and set(r.logprobs or {}) == {"0", "1"}, name
    assert stats.reasoning()["cut_by_budget"] == len(QUESTIONS)


def _decodable(text: str | None) -> str:
    return re.sub("[\ufffd\x00-\x1f\x7f]", "", text or "")


def test_greedy_thinking_and_answers_are_the_same_on_the_engines_in_float32(thought) -> None:  # type: ignore[no-untyped-def]
    if len(_RUNS) < 3:
        pytest.skip("compared once all three engines have run")
    # Every engine gave its thinking's token ids, which the answer phase continued from.
    assert all(t is not None and len(t) == BUDGET for ts in _TOKENS.values() for t in ts), _TOKENS
    # Measured: transformers and vLLM think the same 24 tokens on all 4 statements; llama.cpp the same as them on 3,
    # and on the fourth it parts at token 21, at a near tie of random weights.
    assert _TOKENS["transformers"] == _TOKENS["vllm"]
    same = sum(a == b for a, b in zip(_TOKENS["llamacpp"], _TOKENS["vllm"]))
    assert same >= 3, [(a == b) for a, b in zip(_TOKENS["llamacpp"], _TOKENS["vllm"])]
    for a, b in zip(_TOKENS["llamacpp"], _TOKENS["vllm"]):
        assert a is not None and b is not None and a[:16] == b[:16]
    # The answers after the same tokens are the same: on every statement, all three engines.
    answers = {n: [r.text for r in rs] for n, rs in _RUNS.items()}
    assert answers["llamacpp"] == answers["transformers"] == answers["vllm"], answers
    # Text as each engine writes it: the decodable characters of the thinking agree where the tokens do.
    text = {n: [_decodable(r.reasoning) for r in rs] for n, rs in _RUNS.items()}
    assert sum(a == b for a, b in zip(text["llamacpp"], text["vllm"])) >= 3, text
