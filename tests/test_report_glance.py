"""The report's opening lines are measured from the sweep: best and worst per setting, constant answers,
engine agreement, skipped items and failures."""

from __future__ import annotations

from partial import summary as typed

from offline_eval.metrics.flat import metrics_v3
from offline_eval.report.caveats import cautions, protocols
from offline_eval.report.glance import glance
from offline_eval.results.summary import Summary


def _run(run: str, setting: str, f1: float | None, true_share: float | None = None, skipped: int = 0) -> dict:
    m = {"f1": f1, "n_skipped": skipped}
    if true_share is not None:
        m["answered_true"] = true_share
    return {
        "run": run,
        "model": run.split(".")[0],
        "backend": "llamacpp",
        "setting": setting,
        "task": "jbeqa",
        "primary_metric": "f1",
        "metrics": metrics_v3(m, "f1"),
    }


def test_glance_names_best_worst_constant_answers_and_failures():
    summary = {
        "runs": [
            _run("a.x", "s0", 0.6, 0.5),
            _run("b.x", "s0", 0.4, 1.0, skipped=2),
            _run("c.x", "s0", None),
            _run("a.x", "s1", 0.5),
            _run("b.x", "s1", 0.5),
        ],
        "consistency": [{"identical": 0.9}, {"identical": 1.0}],
        "failures": [{"run": "d.x", "reason": "boom"}],
        "leaderboards": {
            "s0": [_row("a.x", 0.6), _row("b.x", 0.4), _row("c.x", None)],
            "s1": [_row("a.x", 0.5), _row("b.x", 0.5)],
        },
    }
    lines = glance(typed(summary))
    assert lines[0] == "3 runs of 3 models on llamacpp, 2 task settings."
    assert lines[1] == "s0: best a.x (f1 0.600), worst b.x (0.400)."
    assert lines[2] == "s1: all 2 runs score f1 0.500."
    assert lines[3].startswith("Same weights on different engines: 90-100% identical answers over 2 comparisons")
    assert len(lines) == 4  # what a reader must watch for is a caution, each one line
    said = {c.line: c.details for c in cautions(typed(summary))}
    assert list(said) == [
        "Scores to read with care in 1 task setting",
        "2 item(s) did not fit a context length and were skipped",
        "1 run(s) failed",
    ]
    (care,) = said["Scores to read with care in 1 task setting"]
    assert care.startswith("s0: 1 of 2 runs gave the same answer to every item (e.g. b.x)")
    assert said["2 item(s) did not fit a context length and were skipped"] == ["b.x on s0: 2"]
    assert said["1 run(s) failed"] == ["d.x: boom"]
    assert [(c.line, c.details) for c in protocols(typed(summary))] == [("jbeqa: offline-eval", [])]


def test_glance_of_a_setting_nobody_scored():
    summary = {"runs": [_run("a.x", "s", None)], "leaderboards": {"s": [_row("a.x", None)]}}
    assert glance(typed(summary)) == ["1 runs of 1 models on llamacpp, 1 task settings."]
    assert [(c.line, c.details) for c in cautions(typed(summary))] == [
        ("No run scored any item in 1 task setting", ["s"])
    ]


def _row(run: str, value: float | None) -> dict:
    return {"run": run, "metric": "f1", "value": value, **({} if value is not None else {"note": "no items"})}


def test_every_ranking_in_the_report_is_the_sweeps_and_honours_lower_is_better(monkeypatch):
    """The sweep ranks once, the way the task's metric says is better; the glance, the leaderboard matrix and the
    per-task table all read that ranking (here F1 declared lower-is-better, so the lowest is best)."""
    from dataclasses import replace

    from offline_eval.pipeline.analyses.leaderboards import build as leaderboards
    from offline_eval.report.first import leaderboard_matrix
    from offline_eval.results.records import RunEntry
    from offline_eval.tasks.jbeqa.task import JBEQATask
    from offline_eval.tasks.kit.sections import leaderboard

    metrics = tuple(replace(m, higher_is_better=False) if m.name == "f1" else m for m in JBEQATask.metrics)
    monkeypatch.setattr(JBEQATask, "metrics", metrics)
    runs = [_run("a.x", "s0", 0.6), _run("b.x", "s0", 0.4), _run("c.x", "s0", None)]
    entries = [
        RunEntry(**{**r, "variant": "v", "max_model_len": 1, "options": {}, "prompt_format": None, "n_items": 1,
                    "weights_mb": 0.0, "throughput": {}})
        for r in runs
    ]  # fmt: skip
    boards = {k: [row.model_dump(exclude_unset=True) for row in v] for k, v in leaderboards(entries).items()}
    assert [row["run"] for row in boards["s0"]] == ["b.x", "a.x", "c.x"]
    summary = typed({"runs": runs, "leaderboards": boards})
    assert glance(summary)[1].startswith("s0: best b.x (f1 0.400), worst a.x (0.600)")
    assert [row[0] for row in leaderboard_matrix("jbeqa", entries, summary).rows] == ["b.x", "a.x", "c.x"]
    table = leaderboard("jbeqa", JBEQATask.metrics, "", entries, summary)
    assert [(row[0], row[1]) for row in table.rows] == [("1", "b.x"), ("2", "a.x"), ("–", "c.x")]


def _thinking_summary(q4_64: str) -> Summary:
    def run(variant: str, tokens: float) -> dict:  # type: ignore[type-arg]
        reasoning = {"items": 1, "thinking_tokens": int(tokens), "thinking_tokens_per_item": tokens, "cut_by_budget": 0}
        return {"run": f"m.v.{variant}.ctx4096", "variant": variant, "model": "m", "setting": "s",
                "metrics": {}, "throughput": {"reasoning": reasoning}}  # fmt: skip

    runs = [run("bf16.think16", 16.0), run("bf16.think64", 63.5), run("q4.think16", 16.0), run("q4.think64", 64.0)]
    verdicts = {"bf16.think16": "non-inferior", "q4.think16": "inconclusive", "q4.think64": q4_64}
    return typed(
        {
            "runs": runs,
            "noninferiority": [
                {
                    "model": "m",
                    "reference": "m.v.bf16.think64.ctx4096",
                    "comparisons": [{"run": f"m.v.{v}.ctx4096", "verdict": w} for v, w in verdicts.items()],
                }
            ],
        }
    )


def test_the_first_screen_says_how_much_more_thinking_a_variant_needs_to_match_the_reference():
    from offline_eval.report.glance import thinking_lines

    assert thinking_lines(_thinking_summary("non-inferior")) == [
        "Thinking: m q4 needs 4.0x the thinking tokens of bf16 to match m.v.bf16.think64.ctx4096 (64 against 16 "
        "per item)."
    ]
    assert thinking_lines(_thinking_summary("inferior")) == [
        "Thinking: m q4 matches m.v.bf16.think64.ctx4096 at no budget tried (up to 64 thinking tokens per item)."
    ]
    assert thinking_lines(typed({"runs": [], "noninferiority": []})) == []
