"""The constraint backends on the real engines. On the tiny models: every task's constraint (JBE-QA's choice,
LegalRikai's rubric JSON, LegalEval-Q's evaluator JSON), and the choice after thinking, under every engine x backend;
the masks the backends compute compared token by token, so that where answers differ the test says where and why;
vLLM's outlines backend refused while its vocabulary table misspells tokens. On Gemma 3 270M (real weights): Japanese
copied into JSON strings under every engine x backend, with no U+FFFD and no invalid output, and the same answers
from every backend of an engine (docs/constrained-decoding.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import eager

from offline_eval.inference.backends.registry import get_engine, load_backend
from offline_eval.inference.backends.spec import LoadSpec
from offline_eval.inference.constraints import Choice, JsonSchema, violation
from offline_eval.inference.requests import Request, Sampling
from offline_eval.runtime.errors import EngineError
from offline_eval.tasks.legalevalq import evaluator
from offline_eval.tasks.legalrikai import rubric

ROOT = Path(__file__).resolve().parent.parent
GEMMA = ROOT / "models" / "gemma-3-270m"
CHOICE = Choice(["0", "1"])
RIKAI = JsonSchema(rubric.judge_schema("amendexp", 24))
EVALQ = JsonSchema(evaluator.schema(24))
STATEMENTS = [
    "民法上、未成年者が法定代理人の同意を得ないでした法律行為は、取り消すことができる。",
    "刑法上、正当防衛が成立する場合であっても、その行為は違法である。",
    "憲法上、裁判官は、その良心に従い独立してその職権を行う。",
    "民法上、時効の利益は、あらかじめ放棄することができる。",
]


def _path(engine: str, folder: Path, gguf: str) -> str:
    return str(folder / "gguf" / gguf) if engine == "llamacpp" else str(folder / "hf")


def _answers(engine: str, backend: str | None, path: str, requests: list[Request]) -> list[Any]:
    b = load_backend(LoadSpec(name="m", backend=engine, path=path, max_model_len=1024, constraint_backend=backend,
                              engine_options=eager(engine)))  # fmt: skip
    try:
        return b.generate(requests)
    finally:
        b.close()


def _task_requests() -> list[Request]:
    out = []
    for i, s in enumerate(STATEMENTS):
        out.append(
            Request.chat([{"role": "user", "content": f"正しければ1、誤りなら0: {s}"}], Sampling(max_tokens=4), CHOICE)
        )
        out.append(Request.chat([{"role": "user", "content": f"第{i + 1}条「甲」①を評価: {s}"}],
                                Sampling(max_tokens=160), RIKAI if i % 2 else EVALQ))  # fmt: skip
    return out


@pytest.mark.parametrize("name", ["vllm", "transformers", "llamacpp"])
def test_every_task_constraint_under_every_backend(name, tiny):
    """Every output keeps its constraint, checked on our side with strict JSON and jsonschema, unless the token
    limit cut it (random weights rarely close a string); the choice answers are the same under every backend. JSON
    answers may differ where the model ranks first a token of a class the mask tests below name."""
    requests = _task_requests()
    own = get_engine(name).constraint_backends
    got: dict[str, list[Any]] = {}
    for backend in own:
        if name == "vllm" and backend == "outlines":
            continue  # refused: test_vllm_outlines_is_refused_while_its_vocabulary_misspells_tokens
        got[backend] = _answers(name, None if backend == own[0] else backend, _path(name, tiny, "tiny-f16.gguf"),
                                requests)  # fmt: skip
        for r, res in zip(requests, got[backend]):
            assert r.constraint is not None
            if res.finish_reason == "stop":
                assert violation(r.constraint, res.text) is None, (name, backend, res.text)
            else:
                assert res.finish_reason == "length" and isinstance(r.constraint, JsonSchema), (backend, res)
        assert "\ufffd" not in "".join(res.text for res in got[backend])
    choices = {b: [res.text for r, res in zip(requests, rs) if r.constraint == CHOICE] for b, rs in got.items()}
    assert all(c == choices[own[0]] for c in choices.values()), choices
    assert set(choices[own[0]]) <= {"0", "1"}


@pytest.mark.parametrize("name", ["transformers", "llamacpp"])
def test_a_schema_a_backend_cannot_compile_fails_in_one_line(name, tiny):
    """A lookahead in a pattern: Rust's regex (llguidance, outlines-core) has none. The call fails with the
    backend and the feature named; the runner fails that run alone (EngineError) and the sweep goes on."""
    c = JsonSchema(
        {"type": "object", "required": ["a"], "properties": {"a": {"type": "string", "pattern": "^(?=x)x+$"}}}
    )
    for backend in ("guidance", "outlines"):
        with pytest.raises(EngineError) as e:
            _answers(name, backend, _path(name, tiny, "tiny-f16.gguf"), [Request(prompt="a", constraint=c)])
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith(f"{backend} cannot compile this JsonSchema constraint"), msg
        assert "look" in msg.lower() or "(?=" in msg, msg


@pytest.mark.parametrize("name", ["transformers", "llamacpp", "vllm"])
def test_a_choice_after_thinking_under_every_backend(name, tiny, tmp_path):
    """The tiny reasoning model thinks to its budget, then answers under the constraint (docs/reasoning.md): the
    answer phase continues from the thinking's tokens, under every backend the engine runs."""
    from dataclasses import replace

    from test_thinking_engines import QUESTIONS, SETTINGS, _phase, _spec

    from offline_eval.inference.runner import Runner
    from offline_eval.inference.store import Store
    from offline_eval.models.thinking import solve

    own = get_engine(name).constraint_backends[1:]
    for backend in [b for b in own if not (name == "vllm" and b == "outlines")]:
        b = load_backend(replace(_spec(name, tiny), constraint_backend=backend))
        try:
            runner = Runner(b, Store(tmp_path / f"{backend}.sqlite"), "f32", progress=False)
            generated, stats = solve(runner, _phase(), SETTINGS)
        finally:
            b.close()
        assert all(r.text in ("0", "1") for r in generated), (backend, [r.text for r in generated])
        assert len(generated) == len(QUESTIONS) and stats.reasoning()["cut_by_budget"] == len(QUESTIONS), backend


