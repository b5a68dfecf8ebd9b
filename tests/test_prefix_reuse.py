"""Judge and evaluator prompts put the candidate's response last, so the prompts of one item share their prefix;
the engines count the prompt tokens they actually computed, and a sweep reports it with its stage timings."""

from __future__ import annotations

import json
import os

import pytest
import yaml
from conftest import ROOT

from offline_eval.inference.requests import Request, Sampling

RIKAI = ROOT / "data" / "legalrikai"


def _shared(a: str, b: str) -> int:
    return len(os.path.commonprefix([a, b]))


def test_judge_prompt_puts_the_response_last():
    from offline_eval.tasks.legalrikai import prompts
    from offline_eval.tasks.legalrikai.schema import load_items
    from offline_eval.tasks.legalrikai.task import judge_gold

    item = load_items("amendexp", str(RIKAI / "amendexp.jsonl"))[0]
    original, gold = prompts.task_prompt(item), judge_gold(item)
    a = prompts.judge_prompt(item, original, "回答その一", gold, 30)
    b = prompts.judge_prompt(item, original, "別の回答", gold, 30)
    assert a.endswith("回答その一") and b.endswith("別の回答")
    shared = a[: _shared(a, b)]
    # Everything the candidates have in common comes before the first character that differs.
    for part in ("# 評価基準", "# 出力形式", original, gold, prompts.instruction(item)):
        assert part in shared, part[:40]
    assert len(a) - len(shared) == len("回答その一")


def test_evaluator_message_puts_the_answer_last():
    from offline_eval.tasks.legalevalq import evaluator as ev

    a, b = ev.user_message("質問文", "答えA", "参考資料"), ev.user_message("質問文", "別の答え", "参考資料")
    assert a.endswith("答えA") and b.endswith("別の答え")
    assert "JSON" in a[: _shared(a, b)] and "参考資料" in a[: _shared(a, b)]


def test_engines_count_the_prompt_tokens_they_compute(engine):  # type: ignore[no-untyped-def]
    """llama.cpp re-evaluates what follows the last batch start (every n_ubatch tokens) within the prefix shared
    with the previous prompt, vLLM's prefix cache serves whole blocks of it, transformers computes every token."""
    system = "次の記述が民法の規定に照らして正しいかを判断してください。" * 12
    reqs = [
        Request.chat(
            [{"role": "system", "content": system}, {"role": "user", "content": f"記述{i}：契約は成立する。"}],
            Sampling(max_tokens=2),
        )
        for i in (1, 2)
    ]
    a, b = engine.encode(reqs)
    shared = len(os.path.commonprefix([a, b]))
    assert 0 < shared < len(b)
    engine.generate(reqs[:1], [a])
    before = (engine.prompt_count.submitted, engine.prompt_count.computed)
    engine.generate(reqs[1:], [b])
    submitted, computed = engine.prompt_count.submitted - before[0], engine.prompt_count.computed - before[1]
    assert submitted == len(b)
    if engine.name == "llamacpp":
        step = engine.llm.context_params.n_ubatch
        assert computed == len(b) - shared // step * step, (computed, len(b), shared, step)
    elif engine.name == "vllm":
        block = engine.llm.llm_engine.vllm_config.cache_config.block_size
        assert computed == len(b) - shared // block * block, (computed, len(b), shared, block)
    else:
        assert computed == len(b)


@pytest.mark.slow
def test_sweep_reports_stage_timings_and_the_judges_prefix_reuse(tmp_path):
    """Two fake candidates answer one item per LegalRikai sub-task; one fake judge (which, like llama.cpp, keeps
    the previous prompt) judges both. Each item's two judge prompts differ only in the last characters, so the
    judge computes about half the prompt tokens it is handed."""
    from offline_eval.pipeline.config import load_config
    from offline_eval.pipeline.options import SweepOptions
    from offline_eval.pipeline.orchestrate import run_sweep
    from offline_eval.runtime.timings import ENGINE_STAGES

    weights = tmp_path / "w.bin"
    weights.write_text("fake weights")
    fake = {"backend": "fake", "path": str(weights), "max_model_len": 65536}
    cfg = tmp_path / "m.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "output_dir": str(tmp_path / "out"),
                "models": [
                    {"name": "yes", **fake, "engine_args": {"default": "はい"}},
                    {"name": "no", **fake, "engine_args": {"default": "いいえ"}},
                ],
                "tasks": {
                    "legalrikai": {
                        "protocol": "offline-eval",
                        "data": str(RIKAI),
                        "limit": 1,
                        "judges": [{"name": "judge", **fake}],
                    }
                },
            }
        )
    )
    summary = run_sweep(load_config(cfg), SweepOptions(source=str(cfg), progress=False, log=lambda _: None)).to_json()
    t = summary["timings"]
    kinds = [s["stage"] for s in t["stages"]]
    assert kinds.count("phase") == 8 and kinds.count("evaluation") == 1 and kinds.count("engine_load") == 2
    assert {"data", "scoring", "close", "records", "summary", "report"} <= set(kinds)
    engine = sum(s["s"] for s in t["stages"] if s["stage"] in ENGINE_STAGES)
    assert abs(t["fixed_s"] - (t["total_s"] - engine)) < 0.01 and sum(s["s"] for s in t["stages"]) <= t["total_s"]
    judged = t["prefix_reuse"]["evaluators"]
    (evaluation,) = [s for s in t["stages"] if s["stage"] == "evaluation"]
    assert (
        evaluation["prefix_reuse"] == judged
        and judged["submitted"] == summary["runs"][0]["throughput"]["evaluator"]["prefix_reuse"]["submitted"]
    )
    assert 1.9 < judged["ratio"] < 2.5, judged  # (the four items share only the system prompt and the header)
    on_disk = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert on_disk["timings"]["by_stage"]["report"] == t["by_stage"]["report"] > 0
