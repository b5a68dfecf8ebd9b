"""The first screen answers which variant to deploy (issue 64, item 6): a row per model, the cheapest variant
non-inferior to its reference on every setting, or the setting that stops the cheaper one, with its cost."""

from __future__ import annotations

from conftest import ROOT

from offline_eval.report.first import deploy_table
from offline_eval.tasks import read_summary

FIXTURE = ROOT / "tests" / "fixtures" / "v3-demo" / "summary.json"


def rows_by_model(summary):  # type: ignore[no-untyped-def]
    t = deploy_table(summary)
    assert t is not None and t.title == "Which variant to deploy"
    return {row[0]: dict(zip(t.header, row)) for row in t.rows}


def test_the_reference_is_deployed_where_the_cheaper_variant_is_inconclusive_and_the_setting_that_stops_it_is_named():
    rows = rows_by_model(read_summary(FIXTURE))
    assert set(rows) == {"gemma-gguf (llamacpp)", "tiny-gguf (llamacpp)"}
    tiny = rows["tiny-gguf (llamacpp)"]
    # q4_0 (0.35 MB) is inconclusive on every setting; the first, in order, stops it: f16, the reference, stays
    assert tiny["deploy"] == "f16 ctx1024" and tiny["why"].startswith("the reference")
    assert tiny["a cheaper variant stopped by"] == "q4_0 ctx1024: jbeqa.0shot.constrained (inconclusive)"
    assert tiny["weights MB"] == "1"
    assert rows["gemma-gguf (llamacpp)"]["why"] == "no other variant to compare"


def test_the_cheapest_variant_non_inferior_on_every_setting_is_deployed():
    summary = read_summary(FIXTURE)
    [tiny] = [m for m in summary.noninferiority if m.model == "tiny-gguf"]
    tiny.comparisons = [c.model_copy(update={"verdict": "non-inferior"}) for c in tiny.comparisons]
    row = rows_by_model(summary)["tiny-gguf (llamacpp)"]
    n = len({c.setting for c in tiny.comparisons})
    assert row["deploy"] == "q4_0 ctx1024" and row["why"] == f"non-inferior to the reference on all {n} settings"
    assert row["a cheaper variant stopped by"] == "–" and row["weights MB"] == "0"
    # one setting short of non-inferior is enough to stop it
    tiny.comparisons[-1] = tiny.comparisons[-1].model_copy(update={"verdict": "inferior"})
    row = rows_by_model(summary)["tiny-gguf (llamacpp)"]
    assert row["deploy"] == "f16 ctx1024"
    assert row["a cheaper variant stopped by"] == f"q4_0 ctx1024: {tiny.comparisons[-1].setting} (inferior)"