def _walk(masks: dict[str, Any], tokens: list[int], n: int) -> list[dict[str, set[int]]]:
    """At each step of the token path, the tokens each backend allows."""
    from offline_eval.inference.constrained.masks import allowed

    steps = []
    for t in tokens:
        steps.append({b: set(np.flatnonzero(allowed(m.bitmask(), n)).tolist()) for b, m in masks.items()})
        for m in masks.values():
            m.accept(t)
    return steps


def test_transformers_masks_differ_only_where_named(tiny):
    """xgrammar, llguidance and outlines-core step by step along a Japanese rubric answer and a choice. Their masks
    differ only in these classes of tokens, and so do the answers wherever a model ranks one of them first (a
    backslash no more: xgrammar 0.2.8 compiled a string with maxLength without escapes, and grammars.py gives it
    JSON's, as outlines-core and llguidance have them):
    - U+007F-U+009F: strict JSON allows them raw and xgrammar does; outlines-core and llguidance do not;
    - added tokens (<s>, <|user|>, ...): xgrammar lets them into a string as their text, llguidance does not;
    - a span the grammar forces (`","score":`): llguidance allows only the tokenizer's own first token of it, xgrammar
      also any token that spells a prefix of that token (a byte-fallback <0x2C> for ',', or '{' before '{"')."""
    import xgrammar as xgr
    from transformers import AutoTokenizer

    from offline_eval.inference.backends.hf.masks import hf_masks
    from offline_eval.inference.constrained.grammars import xgrammar_ebnf

    tok = AutoTokenizer.from_pretrained(tiny / "hf")
    info = xgr.TokenizerInfo.from_huggingface(tok)
    vocab = [bytes(b) for b in info.decoded_vocab]
    n = len(vocab)
    escape = {i for i, b in enumerate(vocab) if b.startswith(b"\\")}  # tokens that open an escape
    c1 = {i for i, b in enumerate(vocab) if b"\x7f" in b or any(f"{chr(x)}".encode() in b for x in range(0x80, 0xA0))}
    added = set(tok.added_tokens_decoder)
    rationale = "第1条「甲」①の齟齬"
    for c, text in ((RIKAI, json.dumps({k: {"rationale": rationale, "score": 3} for k in json.loads(RIKAI.schema_json)
                                        ["properties"]}, ensure_ascii=False, separators=(",", ":"))), (CHOICE, "1")):  # fmt: skip
        assert violation(c, text) is None
        tokens = tok.encode(text, add_special_tokens=False)

        class Xgr:
            def __init__(self, ebnf: str) -> None:
                self.m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar(ebnf))
                self.words = xgr.allocate_token_bitmask(1, n)

            def bitmask(self) -> np.ndarray:
                self.m.fill_next_token_bitmask(self.words)
                return self.words[0].numpy()

            def accept(self, t: int) -> None:
                assert self.m.accept_token(t)

        masks = {
            "xgrammar": Xgr(xgrammar_ebnf(c)),
            **{b: hf_masks(b, tok).matcher(c) for b in ("guidance", "outlines")},
        }
        seen: set[str] = set()
        for k, step in enumerate(_walk(masks, tokens, n)):
            x = step["xgrammar"]
            assert step["outlines"] ^ x <= c1, (k, [vocab[i] for i in step["outlines"] ^ x])
            g = step["guidance"]
            forced = {i for i in x if len(g) == 1 and vocab[next(iter(g))].startswith(vocab[i])}
            assert g ^ x <= c1 | added | forced, (k, [vocab[i] for i in g ^ x])
            seen |= {name for name, cls in (("c1", c1), ("added", added), ("forced", forced))
                     if (g ^ x) & cls}  # fmt: skip
        if c == RIKAI:
            assert seen == {"c1", "added", "forced"}, seen  # each class occurs on this path
            assert escape and not any(
                escape & (step["outlines"] ^ step["xgrammar"])
                for step in _walk(
                    {"xgrammar": Xgr(xgrammar_ebnf(c)), "outlines": hf_masks("outlines", tok).matcher(c)}, tokens, n
                )
            )


