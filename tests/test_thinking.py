"""Reasoning models on the fake engine (issue 31): the thinking forms a model writes (a block that closes, one that
never closes, none, a closing tag inside the answer, two blocks), a served reply's reasoning field, a sweep killed
between thinking and answering, the budget as runs, the model's sampling, and the keys of every other request
left as they were."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA

import offline_eval
from offline_eval.inference.backends.fake_backend import FakeBackend
from offline_eval.inference.backends.openai.reply import Reply
from offline_eval.inference.backends.spec import LoadSpec
from offline_eval.inference.constraints import Choice
from offline_eval.inference.requests import Phase, Request, Result, Sampling, legacy_request_key, request_key
from offline_eval.inference.runner import Runner
from offline_eval.inference.store import Row, Store
from offline_eval.models.spec import ReasoningSpec
from offline_eval.models.thinking import ModelSettings, planned, solve, split_block

CLOSE = len(b"</think>")


def _sweep(tmp: Path, turn: str, mode: str = "constrained", **model: Any) -> offline_eval.Summary:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "w.bin").write_text("fake weights")
    config = {
        "output_dir": str(tmp / "out"),
        "models": [
            {
                "name": "m",
                "backend": "fake",
                "path": str(tmp / "w.bin"),
                "max_model_len": 4096,
                "engine_args": {"default": turn},
                **model,
            }
        ],
        "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(DATA), "shots": [0], "mode": [mode], "limit": 4}},
    }
    return offline_eval.sweep(config, progress=False, log=lambda _: None)


def _only(summary: offline_eval.Summary) -> tuple[Any, list[Any]]:
    (entry,) = summary.runs
    return entry, summary.records(entry.run, entry.setting)


def test_a_block_that_closes_is_thinking_and_only_the_answer_is_parsed(tmp_path: Path) -> None:
    entry, recs = _only(_sweep(tmp_path, "<think>条文を読む。</think>1", reasoning={"think": True, "budget": 64}))
    for r in recs:
        assert (r.output, r.parsed, r.reasoning, r.reasoning_cut) == ("1", 1, "条文を読む。", False)
        assert r.reasoning_tokens == len("条文を読む。".encode()) + CLOSE  # the fake's tokens are bytes
    assert entry.throughput.reasoning is not None
    assert entry.throughput.reasoning.model_dump(exclude_unset=True) == {
        "items": 4,
        "thinking_tokens": 4 * (len("条文を読む。".encode()) + CLOSE),
        "thinking_tokens_per_item": len("条文を読む。".encode()) + CLOSE,
        "cut_by_budget": 0,
        # Each item answers right after it thought (the fake keeps one sequence, as llama.cpp): of the answer's
        # prompt only the thinking and the closing delimiter are computed.
        "answer_prompt_computed": round(
            4 * (len("条文を読む。".encode()) + CLOSE) / sum(r.prompt_tokens for r in recs), 3
        ),
    }
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "| thinking tokens/item | thinking cut by budget |" in report
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "条文を読む。" in page and "cut by the budget" in page  # the item browser's collapsed thinking


def test_a_block_that_never_closes_is_cut_at_the_budget_and_counted(tmp_path: Path) -> None:
    entry, recs = _only(_sweep(tmp_path, "<think>" + "考" * 200, mode="free", reasoning={"think": True, "budget": 30}))
    for r in recs:
        assert r.reasoning == "考" * 10 and r.reasoning_tokens == 30 and r.reasoning_cut is True
        # Forced closed, the fake answers with the rest of its turn: a thinking block, which no parser takes.
        assert r.parsed is None and r.scores["faithful"] == 0
    assert entry.throughput.reasoning is not None and entry.throughput.reasoning.cut_by_budget == 4
    assert "thinking tokens/item" in (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert entry.metrics["faithfulness"] == 0.0


def test_no_block_a_closing_tag_in_the_answer_and_two_blocks(tmp_path: Path) -> None:
    think = {"think": True, "budget": 64}
    _, recs = _only(_sweep(tmp_path / "none", "1", reasoning=think))
    assert [(r.reasoning, r.output) for r in recs] == [("1", "1")] * 4  # it ended its turn inside the block
    _, recs = _only(_sweep(tmp_path / "tag", "<think>x</think>答え</think>", mode="free", reasoning=think))
    assert [(r.reasoning, r.output, r.parsed) for r in recs] == [("x", "答え</think>", None)] * 4
    _, recs = _only(_sweep(tmp_path / "two", "<think>a</think><think>b</think>1", mode="free", reasoning=think))
    assert [(r.reasoning, r.output, r.parsed) for r in recs] == [("a", "<think>b</think>1", None)] * 4


def test_a_served_reply_s_reasoning_in_both_servers_forms_and_think_tags_in_content() -> None:
    vllm = {"choices": [{"message": {"role": "assistant", "content": "1", "reasoning": "考えた"}}]}
    llama = {"choices": [{"message": {"content": "0", "reasoning_content": "読んだ"}}],
             "usage": {"completion_tokens": 9, "completion_tokens_details": {"reasoning_tokens": 7}}}  # fmt: skip
    assert Reply(vllm, "http://h", "/chat/completions").answer(vllm["choices"][0]) == ("1", "考えた")
    reply = Reply(llama, "http://h", "/chat/completions")
    assert reply.answer(llama["choices"][0]) == ("0", "読んだ") and reply.reasoning_tokens() == 7
    bad = {"choices": [{"message": {"content": "1", "reasoning_content": 3}}]}
    with pytest.raises(Exception, match="reasoning is not a string"):
        Reply(bad, "http://h", "/chat/completions").answer(bad["choices"][0])
    tagged = split_block(Result(text="<think>\n考える\n</think>\n\n1"), "<think>", "</think>")
    assert (tagged.reasoning, tagged.text) == ("\n考える\n", "1")
    unclosed = split_block(Result(text="<think>考え続ける"), "<think>", "</think>")
    assert (unclosed.text, unclosed.finish_reason, unclosed.reasoning_cut) == ("", "length", True)
    assert split_block(Result(text="1"), "<think>", "</think>").reasoning is None
    ran_out = split_block(Result(text="", finish_reason="length", reasoning="考え"), "<think>", "</think>")
    assert ran_out.reasoning_cut is True  # the server's length ended the thinking: no answer, counted as cut


def _phase(n: int) -> Phase:
    reqs = [
        Request.chat([{"role": "user", "content": f"問{i}"}], Sampling(max_tokens=4), Choice(("0", "1")))
        for i in range(n)
    ]
    return Phase("p", reqs, [str(i) for i in range(n)])


def test_a_sweep_killed_between_thinking_and_answering_generates_only_the_answers(tmp_path: Path) -> None:
    (tmp_path / "w").write_text("w")
    spec = LoadSpec(name="f", backend="fake", path=str(tmp_path / "w"), engine_args={"default": "<think>a</think>1"})
    settings = ModelSettings(reasoning=ReasoningSpec(think=True, budget=32))
    store = Store(tmp_path / "s.db")
    runner = Runner(FakeBackend(spec), store, "v", progress=False)
    _, first = runner.run(planned(_phase(5), settings))  # the thinking phase, then the kill
    assert (first.n_generated, first.n_cached) == (5, 0)
    results, stats = solve(runner, _phase(5), settings)
    assert (stats.n_generated, stats.n_cached) == (5, 5)  # the five answers; the thinking from the store
    assert [r.text for r in results] == ["1"] * 5 and {r.reasoning for r in results} == {"a"}
    _, again = solve(runner, _phase(5), settings)
    assert (again.n_generated, again.n_cached) == (0, 10)


def test_an_item_whose_budget_cannot_fit_follows_the_overflow_policy(tmp_path: Path) -> None:
    (tmp_path / "w").write_text("w")
    spec = LoadSpec(name="f", backend="fake", path=str(tmp_path / "w"), max_model_len=64)
    runner = Runner(FakeBackend(spec), Store(tmp_path / "s.db"), "v", progress=False)
    prompt_bytes = len(
        FakeBackend(spec)
        .render(planned(_phase(1), ModelSettings(reasoning=ReasoningSpec(think=True, budget=1))).requests[0])
        .encode()
    )
    fits = 64 - prompt_bytes - 4 - CLOSE  # the prompt, the budget, the answer and the closing delimiter
    ok, _ = solve(runner, _phase(1), ModelSettings(reasoning=ReasoningSpec(think=True, budget=fits)))
    over, stats = solve(runner, _phase(1), ModelSettings(reasoning=ReasoningSpec(think=True, budget=fits + 1)))
    assert ok[0].finish_reason == "stop" and over[0].finish_reason == "overflow"
    assert stats.n_overflow == 1


def test_a_list_of_budgets_is_one_run_each_and_the_largest_full_precision_one_is_the_reference(
    tmp_path: Path,
) -> None:
    summary = _sweep(
        tmp_path,
        "<think>" + "考" * 100,
        variants={"bf16": {"dtype": "bfloat16"}, "q4": {"reasoning": {"budget": [6]}}},
        reasoning={"think": True, "budget": [9, 30]},
    )
    tokens = {e.run: e.throughput.reasoning.thinking_tokens_per_item for e in summary.runs if e.throughput.reasoning}
    assert tokens == {"m.fake.bf16.think9.ctx4096": 9, "m.fake.bf16.think30.ctx4096": 30, "m.fake.q4.ctx4096": 6}
    assert [v.reference for v in summary.noninferiority] == ["m.fake.bf16.think30.ctx4096"]
    assert (tmp_path / "out" / "plots" / "thinking_jbeqa.png").is_file()  # score against thinking tokens
    assert "score against thinking tokens" in (tmp_path / "out" / "report.md").read_text(encoding="utf-8")


def test_the_model_s_sampling_reaches_every_request_and_its_key(tmp_path: Path) -> None:
    _sweep(tmp_path, "1", sampling={"temperature": 1.0, "top_p": 0.95, "top_k": 20, "seed": 7})
    with sqlite3.connect(tmp_path / "out" / "store.sqlite") as db:
        samplings = {
            json.dumps(json.loads(r)["sampling"], sort_keys=True) for (r,) in db.execute("SELECT request FROM outputs")
        }
    assert samplings == {
        json.dumps({"max_tokens": 4, "seed": 7, "temperature": 1.0, "top_k": 20, "top_p": 0.95}, sort_keys=True)
    }


def test_a_request_without_thinking_or_sampling_keeps_its_key() -> None:
    """Pinned before reasoning models existed: every stored output of an older sweep is still found (under the
    legacy key, with the variant's name, that the runner looks up where the current one finds nothing)."""
    r = Request.chat([{"role": "user", "content": "問題"}], Sampling(max_tokens=4), Choice(("0", "1")), shared_chars=2)
    assert (
        legacy_request_key("fp", "v", r, "generate")
        == "a9892890287811fe3b535143aa269de1135bd5d97cfc086cb8f2db481048ed65"
    )
    r2 = Request(prompt="x", sampling=Sampling(temperature=0.7, seed=3, top_p=0.9))
    assert (
        legacy_request_key("fp", "v", r2, "choice_logprobs", ("0", "1"))
        == "e0bc9321189c4aac99ffb949e447382858ed6618573b9fc4943e220da9d02485"
    )
    # the current key, pinned from 2026-12-05: no variant name in it
    assert request_key("fp", r, "generate") == "52af94e2cf89414e98e7de1fbd10fc503fd2fa84ccf67b2638474b566bd1c8c0"
    phase = _phase(2)
    assert planned(phase, ModelSettings()) is phase


def test_a_sweep_without_reasoning_writes_no_thinking_anywhere(tmp_path: Path) -> None:
    entry, recs = _only(_sweep(tmp_path, "1"))
    assert entry.throughput.reasoning is None and all("reasoning" not in r.to_json() for r in recs)
    assert "thinking" not in (tmp_path / "out" / "report.md").read_text(encoding="utf-8")


def test_a_reasoning_judge_thinks_then_answers_under_its_json_schema(tmp_path: Path) -> None:
    (tmp_path / "w.bin").write_text("fake weights")
    judge = {
        "name": "j",
        "backend": "fake",
        "path": str(tmp_path / "w.bin"),
        "max_model_len": 65536,
        "engine_args": {"default": '<think>基準を読む。</think>{"score": 2}'},
        "reasoning": {"think": True, "budget": 64},
    }
    config = {
        "output_dir": str(tmp_path / "out"),
        "models": [{"name": "m", "backend": "fake", "path": str(tmp_path / "w.bin"), "max_model_len": 65536}],
        "tasks": {
            "legalrikai": {
                "protocol": "offline-eval",
                "data": str(DATA.parent / "legalrikai"),
                "limit": 1,
                "judges": [judge],
            }
        },
    }
    summary = offline_eval.sweep(config, progress=False, log=lambda _: None)
    assert summary.failures == []
    scored = [r for e in summary.runs for r in summary.records(e.run, e.setting) if not r.skipped]
    assert scored and all(r.scores for r in scored)
    with sqlite3.connect(tmp_path / "out" / "store.sqlite") as db:
        rows = [
            (json.loads(q), t)
            for q, t in db.execute("SELECT request, text FROM outputs WHERE variant LIKE 'evaluator:%'")
        ]
    thinking = [t for q, t in rows if q.get("prefill") == "<think>"]
    answers = [q for q, _ in rows if (q.get("prefill") or "").endswith("</think>")]
    assert thinking and set(thinking) == {"基準を読む。"} and len(answers) == len(thinking)
    assert all(q["constraint"] is not None for q in answers)  # the judge's schema applies after the thinking


def test_sampling_model_takes_the_makers_settings_and_the_summary_says_which(tmp_path: Path) -> None:
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "generation_config.json").write_text(
        json.dumps({"do_sample": True, "temperature": 0.6, "top_p": 0.95, "top_k": 20}), encoding="utf-8"
    )
    config = {
        "output_dir": str(tmp_path / "out"),
        "models": [{"name": "m", "backend": "fake", "path": str(folder), "sampling": "model", "seed": 5}],
        "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(DATA), "limit": 2}},
    }
    summary = offline_eval.sweep(config, progress=False, log=lambda _: None)
    (load,) = summary.provenance.loads
    assert load.decoding == {
        "sampling": {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0.0, "seed": None},
        "reasoning": None,
    }
    with sqlite3.connect(tmp_path / "out" / "store.sqlite") as db:
        (s,) = {
            json.dumps(json.loads(r)["sampling"], sort_keys=True) for (r,) in db.execute("SELECT request FROM outputs")
        }
    assert json.loads(s) == {"max_tokens": 4, "seed": 5, "temperature": 0.6, "top_k": 20, "top_p": 0.95}
    (folder / "generation_config.json").write_text(json.dumps({"do_sample": False, "temperature": 0.6}))
    from offline_eval.models.thinking import recommended

    assert recommended(str(folder)).temperature == 0.0  # greedy where the makers say not to sample


