"""LegalRikai data: the samples validate, a renamed-field copy loads through a field map, bad input is named."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, run_cli

from offline_eval.ja.contract import parse
from offline_eval.runtime.errors import InputError
from offline_eval.tasks.legalrikai.schema import load_items

D = ROOT / "data" / "legalrikai"


@pytest.mark.parametrize("task", ["amendexp", "statrev", "reqrev", "riskrev"])
@pytest.mark.slow
def test_samples_validate(task):
    items = load_items(task, str(D / f"{task}.jsonl"))
    assert len(items) >= 3
    proc = run_cli("data", "validate", task, str(D / f"{task}.jsonl"))
    assert proc.returncode == 0 and f"({len(items)} {task} items)" in proc.stdout


def test_sample_properties_the_issue_asks_for():
    req = load_items("reqrev", str(D / "reqrev.jsonl"))
    risk = load_items("riskrev", str(D / "riskrev.jsonl"))
    assert [r.contract for r in req] == [r.contract for r in risk]  # shared inputs, as in the paper
    assert any(r.gold == r.contract for r in risk)  # an instruction that needs no change
    for r in req + risk + load_items("statrev", str(D / "statrev.jsonl")):
        assert 8 <= len(parse(r.contract).articles) <= 20
    amend = load_items("amendexp", str(D / "amendexp.jsonl"))
    assert all(len(parse(a.statute_pre).articles) >= 5 and a.statute_pre != a.statute_post for a in amend)


@pytest.mark.slow
def test_field_map_loads_a_renamed_copy(tmp_path):
    rows = [json.loads(x) for x in (D / "reqrev.jsonl").read_text(encoding="utf-8").splitlines()]
    renamed = [
        {"uid": r["id"], "input_contract": r["contract"], "requests": r["instructions"], "answer": r["gold"]}
        for r in rows
    ]
    f = tmp_path / "theirs.jsonl"
    f.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in renamed), encoding="utf-8")
    fmap = {"id": "uid", "contract": "input_contract", "instructions": "requests", "gold": "answer"}
    assert load_items("reqrev", str(f), field_map=fmap) == load_items("reqrev", str(D / "reqrev.jsonl"))
    proc = run_cli("data", "validate", "reqrev", str(f), "--field-map", json.dumps(fmap))
    assert proc.returncode == 0, proc.stderr
    with pytest.raises(InputError, match="field 'id': missing"):
        load_items("reqrev", str(f))  # without the map the copy's names are not ours


@pytest.mark.parametrize(
    "mutate,needle",
    [
        (lambda r: r.pop("gold"), "field 'gold': missing"),
        (lambda r: r.update(instructions=[]), "field 'instructions'"),
        (lambda r: r.update(instructions=["  "]), "an instruction is empty"),
        (
            lambda r: r.update(contract="これは契約書ではない文章です。"),
            "field 'contract': the contract does not parse",
        ),
    ],
)
@pytest.mark.slow
def test_bad_input_is_named(tmp_path, mutate, needle):
    row = json.loads((D / "reqrev.jsonl").read_text(encoding="utf-8").splitlines()[1])
    mutate(row)
    f = tmp_path / "bad.jsonl"
    f.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    proc = run_cli("data", "validate", "reqrev", str(f))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "line 1 (id reqrev-002)" in proc.stderr and needle in proc.stderr, proc.stderr


@pytest.mark.slow
def test_legalevalq_files_validate():
    p1 = run_cli("data", "validate", "legalevalq", str(ROOT / "data" / "legalevalq" / "queries.json"))
    p2 = run_cli("data", "validate", "legalevalq", str(ROOT / "data" / "legalevalq" / "train.jsonl"))
    assert p1.returncode == 0 and "18 queries" in p1.stdout
    assert p2.returncode == 0 and "96 annotated tuples" in p2.stdout