def test_llamacpp_masks_differ_only_where_named(tiny):
    """llama.cpp: GBNF (asked token by token), llguidance and outlines-core along the same JSON answer. outlines-core
    differs from GBNF only on tokens no valid text holds: GBNF lets an empty piece (a control or unused token) into a
    string and allows the bytes 0xF5-0xFF, which no UTF-8 text holds; outlines-core leaves control tokens out and
    allows a lone 0xED. llguidance differs also where test_transformers_masks_differ_only_where_named says: it keeps
    user-defined tokens (<|user|>) out of strings, and a forced span to the tokenizer's own first token."""
    from offline_eval.inference.backends.llamacpp.greedy import GrammarCheck
    from offline_eval.inference.backends.llamacpp.masks import llamacpp_masks
    from offline_eval.inference.constrained.grammars import gbnf

    b = load_backend(LoadSpec(name="m", backend="llamacpp", path=str(tiny / "gguf" / "tiny-f16.gguf"),
                              max_model_len=512))  # fmt: skip
    try:
        llm = b.llm  # type: ignore[attr-defined]
        n = llm.n_vocab()
        pieces = [llm.detokenize([i], special=False) for i in range(n)]
        no_text = {i for i, p in enumerate(pieces) if p == b"" or (len(p) == 1 and p[0] >= 0xED)}
        text = '{"reason":"第1条「甲」①の齟齬","score":3}'
        c = JsonSchema({"type": "object", "required": ["reason", "score"], "additionalProperties": False,
                        "properties": {"reason": {"type": "string", "maxLength": 40},
                                       "score": {"type": "integer", "minimum": 1, "maximum": 5}}})  # fmt: skip
        tokens = llm.tokenize(text.encode(), add_bos=False, special=False)

        class Gbnf:
            def __init__(self) -> None:
                self.g = GrammarCheck(llm, gbnf(c))
                self.g.reset()

            def bitmask(self) -> np.ndarray:
                bits = np.array([self.g.allows(i) for i in range(n)] + [False] * (-n % 32))
                return np.packbits(bits, bitorder="little").view(np.int32)

            def accept(self, t: int) -> None:
                self.g.accept(t)

        masks = {"gbnf": Gbnf(), **{k: llamacpp_masks(k, llm).matcher(c) for k in ("guidance", "outlines")}}
        import llama_cpp

        added = {i for i in range(n) if llama_cpp.llama_vocab_get_attr(llm._model.vocab, i)
                 & llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED}  # fmt: skip
        for k, step in enumerate(_walk(masks, tokens, n)):
            assert step["outlines"] ^ step["gbnf"] <= no_text, (k, sorted(step["outlines"] ^ step["gbnf"])[:10])
            g = step["guidance"]
            forced = {i for i in step["gbnf"] if len(g) == 1 and pieces[next(iter(g))].startswith(pieces[i])}
            assert g ^ step["gbnf"] <= no_text | added | forced, (k, sorted(g ^ step["gbnf"])[:10])
            assert tokens[k] in step["gbnf"] & step["guidance"] & step["outlines"]
    finally:
        b.close()


