"""The report's opening lines are measured from the sweep: best and worst per setting, constant answers,
engine agreement, skipped items and failures."""

from __future__ import annotations

from offline_eval.report.glance import glance


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
        "metrics": m,
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
    }
    lines = glance(summary)
    assert lines[0] == "3 runs of 3 models on llamacpp, 2 task settings."
    assert lines[1].startswith("s0: best a.x (f1 0.600), worst b.x (0.400); 1 of 2 runs gave the same answer")
    assert "(e.g. b.x)" in lines[1]
    assert lines[2] == "s1: all 2 runs score f1 0.500."
    assert lines[3].startswith("Same weights on different engines: 90-100% identical answers over 2 comparisons")
    assert lines[4].startswith("2 item(s) did not fit")
    assert lines[5] == "1 run(s) failed: see 'Failed runs' at the end."


def test_glance_of_a_setting_nobody_scored():
    assert glance({"runs": [_run("a.x", "s", None)]})[1] == "s: no run scored any item."
