"""`offline-eval compare` for real: the tiny model on llama.cpp, q8_0 in one folder and q4_0 in the other (runs of
other names, paired by --map); and the v3 folder kept in tests/fixtures (made before schema v4) against a sweep
made now of the same weights."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import DATA, ROOT, run_cli

pytestmark = pytest.mark.engine


def _sweep(tmp: Path, name: str, models: list[dict], **jbeqa: object) -> Path:
    cfg = {
        "output_dir": str(tmp / name),
        "models": models,
        "tasks": {
            "jbeqa": {"protocol": "offline-eval", "data": str(DATA), "shots": [0], "mode": ["constrained"], **jbeqa}
        },
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    got = run_cli("sweep", str(path))
    assert got.returncode == 0, got.stderr
    return tmp / name


def test_q8_0_against_q4_0_on_llamacpp(tmp_path, tiny) -> None:  # type: ignore[no-untyped-def]
    import offline_eval
    from offline_eval.pipeline.analyses.verdicts import paired_verdict
    from offline_eval.tasks import make_task

    def model(q: str) -> list[dict]:
        return [{"name": "tiny", "backend": "llamacpp", "path": str(tiny / "gguf" / f"tiny-{q}.gguf"),
                 "max_model_len": 1024, "variants": {q: {}}}]  # fmt: skip

    old, new = _sweep(tmp_path, "q8", model("q8_0")), _sweep(tmp_path, "q4", model("q4_0"))
    unpaired = offline_eval.compare(old, new)
    assert not unpaired.settings and unpaired.unmatched_old == ["tiny.llamacpp.q8_0.ctx1024"]
    pair = {"tiny.llamacpp.q8_0.ctx1024": "tiny.llamacpp.q4_0.ctx1024"}
    c = offline_eval.compare(old, new, mapping=pair, margins={"accuracy": 0.1})
    [s] = c.settings
    assert s.n_items == 26 and s.verdict in ("regressed", "non-inferior", "improved", "inconclusive")
    # the verdicts' own statistics on the two folders' records
    a, b = offline_eval.load(old), offline_eval.load(new)
    task = make_task("jbeqa", {"protocol": "offline-eval", "data": str(DATA)})
    ref = paired_verdict(task, b.records(*pair.values(), s.setting), a.records(*pair, s.setting), 0.1)
    assert s.statistics == ref
    flips = {(f.id, f.direction) for f in c.flips}
    old_right = {r.id: r.scores["correct"] for r in a.records(*pair, s.setting)}
    new_right = {r.id: r.scores["correct"] for r in b.records(*pair.values(), s.setting)}
    assert flips == {
        (i, "right->wrong" if old_right[i] else "wrong->right") for i in old_right if old_right[i] != new_right[i]
    }
    assert {x.what for x in c.changes} >= {"weights digest"} and not s.same_inputs
    got = run_cli("compare", str(old), str(new), "--map", "=".join(*pair.items()), "--out", str(tmp_path / "c"))
    assert got.returncode == 0 and f"{s.verdict}" in got.stdout, got.stderr


def test_a_v3_folder_compared_with_a_new_one(tmp_path, tiny) -> None:  # type: ignore[no-untyped-def]
    import offline_eval

    old = tmp_path / "v3"
    shutil.copytree(ROOT / "tests" / "fixtures" / "v3-demo", old)
    assert json.loads((old / "summary.json").read_text("utf-8"))["schema_version"] == 3
    models = [{"name": "tiny-gguf", "backend": "llamacpp", "path": str(tiny / "gguf" / "tiny-f16.gguf"),
               "max_model_len": 1024, "variants": {"f16": {"file": str(tiny / "gguf" / "tiny-f16.gguf")}}}]  # fmt: skip
    old_data = ROOT / "tests" / "fixtures" / "demo-data" / "jbeqa"  # data/jbeqa as the v3 folder read it
    new = _sweep(
        tmp_path,
        "now",
        models,
        data=str(old_data),
        limit=4,
        shots=[0, 4],
        mode=["constrained", "free", "logprob"],
        max_tokens=8,
    )
    c = offline_eval.compare(old, new, verify=False)  # this checkout's scorer is not the one the v3 folder used
    got = {s.setting: s for s in c.settings if s.verdict != "missing"}
    assert set(got) == {f"jbeqa.{k}shot.{m}" for k in (0, 4) for m in ("constrained", "free", "logprob")}
    # the other tasks the v3 sweep ran, which this one left out, are missing (and fail --fail-on)
    assert {s.setting for s in c.settings if s.verdict == "missing"} == {
        "legalevalq", "legalrikai.amendexp", "legalrikai.reqrev", "legalrikai.riskrev", "legalrikai.statrev"
    }  # fmt: skip
    for s in got.values():
        # the same weights, template and prompts, greedy on the same engine: the same answers
        assert s.n_items == 4 and s.same_inputs and s.answers_differ == 0 and not s.engine_or_tool_change, s
    assert "tiny-gguf.llamacpp.q4_0.ctx1024" in c.unmatched_old  # the new sweep ran f16 only
