"""Constrained decoding on the three real engines, with the tiny random-weight model."""

from __future__ import annotations

import json
import math
import re

import jsonschema
import pytest

from offline_eval.inference.constraints import Choice, JsonSchema, Regex, parse_json_strict
from offline_eval.inference.requests import Request, Sampling

SCHEMA = {
    "type": "object",
    "properties": {
        "rationale": {"type": "string", "maxLength": 16},
        "score": {"type": "integer", "minimum": 1, "maximum": 3},
        "verdict": {"enum": ["適合", "不適合"]},
        "ok": {"type": "boolean"},
    },
    "required": ["rationale", "score", "verdict", "ok"],
    "additionalProperties": False,
}


def prompts(n: int, sampling: Sampling, constraint=None) -> list[Request]:  # type: ignore[no-untyped-def]
    return [
        Request.chat(
            [
                {"role": "system", "content": "正しければ1、誤りなら0とだけ答えてください。"},
                {"role": "user", "content": f"記述{i}：民法第{i + 1}条の規定によれば、契約は{i}日で効力を生ずる。"},
            ],
            sampling,
            constraint,
        )
        for i in range(n)
    ]


def test_choice_constraint_gives_only_labels(engine):  # type: ignore[no-untyped-def]
    out = engine.generate(prompts(50, Sampling(max_tokens=4), Choice(["0", "1"])))
    assert len(out) == 50
    assert {r.text for r in out} <= {"0", "1"}
    assert {r.finish_reason for r in out} == {"stop"}


def test_japanese_choice_constraint(engine):  # type: ignore[no-untyped-def]
    choices = ["適合する", "適合しない", "判断できない"]
    out = engine.generate(prompts(20, Sampling(max_tokens=24), Choice(choices)))
    assert len(out) == 20
    assert all(r.text in choices for r in out), [r.text for r in out]


def test_json_schema_outputs_parse_and_validate(engine):  # type: ignore[no-untyped-def]
    out = engine.generate(prompts(50, Sampling(max_tokens=96), JsonSchema(SCHEMA)))
    assert len(out) == 50
    for r in out:
        assert r.finish_reason == "stop", r
        obj = parse_json_strict(r.text)  # strict: a raw control character in a string fails here
        jsonschema.validate(obj, SCHEMA)
        assert not re.search(r"[\x00-\x1f]", r.text)  # escaped ones (\r) are valid JSON; raw ones never


def test_regex_constraint(engine):  # type: ignore[no-untyped-def]
    out = engine.generate(prompts(10, Sampling(max_tokens=12), Regex(r"第[0-9]{1,3}条")))
    assert len(out) == 10
    assert all(re.fullmatch(r"第[0-9]{1,3}条", r.text) for r in out), [r.text for r in out]


def test_max_tokens_cut_is_reported_as_length(engine):  # type: ignore[no-untyped-def]
    out = engine.generate(prompts(5, Sampling(max_tokens=3)))
    assert len(out) == 5
    # Random weights rarely emit EOS within 3 tokens; every cut-off generation must say so.
    assert all(r.finish_reason in ("stop", "length") for r in out)
    assert any(r.finish_reason == "length" for r in out)
    # llama-cpp-python may take one more token to finish a UTF-8 character split across byte tokens.
    slack = 1 if engine.name == "llamacpp" else 0
    assert all(r.output_tokens <= 3 + slack for r in out), out


def test_choice_logprobs_agree_with_constrained_greedy(engine):  # type: ignore[no-untyped-def]
    reqs = prompts(50, Sampling(max_tokens=4), Choice(["0", "1"]))
    lp = engine.choice_logprobs(reqs, ["0", "1"])
    gen = engine.generate(reqs)
    assert len(lp) == len(gen) == 50
    for r in lp:
        assert set(r.logprobs) == {"0", "1"}
        assert all(v <= 0 for v in r.logprobs.values())
        assert r.text == max(r.logprobs, key=r.logprobs.get)
        json.dumps(r.logprobs)  # plain floats, not numpy
    # A label's log-probability sums the (at most two, here) tokens that spell it, so it exceeds its best
    # single token by at most log 2. Where the labels differ by more than that (plus kernel noise), constrained
    # greedy decoding, which takes the best single token, must pick the same label.
    clear = [(a, b) for a, b in zip(lp, gen) if abs(a.logprobs["0"] - a.logprobs["1"]) > math.log(2) + 0.05]
    assert len(clear) >= 5, "too few clear-cut prompts to compare"
    assert all(a.text == b.text for a, b in clear), [(a.logprobs, b.text) for a, b in clear if a.text != b.text]
    assert engine.label_token_ids(reqs[0], ["0", "1"])[1]  # ids behind "1" include its piece


def test_encode_matches_prompt_tokens(engine):  # type: ignore[no-untyped-def]
    reqs = prompts(3, Sampling(max_tokens=4), Choice(["0", "1"]))
    enc = engine.encode(reqs)
    out = engine.generate(reqs, enc)
    assert len(enc) == len(out) == 3
    assert [r.prompt_tokens for r in out] == [len(e) for e in enc]
    assert all(e[0] == 1 for e in enc)  # BOS exactly once, from the chat template
    assert all(e[1] != 1 for e in enc)


@pytest.mark.parametrize("backend", ["llamacpp"])
def test_gguf_quantizations_load_and_constrain(tiny, backend):  # type: ignore[no-untyped-def]
    from offline_eval.inference.backends.registry import load_backend
    from offline_eval.inference.backends.spec import LoadSpec

    for q in ("f16", "q4_0"):
        b = load_backend(
            LoadSpec(name="t", backend=backend, path=str(tiny / "gguf" / f"tiny-{q}.gguf"), max_model_len=1024)
        )
        try:
            out = b.generate(prompts(5, Sampling(max_tokens=4), Choice(["0", "1"])))
            assert {r.text for r in out} <= {"0", "1"}
        finally:
            b.close()


@pytest.mark.parametrize("quant", ["int8", "int4"])
def test_transformers_weight_only_quantization(tiny, quant):  # type: ignore[no-untyped-def]
    from offline_eval.inference.backends.registry import load_backend
    from offline_eval.inference.backends.spec import LoadSpec

    b = load_backend(
        LoadSpec(name="t", backend="transformers", path=str(tiny / "hf"), quantization=quant, dtype="float32")
    )
    out = b.generate(prompts(8, Sampling(max_tokens=4), Choice(["0", "1"])))
    assert {r.text for r in out} <= {"0", "1"}
    w = b.model.model.layers[0].mlp.up_proj.weight
    assert "Tensor" in type(w).__name__ and type(w).__name__ != "Parameter"  # a torchao quantized tensor
    b.close()
