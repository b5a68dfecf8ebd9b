"""LegalRikai's two protocols (docs/tasks/legalrikai.md, "Protocol"): the judge-human MAE on the paper's scale (each
criterion's points, Table 8) beside [0, 1]; under `paper` an answer cap sized to the contract and no cut answer
judged; under `offline-eval` every request byte for byte what earlier sweeps stored; a protocol that is neither is
one line naming the file and the field."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, TINY, run_cli
from sklearn.metrics import mean_absolute_error

from offline_eval.inference.requests import request_json
from offline_eval.results.records import RunEntry, RunKey
from offline_eval.tasks.legalrikai.human.agreement import agreement, read_human_scores
from offline_eval.tasks.legalrikai.record import LegalRikaiRecord
from offline_eval.tasks.legalrikai.report import agreement_tables
from offline_eval.tasks.legalrikai.schema import RevisionItem, StatRevItem
from offline_eval.tasks.legalrikai.sweepreport import LegalRikaiReport, MaeCell
from offline_eval.tasks.legalrikai.task import LegalRikaiTask, average_scores

DATA = ROOT / "data" / "legalrikai"
RUN = "m.fake.x.ctx1"
SHORT = "## 第1条（目的）\n本契約は、業務の委託について定める。\n"


# ---- the MAE on the criterion's points (the paper's Table 8) and on [0, 1]


def _entry() -> RunEntry:
    return RunEntry(
        model="m",
        variant="x",
        backend="fake",
        run=RUN,
        max_model_len=1,
        task="legalrikai",
        setting="legalrikai.statrev",
        options={"subtask": "statrev"},
        prompt_format="plain",
        n_items=3,
        primary_metric="score",
        metrics={},
        weights_mb=0.0,
        throughput={},
    )


def _record(i: str, scores: dict[str, int]) -> LegalRikaiRecord:
    judges = {"J": {"scores": scores}}
    return LegalRikaiRecord(
        id=i,
        subtask="statrev",
        input="full",
        output="",
        finish_reason="stop",
        prompt_tokens=0,
        output_tokens=0,
        gold="",
        judges=judges,
        scores=average_scores("statrev", judges),
    )


def test_mae_in_points_as_the_paper_and_on_unit_scale_by_hand_and_by_sklearn(tmp_path):
    # IF (3 points, 1-3): judge 3, 1, 2 against one annotator's 1, 1, 3.
    #   points: |3-1| + |1-1| + |2-3| = 2 + 0 + 1 = 3, / 3 = 1.0
    #   [0, 1]: judge 1, 0, 0.5 against 0, 0, 1: 1 + 0 + 0.5 = 1.5, / 3 = 0.5
    # TA (3 points): judge 2, 2, 3 against annotators A 1, 2, 3 and B 2, 2, 2, whose mean is 1.5, 2, 2.5.
    #   points: 0.5 + 0 + 0.5 = 1, / 3 = 1/3;  [0, 1]: half of it, 1/6
    # SC (2 points, 1-2): judge 2, 1, 2 against 1, 1, 2: points 1/3, and [0, 1] the same, 1/3.
    judge = {"s1": {"IF": 3, "TA": 2, "SC": 2}, "s2": {"IF": 1, "TA": 2, "SC": 1}, "s3": {"IF": 2, "TA": 3, "SC": 2}}
    a = {"s1": {"IF": 1, "TA": 1, "SC": 1}, "s2": {"IF": 1, "TA": 2, "SC": 1}, "s3": {"IF": 3, "TA": 3, "SC": 2}}
    b = {"s1": {"TA": 2}, "s2": {"TA": 2}, "s3": {"TA": 2}}
    rows = [f"statrev,{i},m,{c},{v},A" for i, cs in a.items() for c, v in cs.items()]
    rows += [f"statrev,{i},m,{c},{v},B" for i, cs in b.items() for c, v in cs.items()]
    p = tmp_path / "human.csv"
    p.write_text("task,item_id,model,criterion,score,annotator\n" + "\n".join(rows) + "\n", encoding="utf-8")
    full = {i: {**s, "CP": 1, "WA": 1} for i, s in judge.items()}  # the judge scores every criterion
    recs = [_record(i, full[i]) for i in ("s1", "s2", "s3")]
    res = agreement(read_human_scores(str(p)), [_entry()], {RunKey(RUN, "legalrikai.statrev"): recs}, ["J"], str(p))

    want = {"IF": (1.0, 0.5), "TA": (1 / 3, 1 / 6), "SC": (1 / 3, 1 / 3)}
    human_points = {
        "IF": [1, 1, 3],
        "TA": [1.5, 2, 2.5],
        "SC": [1, 1, 2],
    }
    for c, (points, unit) in want.items():
        for j in ("J", "Avg"):  # one judge: Avg is that judge
            cell = res.mae["statrev"][j][c]
            assert cell.n == 3
            assert cell.mae_points == pytest.approx(points, abs=1e-4)
            assert cell.mae == pytest.approx(unit, abs=1e-4)
        # independently: sklearn on the raw points
        ref = mean_absolute_error(human_points[c], [judge[i][c] for i in ("s1", "s2", "s3")])
        assert res.mae["statrev"]["J"][c].mae_points == pytest.approx(ref, abs=1e-4)

    # Rendered: the paper's scale first, named so, and [0, 1] beside it.
    rep = LegalRikaiReport(
        subtasks=["statrev"],
        criteria={"statrev": ["IF", "SC", "CP", "TA", "WA"]},
        judges=["J"],
        scores=[],
        human=res,
        judge_agreement=None,
    )
    tables = {t.title: t for t in agreement_tables(rep)}
    points_t = tables[
        "LegalRikai StatRev, ReqRev, RiskRev: mean absolute error, judges vs humans, in rubric points "
        "(Table 8: the paper's scale)"
    ]
    unit_t = tables[
        "LegalRikai StatRev, ReqRev, RiskRev: mean absolute error, judges vs humans, on [0, 1] (offline-eval's scale)"
    ]
    assert points_t.rows[0][2] == "1.00 (n=3)" and unit_t.rows[0][2] == "0.50 (n=3)"  # IF
    assert list(tables).index(points_t.title) < list(tables).index(unit_t.title)


def test_a_folder_made_before_mae_points_reads_and_shows_them_from_mae():
    old = MaeCell.model_validate({"mae": 0.25, "n": 4})  # as summary.json kept it before mae_points
    assert old.mae_points is None and "mae_points" not in old.model_dump(exclude_unset=True)
    assert old.points(1, 3) == 0.5 and old.points(1, 2) == 0.25
    assert MaeCell.model_validate({"mae": None, "n": 0}).points(1, 3) is None


# ---- the answer cap


def _long_contract() -> str:
    """60 articles 第10条..第69条, each "## 第NN条\n" (8 characters) + 40 x 甲 + "。\n\n" (43): 51 x 60 = 3,060."""
    return "".join(f"## 第{i}条\n" + "甲" * 40 + "。\n\n" for i in range(10, 70))


def _task(**options: object) -> LegalRikaiTask:
    return LegalRikaiTask.from_options({"data": str(DATA), **options})  # type: ignore[return-value]


def test_paper_cap_fits_a_long_reqrev_contract_and_offline_eval_keeps_max_tokens():
    contract = _long_contract()
    instructions = [
        "第12条を削除してください。",
        "第13条の末尾に「ただし書」を加えてください。",
    ]  # 14 and 23 characters
    item = RevisionItem(id="long", contract=contract, instructions=instructions, gold=contract, subtask="reqrev")
    assert (len(contract), len(instructions[0]), len(instructions[1])) == (3060, 14, 23)
    # the rule: ceil(1.5 tokens x (contract + instructions) characters) = ceil(1.5 x 3,097 = 4,645.5) = 4,646,
    # never under max_tokens
    paper = _task(protocol="paper")
    assert paper.protocol == "paper" and paper.answer_cap(item) == 4646
    phase = paper.build([item], {"subtask": "reqrev", "overflow": "focus"})
    assert phase.requests[0].sampling.max_tokens == 4646
    assert _task(protocol="paper", answer_tokens_per_char=2.0).answer_cap(item) == 6194  # 2 x 3,097
    assert _task(protocol="paper", max_tokens=8000).answer_cap(item) == 8000  # max_tokens is the least
    assert _task(protocol="offline-eval").answer_cap(item) == 2048
    # AmendExp keeps max_tokens under both
    amend = next(it for it in paper.load() if it.subtask == "amendexp")
    assert paper.answer_cap(amend) == 2048 == _task(protocol="offline-eval").answer_cap(amend)


def test_the_paper_cap_holds_the_whole_gold_contract_in_the_tiny_models_tokens(tiny):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(TINY / "hf"))
    paper = _task(protocol="paper")
    long = RevisionItem(
        id="long", contract=_long_contract(), instructions=["x"], gold=_long_contract(), subtask="reqrev"
    )
    for it in [*paper.load(), long]:
        if isinstance(it, StatRevItem | RevisionItem):
            assert len(tok(it.gold, add_special_tokens=False)["input_ids"]) < paper.answer_cap(it), it.id


def test_offline_eval_requests_are_byte_for_byte_those_a_v3_sweep_stored():
    """tests/fixtures/v3-demo's store holds the requests its config made before protocols: under offline-eval every
    candidate request is one of them (the re-sweep generates nothing); under paper the revision tasks' are not."""
    db = ROOT / "tests" / "fixtures" / "v3-demo" / "store.sqlite"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        stored = {r for (r,) in con.execute("SELECT request FROM outputs")}
    v3 = {"data": str(DATA), "limit": 1, "max_tokens": 64, "overflow": "focus"}
    for protocol, revision_stored in (("offline-eval", True), ("paper", False)):
        t = _task(**v3, protocol=protocol)
        items = t.load()
        for s in t.settings():
            phase = t.build(t.setting_items(items, s), s)
            got = all(request_json(r) in stored for r in phase.requests)
            assert got is (revision_stored or s["subtask"] == "amendexp"), (protocol, s)