def test_vllm_outlines_is_refused_while_its_vocabulary_misspells_tokens(tiny):
    """vLLM 0.32's outlines table adds a space to SentencePiece tokens that begin with one. The day a vLLM spells
    them right, `misspelled` finds none, the load is no longer refused, and this test fails: drop the refusal."""
    from transformers import AutoTokenizer

    from offline_eval.inference.backends.vllm.outlines import misspelled

    wrong, n, example = misspelled(AutoTokenizer.from_pretrained(tiny / "hf"))
    assert wrong > 0 and n > 1000 and "as b'  " in example
    with pytest.raises(EngineError) as e:
        load_backend(LoadSpec(name="m", backend="vllm", path=str(tiny / "hf"), constraint_backend="outlines"))
    assert "\n" not in str(e.value) and "outlines" in str(e.value) and "guidance" in str(e.value)


JAPANESE = [
    "「𠮷野」は第1条①に定める瑕疵担保責任を負う。",
    "齟齬があるときは、第3条②の「特約」が優先する。",
    '引用符 "quote" と円記号 \\ を含む第4条③。',
    "鬱憤を晴らすための解除は、第5条の「正当な理由」に当たらない。\n以上。",
]
COPY = JsonSchema({"type": "object", "required": ["text", "article"], "additionalProperties": False,
                   "properties": {"text": {"type": "string", "maxLength": 60}, "article": {"type": "integer", "minimum": 1,
                                                                         "maximum": 20}}})  # fmt: skip


@pytest.mark.parametrize("name", ["vllm", "transformers", "llamacpp"])
def test_gemma_copies_japanese_into_json_under_every_backend(name, tiny):
    """Gemma 3 270M, greedy: four statements (JBE-QA's choice) and four sentences with rare kanji, 「」, ①, 第1条,
    quotes, a backslash and a newline copied into a JSON string. No output holds U+FFFD; every finished output is
    strict JSON that validates (json + jsonschema); every backend gives the same choices, and outlines the same JSON
    as the default. guidance's JSON differs from the first token: it allows only '{"' where the others also allow
    '{' (the forced-span class of test_transformers_masks_differ_only_where_named), and Gemma ranks '{' first."""
    if not (GEMMA / "hf" / "config.json").exists():
        pytest.skip("no Gemma 3 270M: run scripts/setup.sh")
    requests = [Request.chat([{"role": "user", "content": f"正しければ1、誤りなら0とだけ答えよ。{s}"}],
                             Sampling(max_tokens=4), CHOICE) for s in STATEMENTS]  # fmt: skip
    requests += [Request.chat([{"role": "user", "content": f"次の文を text にそのまま書き写し、条番号を article に: {s}"}],
                              Sampling(max_tokens=96), COPY) for s in JAPANESE]  # fmt: skip
    path = _path(name, GEMMA, "gemma-3-270m-q4_k_m.gguf")
    own = [b for b in get_engine(name).constraint_backends if not (name == "vllm" and b == "outlines")]
    got = {b: _answers(name, None if b == own[0] else b, path, requests) for b in own}
    n = len(STATEMENTS)
    for b, results in got.items():
        texts = [r.text for r in results]
        assert not any("\ufffd" in t for t in texts), (b, texts)
        assert texts[:n] == [r.text for r in got[own[0]]][:n], (b, texts[:n])  # the choices
        finished = [(r, res) for r, res in zip(requests, results) if res.finish_reason == "stop"]
        assert len(finished) >= len(requests) - 1, (b, texts)
        for r, res in finished:
            assert r.constraint is not None and violation(r.constraint, res.text) is None, (b, res.text)
        assert any(any(ch in t for ch in "𠮷齟鬱「①条") for t in texts[n:]), texts  # Japanese reached the strings
    if "outlines" in got:  # no class of the mask tests' matters here: the same answers, token for token
        assert [r.text for r in got["outlines"]] == [r.text for r in got[own[0]]]