def test_sampling_model_reads_a_gguf_s_general_sampling_keys(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    from offline_eval.models.thinking import recommended

    path = tmp_path / "m.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_float32("general.sampling.temp", 0.7)
    w.add_float32("general.sampling.top_p", 0.8)
    w.add_int32("general.sampling.top_k", 40)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    got = recommended(str(path))
    assert (round(got.temperature, 6), round(got.top_p, 6), got.top_k, got.min_p) == (0.7, 0.8, 40, 0.0)


def test_a_store_from_before_reasoning_models_gains_the_column_and_a_read_only_one_reads_none(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    with sqlite3.connect(db) as c:  # the outputs table as the version before this one made it
        c.execute(
            "CREATE TABLE outputs (key TEXT PRIMARY KEY, model TEXT NOT NULL, variant TEXT NOT NULL, request TEXT "
            "NOT NULL, text TEXT NOT NULL, finish_reason TEXT NOT NULL, prompt_tokens INTEGER NOT NULL, "
            "output_tokens INTEGER NOT NULL, latency_s REAL NOT NULL, logprobs TEXT, created REAL NOT NULL, "
            "focused INTEGER NOT NULL DEFAULT 0)"
        )
        c.execute("INSERT INTO outputs VALUES ('old', 'm', 'v', '{}', '1', 'stop', 3, 1, 0.0, NULL, 0.0, 0)")
    ro = Store(db, read_only=True)
    assert ro.get_many(["old"])["old"].reasoning is None
    ro.db.close()
    store = Store(db)
    store.put_many([Row("new", "m", "v", "{}", Result(text="1", reasoning="考えた", reasoning_tokens=4))])
    got = store.get_many(["old", "new"])
    assert (got["old"].text, got["old"].reasoning) == ("1", None)
    assert (got["new"].reasoning, got["new"].reasoning_tokens, got["new"].reasoning_cut) == ("考えた", 4, False)
    store.close()
