"""Typed items that stay typed: every task's load() gives its own TaskItem models (validated once by
datafiles.read_items, frozen), and their provenance digests are the ones the dict items of earlier versions had, so
an old folder's item_digests still match (compare and verify read them)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from offline_eval.pipeline.provenance import item_digests
from offline_eval.runtime.errors import InputError
from offline_eval.tasks import make_task
from offline_eval.tasks.jbeqa.data import JBEQAItem
from offline_eval.tasks.kit.datafiles import TaskItem, read_items
from offline_eval.tasks.legalevalq.data import LegalEvalQItem
from offline_eval.tasks.legalrikai.schema import AmendExpItem, RevisionItem, StatRevItem

DATA = Path(__file__).resolve().parent.parent / "data"

# sha256 (16 hex) of the sample's item_digests, as the code before typed items (07a69c9, dicts) computed them.
BEFORE = {"jbeqa": "056d0df1bea61f02", "legalrikai": "b3d0f16a5ee3c137", "legalevalq": "c8a1fd1bc1e245f2"}


def _options(name: str, tmp: Path) -> dict[str, object]:
    scorer = tmp / "scorer"
    scorer.mkdir(exist_ok=True)
    (scorer / "scorer_config.json").write_text("{}")
    (tmp / "e.gguf").write_bytes(b"")
    return {
        # the sample as it stood when the digests were taken (data/jbeqa's instructions are the release's since)
        "jbeqa": {
            "protocol": "offline-eval",
            "data": str(DATA.parent / "tests" / "fixtures" / "demo-data" / "jbeqa"),
            "shots": [0, 4],
        },
        "legalrikai": {"protocol": "offline-eval", "data": str(DATA / "legalrikai"), "judges": []},
        "legalevalq": {
            "protocol": "offline-eval",
            "data": str(DATA / "legalevalq" / "queries.json"),
            "scorer": str(scorer),
            "evaluator": {"name": "e", "backend": "llamacpp", "path": str(tmp / "e.gguf"), "max_model_len": 512},
        },
    }[name]


@pytest.mark.parametrize(
    "name,kinds",
    [
        ("jbeqa", (JBEQAItem,)),
        ("legalrikai", (AmendExpItem, StatRevItem, RevisionItem)),
        ("legalevalq", (LegalEvalQItem,)),
    ],
)
def test_load_gives_typed_frozen_items_whose_digests_did_not_change(tmp_path, name, kinds):
    items = make_task(name, _options(name, tmp_path)).load()
    assert items and all(isinstance(it, TaskItem) and isinstance(it, kinds) for it in items)
    assert {type(it) for it in items} == set(kinds)  # every sub-task's own model
    with pytest.raises(ValidationError, match="frozen"):
        items[0].id = "changed"
    digests = item_digests(items, [f"prompt {i}" for i in range(len(items))])
    blob = json.dumps(digests, sort_keys=True, ensure_ascii=False).encode()
    assert hashlib.sha256(blob).hexdigest()[:16] == BEFORE[name]


def test_one_loader_names_the_file_the_record_and_the_field(tmp_path):
    f = tmp_path / "items.jsonl"
    rows = [{"id": 1, "question": "q", "answer": "a"}, {"id": "2", "answer": "a"}]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))

    class Item(TaskItem):
        question: str
        answer: str

    with pytest.raises(InputError) as e:
        read_items(f, "test", Item)
    assert str(e.value) == f"{f}, line 2 (id 2), field 'question': missing"
    rows[1]["question"] = 3
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match=r"line 2 \(id 2\), field 'question': Input should be a valid string, got 3"):
        read_items(f, "test", Item)
    rows[1] = {"id": "1", "question": "q", "answer": "b"}  # an integer id is read as its string
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match=r"line 2 \(id 1\), field 'id': duplicate id '1' \(first in line 1\)"):
        read_items(f, "test", Item)
    renamed = tmp_path / "theirs.jsonl"
    renamed.write_text(json.dumps({"uid": "x", "q": "?"}) + "\n")
    fmap = {"id": "uid", "question": "q", "answer": "ans"}
    with pytest.raises(InputError, match=r"line 1 \(id x\), field 'ans': missing"):  # named as the file names it
        read_items(renamed, "test", Item, fmap)
    renamed.write_text(json.dumps({"uid": "x", "q": "?", "ans": "!"}) + "\n")
    assert read_items(renamed, "test", Item, fmap) == [("line 1 (id x)", Item(id="x", question="?", answer="!"))]
