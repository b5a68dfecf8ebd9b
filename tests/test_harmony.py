"""gpt-oss's harmony format (`reasoning: {preset: harmony}`) on local weights: the tiny harmony model
(scripts/make_tiny_model.py) has gpt-oss's special tokens and OpenAI's own chat template, byte for byte. Its
thinking is the analysis channel's message, which ends at <|end|>: a special token that vLLM and transformers leave
out of the text they match stop strings in (vLLM stops on its id; transformers finds it in the text with special
tokens; llama.cpp renders <|end|> as text once <|return|> and <|call|> end generation). <|end|> stands in for a
token the random weights often write, so some analysis messages close and others run to the budget."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from conftest import eager

from offline_eval.inference.backends.chat import render_chat, template_strftime
from offline_eval.inference.backends.registry import load_backend
from offline_eval.inference.backends.spec import LoadSpec
from offline_eval.inference.constraints import Choice
from offline_eval.inference.requests import Phase, Request, Result, Sampling
from offline_eval.inference.runner import Runner
from offline_eval.inference.store import Store
from offline_eval.models.spec import ModelSpec, ReasoningSpec
from offline_eval.models.thinking import ModelSettings, planned, solve, split_block
from offline_eval.runtime.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "scripts" / "templates" / "gpt-oss.jinja"
# openai/gpt-oss-120b's chat_template.jinja, as llama.cpp ships it (models/templates/openai-gpt-oss-120b.jinja).
TEMPLATE_SHA256 = "a4c9919cbbd4acdd51ccffe22da049264b1b73e59055fa58811a99efbd7c8146"
OPEN, CLOSE = "<|channel|>analysis<|message|>", "<|end|><|start|>assistant<|channel|>final<|message|>"
BUDGET = 24
QUESTIONS = [
    "民法上、未成年者が法定代理人の同意を得ないでした法律行為は、取り消すことができる。",
    "刑法上、正当防衛が成立する場合であっても、その行為は違法である。",
    "憲法上、裁判官は、その良心に従い独立してその職権を行う。",
    "民法上、時効の利益は、あらかじめ放棄することができる。",
    "会社法上、株式会社の取締役は、株主総会の決議によって選任する。",
    "民事訴訟法上、控訴は、判決書の送達を受けた日から二週間以内に提起しなければならない。",
]
MESSAGES = [{"role": "system", "content": "正しければ1、誤りなら0とだけ答えよ。"}, {"role": "user", "content": "問"}]
SETTINGS = ModelSettings(
    reasoning=ReasoningSpec(preset="harmony", budget=BUDGET, template_kwargs={"reasoning_effort": "low"})
)


def test_the_preset_is_the_analysis_channel_ended_at_end_and_answered_in_the_final_channel() -> None:
    r = ReasoningSpec.model_validate({"preset": "harmony", "budget": 512})
    assert (r.think, r.open, r.close, r.stop, r.budget) == (True, OPEN, CLOSE, "<|end|>", 512)
    assert SETTINGS.thinking is not None and SETTINGS.thinking.stop == "<|end|>"
    own = ReasoningSpec.model_validate({"preset": "harmony", "close": "<|end|><|start|>assistant"})
    assert own.close == "<|end|><|start|>assistant" and own.open == OPEN  # what the user writes wins
    with pytest.raises(ValueError, match="always thinks"):
        ReasoningSpec.model_validate({"preset": "harmony", "think": False})
    with pytest.raises(ValueError):
        ReasoningSpec.model_validate({"preset": "channels"})
    # A variant's change keeps the preset's delimiters.
    m = ModelSpec.model_validate(
        {
            "name": "g",
            "backend": "fake",
            "path": "x",
            "reasoning": {"preset": "harmony"},
            "variants": {"a": {}, "b": {"reasoning": {"budget": 64}}},
        }  # fmt: skip
    )
    b = m.reasoning_of("b")
    assert b is not None and (b.open, b.close, b.stop, b.budget) == (OPEN, CLOSE, "<|end|>", 64)
    # The tags' default is unchanged: the thinking ends at the closing delimiter.
    assert ModelSettings(reasoning=ReasoningSpec(think=True)).thinking.stop == "</think>"  # type: ignore[union-attr]


def test_the_template_is_openais_own_and_renders_the_same_date_on_every_day() -> None:
    text = TEMPLATE.read_bytes()
    assert hashlib.sha256(text).hexdigest() == TEMPLATE_SHA256
    prompt = render_chat(text.decode(), MESSAGES, reasoning_effort="low")
    assert prompt.startswith("<|start|>system<|message|>You are ChatGPT")
    assert "Reasoning: low" in prompt and "# Instructions\n\n正しければ1" in prompt
    assert prompt.endswith("<|start|>user<|message|>問<|end|><|start|>assistant")
    # "Current date:" is a fixed day, not the clock's: a prompt (and its stored answer) is the same tomorrow.
    assert f"Current date: {template_strftime('%Y-%m-%d')}\n" in prompt


def test_a_served_harmony_reply_without_a_reasoning_parser_is_split_at_the_final_channel() -> None:
    said = Result(text=OPEN + "条文を確認する。" + CLOSE + "1", finish_reason="stop", prompt_tokens=9, output_tokens=9)
    got = split_block(said, OPEN, CLOSE)
    assert (got.reasoning, got.text) == ("条文を確認する。", "1")
    never = split_block(Result(text=OPEN + "条文を", finish_reason="length", prompt_tokens=9, output_tokens=3),
                        OPEN, CLOSE)  # fmt: skip
    assert never.text == "" and never.reasoning_cut is True


def _spec(backend: str, tiny: Path) -> LoadSpec:
    h = tiny / "harmony"
    if backend == "llamacpp":
        return LoadSpec(name="harmony", backend=backend, path=str(h / "gguf" / "tiny-harmony-f32.gguf"),
                        max_model_len=1024)  # fmt: skip
    return LoadSpec(name="harmony", backend=backend, path=str(h / "hf"), max_model_len=1024, dtype="float32",
                    engine_options=eager(backend))  # fmt: skip


def _phase() -> Phase:
    reqs = [
        Request.chat([MESSAGES[0], {"role": "user", "content": q}], Sampling(max_tokens=2), Choice(("0", "1")))
        for q in QUESTIONS
    ]
    return Phase("jbeqa", reqs, [str(i) for i in range(len(reqs))], method="generate", choices=("0", "1"))


def test_the_engines_render_the_template_as_transformers_does(tiny: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny / "harmony" / "hf"))
    theirs = tok.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True, reasoning_effort="low",
                                     strftime_now=template_strftime)  # fmt: skip
    assert render_chat(TEMPLATE.read_text(encoding="utf-8"), MESSAGES, reasoning_effort="low") == theirs
    assert tok.chat_template == TEMPLATE.read_text(encoding="utf-8")


_RUNS: dict[str, list[Result]] = {}


@pytest.fixture(scope="module", params=["llamacpp", "transformers", "vllm"])
def answered(request, tiny, tmp_path_factory):  # type: ignore[no-untyped-def]
    backend = load_backend(_spec(request.param, tiny))
    try:
        store = Store(tmp_path_factory.mktemp(request.param) / "store.sqlite")
        runner = Runner(backend, store, "f32", progress=False)
        results, stats = solve(runner, _phase(), SETTINGS)
        thoughts, again = runner.run(planned(_phase(), SETTINGS))  # the thinking phase, served from the store
        assert again.n_cached == len(QUESTIONS)
        end = backend.encode_text("<|end|>")  # type: ignore[attr-defined]
        prompts = [backend.render(r) for r in planned(_phase(), SETTINGS).requests]  # type: ignore[attr-defined]
    finally:
        backend.close()
    _RUNS[request.param] = results
    yield request.param, results, thoughts, stats, end, prompts


def test_the_analysis_message_ends_at_end_or_at_the_budget_and_the_answer_is_a_choice(answered) -> None:  # type: ignore[no-untyped-def]
    name, results, thoughts, stats, end, prompts = answered
    assert len(end) == 1, name  # <|end|> is one token
    assert all(p.endswith("<|start|>assistant" + OPEN) for p in prompts), name
    closed = [r for r in results if not r.reasoning_cut]
    assert 2 <= len(closed) <= len(QUESTIONS) - 2, (name, [r.reasoning_tokens for r in results])
    for r, th in zip(results, thoughts):
        assert r.text in ("0", "1") and r.finish_reason == "stop", name
        assert r.reasoning is not None and "<|end|>" not in r.reasoning, name
        assert r.reasoning_tokens <= BUDGET, name
        if r.reasoning_cut:
            assert r.reasoning_tokens == BUDGET and th.finish_reason == "length", name
        else:  # ended by <|end|>, which the answer phase writes itself (in CLOSE), so it is not carried twice; or
            # by an end of generation (the random weights write <|call|> once), after which the answer phase closes
            assert th.finish_reason == "stop" and th.token_ids is not None, name
            assert end[0] not in th.token_ids, (name, th.token_ids)
    assert stats.reasoning()["cut_by_budget"] == len(QUESTIONS) - len(closed)


def test_greedy_harmony_thinking_ends_and_answers_alike_on_the_engines_in_float32(answered) -> None:  # type: ignore[no-untyped-def]
    if len(_RUNS) < 3:
        pytest.skip("compared once all three engines have run")
    # Measured: the three engines close the same analysis messages (4 of 6) and answer every statement alike.
    cut = {n: [r.reasoning_cut for r in rs] for n, rs in _RUNS.items()}
    assert cut["llamacpp"] == cut["transformers"] == cut["vllm"], cut
    answers = {n: [r.text for r in rs] for n, rs in _RUNS.items()}
    assert answers["llamacpp"] == answers["transformers"] == answers["vllm"], answers
    assert [r.reasoning_tokens for r in _RUNS["transformers"]] == [r.reasoning_tokens for r in _RUNS["vllm"]]


def test_a_config_with_the_preset_is_read_and_thinking_false_is_refused(tmp_path: Path) -> None:
    from offline_eval.pipeline.config import load_config

    base = f"tasks:\n  jbeqa: {{protocol: offline-eval, data: {ROOT / 'data' / 'jbeqa'}}}\nmodels:\n  - name: gpt-oss\n    backend: fake\n    path: x\n    reasoning: {{preset: harmony%s}}\n"
    (tmp_path / "ok.yaml").write_text(base % ", budget: [256, 1024]", encoding="utf-8")
    cfg = load_config(tmp_path / "ok.yaml")
    assert sorted(cfg.models[0].variants) == ["default.think1024", "default.think256"]
    (tmp_path / "bad.yaml").write_text(base % ", think: false", encoding="utf-8")
    with pytest.raises(InputError, match="always thinks"):
        load_config(tmp_path / "bad.yaml")