# ---- a cut answer: counted, not judged (paper); judged as before (offline-eval)


def _sweep(tmp: Path, protocol: str) -> Path:
    from offline_eval.pipeline.config import load_config
    from offline_eval.pipeline.options import SweepOptions
    from offline_eval.pipeline.orchestrate import run_sweep

    (tmp / "w.bin").write_text("fake weights")
    reqrev = [json.loads(x) for x in (DATA / "reqrev.jsonl").read_text(encoding="utf-8").splitlines()]
    cfg = {
        "output_dir": str(tmp / f"out-{protocol}"),
        "models": [
            {
                "name": "m",
                "backend": "fake",
                "path": str(tmp / "w.bin"),
                "max_model_len": 65536,
                # every answer is longer than any cap (54,000 bytes: the fake's tokens) but item 2's, one article
                "engine_args": {"default": "第1条" * 6000, "answers": {reqrev[1]["instructions"][0]: SHORT}},
            }
        ],
        "tasks": {
            "legalrikai": {
                "data": str(DATA),
                "subtasks": ["reqrev"],
                "protocol": protocol,
                "bootstrap": 0,
                "judges": [{"name": "j", "backend": "fake", "path": str(tmp / "w.bin"), "max_model_len": 65536}],
            }
        },
    }
    p = tmp / f"{protocol}.yaml"
    p.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    run_sweep(load_config(p), SweepOptions(source=str(p), progress=False, log=lambda _: None))
    return tmp / f"out-{protocol}"