def test_a_sweep_records_the_backend_each_load_ran(tmp_path, tiny):
    """models.yaml and `run --constraint-backend`: the provenance names the backend each load ran (auto resolved),
    a load under another backend than the default has a store key of its own, and the choices agree."""
    import yaml
    from conftest import DATA, run_cli

    gguf = str(tiny / "gguf" / "tiny-q8_0.gguf")
    models = [{"name": "auto", "backend": "llamacpp", "path": gguf, "max_model_len": 1024},
              {"name": "outl", "backend": "llamacpp", "path": gguf, "max_model_len": 1024,
               "constraint_backend": "outlines"}]  # fmt: skip
    cfg = {"output_dir": str(tmp_path / "out"), "models": models,
           "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(DATA), "shots": [0], "mode": ["constrained"]}}}  # fmt: skip
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    proc = run_cli("sweep", str(tmp_path / "m.yaml"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    loads = {x["run"].split(".")[0]: x for x in json.loads((tmp_path / "out" / "summary.json").read_text())
             ["provenance"]["loads"]}  # fmt: skip
    assert loads["auto"]["constraint_backend"] == "gbnf" and "constraint_backend" not in loads["auto"]["load_options"]
    assert loads["outl"]["constraint_backend"] == loads["outl"]["load_options"]["constraint_backend"] == "outlines"
    assert loads["auto"]["store_fingerprint"] != loads["outl"]["store_fingerprint"]

    def answers(run: str) -> list[str]:
        rows = (tmp_path / "out" / "results" / run / "jbeqa.0shot.constrained.jsonl").read_text().splitlines()
        return [json.loads(x)["output"] for x in rows]

    assert answers(loads["auto"]["run"]) == answers(loads["outl"]["run"])
    proc = run_cli("run", "--backend", "llamacpp", "--model", gguf, "--task", "jbeqa", "--data", str(DATA),
                   "--protocol", "offline-eval", "--mode", "constrained", "--constraint-backend", "guidance",
                   "--limit", "4", "--out", str(tmp_path / "one"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (load,) = json.loads((tmp_path / "one" / "summary.json").read_text())["provenance"]["loads"]
    assert load["constraint_backend"] == "guidance"


@pytest.mark.bench  # a benchmark script, an engine process per engine and library: make test-bench
def test_the_benchmark_runs_side_by_side(tiny):
    """scripts/bench_constraints.py, small: one process per engine x backend, one table."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_constraints.py"), "--models", "tiny",
                           "--engines", "transformers,llamacpp", "--items", "4", "--judge-items", "2",
                           "--rationale-max", "16"], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [x.split(" | ") for x in proc.stdout.splitlines() if x.startswith("| tiny")]
    assert [(r[1], r[2]) for r in rows] == [(e, b) for e in ("transformers", "llamacpp") for b in
                                            get_engine(e).constraint_backends]  # fmt: skip
    assert all(r[10] == "0" and r[12] == "4/4" for r in rows), proc.stdout  # no U+FFFD; the same choices


@pytest.mark.parametrize("name", ["transformers", "llamacpp"])
def test_sampled_answers_keep_the_constraint_under_every_backend(name, tiny):
    """Sampling (temperature 1) takes the masks through the engine's own sampler: transformers' logits processor,
    llama-cpp-python's logits_processor. Every finished answer keeps its constraint."""
    requests = [
        Request.chat(
            [{"role": "user", "content": f"第{i}条「甲」①"}], Sampling(temperature=1.0, seed=i, max_tokens=60), c
        )
        for i, c in enumerate([CHOICE, RIKAI, EVALQ] * 2)
    ]
    for backend in ("guidance", "outlines"):
        results = _answers(name, backend, _path(name, tiny, "tiny-f16.gguf"), requests)
        for r, res in zip(requests, results):
            assert r.constraint is not None and "\ufffd" not in res.text
            if res.finish_reason == "stop":
                assert violation(r.constraint, res.text) is None, (backend, res.text)
        assert sum(res.finish_reason == "stop" for res in results) >= 2, (backend, results)
