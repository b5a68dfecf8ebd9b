"""JBE-QA: schema, loaders (JSONL, Parquet, datasets folder), prompts, exemplars and scoring rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offline_eval.constraints import Choice
from offline_eval.requests import Result
from offline_eval.tasks import make_task
from offline_eval.tasks.jbeqa import SYSTEM_PROMPT, load_items, parse_answer, user_message

from conftest import DATA


def rows(split: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()]


def test_sample_data_shape():
    test, train = rows("test"), rows("train")
    assert len(test) + len(train) >= 24
    assert {r["subject_jp"] for r in test} == {"民法", "刑法", "憲法"}
    assert {r["subject_jp"] for r in train} == {"民法", "刑法", "憲法"}
    for r in test + train:
        assert (r["label"] == "Y") == r["answer"]
    assert any(r["theme"] in ("", "None") for r in test)
    assert any(r["remark"] for r in test)


def test_parquet_and_datasets_folder_load_the_same_items(tmp_path: Path):
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    want = load_items(str(DATA), "test")
    pq.write_table(pa.Table.from_pylist(rows("test")), tmp_path / "test.parquet")
    assert load_items(str(tmp_path / "test.parquet"), "test") == want
    assert load_items(str(tmp_path), "test") == want  # folder with test.parquet
    dd = datasets.DatasetDict({s: datasets.Dataset.from_list(rows(s)) for s in ("train", "test")})
    dd["validation"] = datasets.Dataset.from_list(rows("train")[:2])
    dd.save_to_disk(str(tmp_path / "hf"))
    assert load_items(str(tmp_path / "hf"), "test") == want
    assert len(load_items(str(tmp_path / "hf"), "validation")) == 2


def test_prompt_follows_the_paper():
    it = next(r for r in load_items(str(DATA), "test") if r["remark"])
    msg = user_message(it)
    assert "1" in SYSTEM_PROMPT and "0" in SYSTEM_PROMPT and "説明" in SYSTEM_PROMPT
    assert f"科目：{it['subject_jp']}" in msg
    assert it["question"] in msg and it["instruction"] in msg
    assert "なお、" in msg
    blank = dict(it, theme="None", lead_in="", remark="")
    m2 = user_message(blank)
    assert "テーマ" not in m2 and "None" not in m2 and "なお" not in m2


def test_fewshot_exemplars_are_balanced_and_never_scored(tmp_path: Path):
    # One split only: exemplars must come from it and be excluded from scoring.
    (tmp_path / "test.jsonl").write_text((DATA / "test.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    task = make_task("jbeqa", {"data": str(tmp_path), "shots": [0, 4]})
    items = task.load()
    ex = task._exemplars
    assert [e["answer"] for e in ex] == [True, False, True, False]
    assert not {e["id"] for e in ex} & {it["id"] for it in items}
    assert len(items) == len(rows("test")) - 4
    phase0 = task.build(items, {"shots": 0, "mode": "constrained"})
    phase4 = task.build(items, {"shots": 4, "mode": "constrained"})
    assert phase0.item_ids == phase4.item_ids  # 0-shot and 4-shot score the same items
    msgs = phase4.requests[0].message_dicts()
    assert [m["role"] for m in msgs] == ["system"] + ["user", "assistant"] * 4 + ["user"]
    assert [m["content"] for m in msgs[2:9:2]] == ["1", "0", "1", "0"]
    assert phase4.requests[0].constraint == Choice(["0", "1"])


def test_exemplar_ids_option_and_missing_ids():
    task = make_task("jbeqa", {"data": str(DATA), "shots": 2, "exemplar_ids": [rows("train")[0]["id"],
                                                                                  rows("train")[1]["id"]]})
    task.load()
    assert [e["id"] for e in task._exemplars] == [rows("train")[0]["id"], rows("train")[1]["id"]]
    bad = make_task("jbeqa", {"data": str(DATA), "shots": 2, "exemplar_ids": ["nope", "nada"]})
    with pytest.raises(Exception, match="exemplar ids not found: nope, nada"):
        bad.load()


@pytest.mark.parametrize("text,want", [("1", 1), (" 0\n", 0), ("1です", None), ("", None), ("10", None),
                                       ("１", None)])
def test_parse_answer(text, want):
    assert parse_answer(text) == want


def test_scoring_rules():
    task = make_task("jbeqa", {"data": str(DATA), "mode": ["free"], "bootstrap": 0})
    items = task.load()
    s = {"shots": 0, "mode": "free"}
    true_item = next(i for i in items if i["answer"])
    false_item = next(i for i in items if not i["answer"])
    r1 = task.score(true_item, Result(text="1"), s)
    assert r1["scores"] == {"correct": 1, "faithful": 1} and r1["parsed"] == 1
    # An explanation is unfaithful and scored as 0 (false), which happens to be right for a false item.
    r2 = task.score(false_item, Result(text="0 です。理由は"), s)
    assert r2["parsed"] is None and r2["pred"] == 0 and r2["scores"] == {"correct": 1, "faithful": 0}
    # Cut off by max_tokens: a parse failure even if the text looks like a label.
    r3 = task.score(true_item, Result(text="1", finish_reason="length"), s)
    assert r3["parsed"] is None and r3["scores"]["correct"] == 0
    r4 = task.score(true_item, Result(text="", finish_reason="overflow"), s)
    assert r4["skipped"] and r4["parsed"] is None
    m = task.aggregate([r1, r2, r3, r4], s)
    assert m["n_scored"] == 3 and m["n_skipped"] == 1 and m["parse_failures"] == 2
    assert m["faithfulness"] == pytest.approx(1 / 3)
    assert m["accuracy"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx(2 * 1 / (2 * 1 + 0 + 1))  # tp=1 (r1), fn=1 (r3)
