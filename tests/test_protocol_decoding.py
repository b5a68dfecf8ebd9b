"""The papers' decoding where a protocol asks for it: a thinking the budget ends gives no answer, scored as none
(run_out: no-answer, the JBE-QA paper's reasoning protocol), and a task whose protocol decodes as the weights' files
say (LegalEval-Q's paper protocol, model_sampling) gets each candidate's generation_config where models.yaml gives
the model no sampling of its own."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from conftest import DATA

import offline_eval
from offline_eval.models.decoding import SamplingSpec
from offline_eval.models.spec import ModelSpec
from offline_eval.models.thinking import settings_of

LONG = "<think>" + "考" * 200 + "</think>1"


def _sweep(tmp: Path, reasoning: dict[str, Any]) -> tuple[list[Any], int]:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "w.bin").write_text("fake weights")
    config = {
        "output_dir": str(tmp / "out"),
        "models": [{"name": "m", "backend": "fake", "path": str(tmp / "w.bin"), "max_model_len": 4096,
                    "engine_args": {"default": LONG}, "reasoning": reasoning}],
        "tasks": {"jbeqa": {"data": str(DATA), "shots": [0], "mode": ["free"], "limit": 4}},
    }  # fmt: skip
    s = offline_eval.sweep(config, progress=False, log=lambda _: None)
    (entry,) = s.runs
    with sqlite3.connect(tmp / "out" / "store.sqlite") as db:
        rows = db.execute("SELECT count(*) FROM outputs").fetchone()[0]
    return s.records(entry.run, entry.setting), rows


def test_a_thinking_the_budget_ends_has_no_answer_under_run_out_no_answer(tmp_path: Path) -> None:
    recs, rows = _sweep(tmp_path / "paper", {"think": True, "budget": 30, "run_out": "no-answer"})
    for r in recs:
        assert (r.output, r.finish_reason, r.parsed, r.pred) == ("", "length", None, 0)
        assert (
            r.reasoning == "考" * 10 and r.reasoning_cut is True and r.scores == {"correct": 1 - r.gold, "faithful": 0}
        )
    assert rows == 4  # the thinking only: no answer was asked for
    # budget forcing (ours) where models.yaml says so; under paper, left unsaid, the paper's no-answer applies
    forced, rows = _sweep(tmp_path / "forced", {"think": True, "budget": 30, "run_out": "force"})
    assert rows == 8 and all(r.reasoning_cut is True and r.finish_reason != "length" for r in forced)


def test_a_protocol_that_decodes_as_the_weights_say_reads_their_generation_config(tmp_path: Path) -> None:
    folder = tmp_path / "hf"
    folder.mkdir()
    cfg = {"do_sample": True, "temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05}
    (folder / "generation_config.json").write_text(json.dumps(cfg), "utf-8")
    m = ModelSpec.model_validate({"name": "q", "backend": "fake", "path": str(folder), "max_model_len": 4096})
    assert settings_of(m, "default").sampling is None  # greedy, as every task asks by default
    assert settings_of(m, "default", True).sampling == SamplingSpec(temperature=0.7, top_p=0.8, top_k=20)
    greedy = m.model_copy(update={"sampling": SamplingSpec()})  # the config's own sampling wins
    assert settings_of(greedy, "default", True).sampling == SamplingSpec()


def test_sampling_the_weights_ask_for_fills_in_what_transformers_would(tmp_path: Path) -> None:
    """do_sample with no temperature or top_k: generate() samples at GenerationConfig's 1.0 and 50; an explicit
    null turns the top-k warper off, as it does there."""
    folder = tmp_path / "hf"
    folder.mkdir()
    m = ModelSpec.model_validate({"name": "q", "backend": "fake", "path": str(folder), "max_model_len": 4096})
    for cfg, want in (
        ({"do_sample": True}, SamplingSpec(temperature=1.0, top_k=50)),
        ({"do_sample": True, "top_p": 0.95}, SamplingSpec(temperature=1.0, top_k=50, top_p=0.95)),
        ({"do_sample": True, "temperature": 0.6, "top_k": None}, SamplingSpec(temperature=0.6)),
        ({"do_sample": False, "temperature": 0.6}, SamplingSpec()),
    ):
        (folder / "generation_config.json").write_text(json.dumps(cfg), "utf-8")
        assert settings_of(m, "default", True).sampling == want, cfg
