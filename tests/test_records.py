"""Typed per-item records: each task's dataclass writes its results file's keys in the order that file has always
had, omits the fields its state leaves unset, and reads back what it wrote (fast tier, no engine)."""

from __future__ import annotations

import json

from conftest import DATA

from offline_eval.inference.requests import Result
from offline_eval.results.records import UNSET, ResultsFolder, RunKey
from offline_eval.tasks import make_task
from offline_eval.tasks.jbeqa.task import JBEQARecord
from offline_eval.tasks.legalrikai.record import LegalRikaiRecord


def _jbeqa_records() -> tuple[JBEQARecord, JBEQARecord]:
    task = make_task("jbeqa", {"protocol": "offline-eval", "data": str(DATA), "mode": ["logprob"], "bootstrap": 0})
    item = task.load()[0]
    s = {"shots": 0, "mode": "logprob"}
    scored = task.score(item, Result(text="1", prompt_tokens=7, output_tokens=1, logprobs={"0": -2.0, "1": -0.1}), s)
    skipped = task.score(item, Result(text="", finish_reason="overflow"), s)
    return scored, skipped


def test_each_state_writes_its_own_keys_in_the_files_order():
    scored, skipped = _jbeqa_records()
    head = ["id", "subject", "year", "output", "finish_reason", "gold", "parsed"]
    assert list(scored.to_json()) == [
        *head,
        *["pred", "skipped", "scores", "prompt_tokens", "output_tokens", "logprobs"],
    ]
    assert list(skipped.to_json()) == [*head, "skipped", "scores"]  # no pred, token counts or logprobs
    assert skipped.pred is UNSET and skipped.to_json()["scores"] == {}
    # StatRev alone carries `revised`, after the scores.
    rec = LegalRikaiRecord(
        id="s1",
        subtask="statrev",
        input="full",
        output="",
        finish_reason="stop",
        prompt_tokens=3,
        output_tokens=2,
        gold="",
    )
    keys = ["id", "subtask", "input", "output", "finish_reason", "prompt_tokens", "output_tokens", "gold"]
    assert list(rec.to_json()) == [*keys, "parsed", "checks", "judges", "scores"]
    rec.revised = "第1条"
    assert list(rec.to_json())[-1] == "revised"


def test_a_results_file_reads_back_as_the_tasks_records(tmp_path):
    scored, skipped = _jbeqa_records()
    folder = ResultsFolder(tmp_path)
    key = RunKey("m.fake.default.ctx1", "jbeqa.0shot.logprob")
    folder.write_records(key, [scored, skipped])
    assert folder.read_records(key, JBEQARecord.from_json) == [scored, skipped]
    # An earlier version's extra key is dropped; a record without a required field makes the file unreadable.
    f = folder.results_file(key)
    rows = [json.loads(x) for x in f.read_text(encoding="utf-8").splitlines()]
    assert JBEQARecord.from_json({**rows[0], "from_an_older_version": 1}) == scored
    f.write_text(json.dumps({k: v for k, v in rows[0].items() if k != "gold"}) + "\n", encoding="utf-8")
    assert folder.read_records(key, JBEQARecord.from_json) is None
    f.write_text("{not json\n", encoding="utf-8")
    assert folder.read_records(key, JBEQARecord.from_json) is None


def test_the_browser_still_shows_a_run_of_a_task_this_installation_lacks(tmp_path):
    from partial import summary as typed

    from offline_eval.report.browser import browser_data

    scored, _ = _jbeqa_records()
    folder = ResultsFolder(tmp_path)
    folder.write_records(RunKey("a", "gone.s"), [scored])
    data = browser_data(folder, typed({"runs": [{"run": "a", "setting": "gone.s", "task": "gone"}]}))
    assert data is not None
    [row] = data["rows"]
    assert row[0] == scored.id and row[4]["0"][:2] == ["1", "1"]  # output and parsed, read as plain records