def _results(out: Path) -> tuple[dict, list[dict], str]:
    s = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    (entry,) = s["runs"]
    recs = [
        json.loads(x)
        for x in next((out / "results").rglob("legalrikai.reqrev.jsonl")).read_text("utf-8").split("\n")
        if x
    ]
    return entry, recs, (out / "report.md").read_text(encoding="utf-8")


def test_a_cut_answer_is_counted_and_not_judged_under_paper_and_judged_under_offline_eval(tmp_path):
    entry, recs, report = _results(_sweep(tmp_path, "paper"))
    m = {k: v["value"] for k, v in entry["metrics"]["values"].items()}
    assert entry["protocol"] == "paper"
    assert [r["finish_reason"] for r in recs] == ["length", "stop", "length"]
    cut = [r for r in recs if r["finish_reason"] == "length"]
    assert all(r["judges"] == {} and r["scores"] == {} and r["parsed"] is None for r in cut)
    (whole,) = [r for r in recs if r["finish_reason"] == "stop"]
    assert set(whole["judges"]) == {"j.fake.default.ctx65536"} and whole["scores"]
    assert (m["truncated"], m["n_judged"], m["format_failures"]) == (2, 1, 0)
    assert m["IF"] == whole["scores"]["IF"]  # the mean is the one judged item's
    row = next(x for x in report.splitlines() if x.startswith("| m.fake.default.ctx65536 | legalrikai.reqrev"))
    assert "| 2 | no (paper) | 1 |" in row

    entry, recs, report = _results(_sweep(tmp_path, "offline-eval"))
    m = {k: v["value"] for k, v in entry["metrics"]["values"].items()}
    assert [r["finish_reason"] for r in recs] == ["length", "stop", "length"]
    assert all(r["judges"] and r["scores"] for r in recs)  # cut at 2048 and judged, as before protocols
    assert (m["truncated"], m["n_judged"]) == (2, 3)
    row = next(x for x in report.splitlines() if x.startswith("| m.fake.default.ctx65536 | legalrikai.reqrev"))
    assert "| 2 | yes (offline-eval) | 3 |" in row


# ---- a protocol that is neither


def test_an_unknown_protocol_is_one_line_naming_the_file_and_the_field(tmp_path):
    (tmp_path / "w.bin").write_text("fake weights")
    cfg = tmp_path / "m.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "models": [{"name": "m", "backend": "fake", "path": str(tmp_path / "w.bin"), "max_model_len": 4096}],
                "tasks": {"legalrikai": {"data": str(DATA), "protocol": "nonsense"}},
            }
        ),
        encoding="utf-8",
    )
    p = run_cli("sweep", str(cfg), "--dry-run")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert str(cfg) in lines[0] and "tasks.legalrikai.protocol" in lines[0] and "paper" in lines[0], lines[0]
