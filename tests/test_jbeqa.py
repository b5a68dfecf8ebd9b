"""JBE-QA: schema, loaders (JSONL, Parquet, datasets folder), prompts, exemplars and scoring rules."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import DATA, run_cli, run_tiny_jbeqa, typed

from offline_eval.inference.constraints import Choice
from offline_eval.inference.requests import Result
from offline_eval.tasks import make_task
from offline_eval.tasks.jbeqa import SYSTEM_PROMPT, gregorian_year, load_items, parse_answer, user_message

ERA_ID = re.compile(r"^(平成|令和)(元|[0-9０-９]+)年-(民法|刑法|憲法)-[0-9０-９]+-[0-9０-９]+$")
ERA_YEAR = re.compile(r"^(平成|令和)(元|[0-9０-９]+)年$")


def rows(split: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def release_record(**over: object) -> dict:
    """One record exactly as the public release writes it."""
    r = {
        "id": "令和５年-民法-１８-１",
        "year": "令和５年",
        "subject": "Civil Law",
        "subject_jp": "民法",
        "theme": "None",
        "question_type": "TFQ",
        "instruction": "次の記述の正誤を判断しなさい。",
        "remark": "",
        "label": "Y",
        "lead_in": "",
        "question": "保証契約は、書面でしなければ、その効力を生じない。",
        "answer": True,
    }
    return {**r, **over}


def test_sample_data_is_in_the_release_form():
    test, train = rows("test"), rows("train")
    assert (len(test), len(train)) == (26, 12)
    assert (sum(r["answer"] for r in test), sum(r["answer"] for r in train)) == (17, 6)
    assert {r["subject_jp"] for r in test} == {r["subject_jp"] for r in train} == {"民法", "刑法", "憲法"}
    names = {"民法": "Civil Law", "刑法": "Criminal Law", "憲法": "Constitutional Law"}
    for r in test + train:
        assert ERA_ID.match(r["id"]), r["id"]
        assert isinstance(r["year"], str) and ERA_YEAR.match(r["year"]), r["year"]
        assert r["subject"] == names[r["subject_jp"]]
        assert r["question_type"] in ("TFQ", "CSQ", "MRQ")
        assert r["label"] in ("Y", "N") and isinstance(r["answer"], bool)
        assert (r["label"] == "Y") == r["answer"]
        assert all(isinstance(r[k], str) for k in ("theme", "lead_in", "remark", "instruction"))
    years = {r["year"] for r in test + train}
    assert {"令和元年", "平成27年"} <= years and any(re.search("[０-９]", y) for y in years)
    assert {r["question_type"] for r in test} == {"TFQ", "CSQ", "MRQ"}
    assert any(r["theme"] == "None" for r in test)
    assert any(r["remark"] for r in test)


@pytest.mark.parametrize(
    "year,want",
    [
        ("平成27年", 2015),
        ("平成２７年", 2015),
        ("平成３０年", 2018),
        ("平成31年", 2019),
        ("令和元年", 2019),
        ("令和５年", 2023),
        ("令和６年", 2024),
        ("令和6年", 2024),
        ("平成元年", 1989),
        ("昭和64年", 1989),
        ("昭和元年", 1926),
        ("昭和６３年", 1988),
        ("平成二十七年", 2015),
        ("㍻27年", 2015),
        ("令和５年度", 2023),
        (2015, 2015),
        ("2024", 2024),
        ("２０２４年", 2024),
    ],
)
def test_gregorian_year(year, want):
    assert gregorian_year(year) == want


@pytest.mark.parametrize(
    "year", ["平成32年", "令和0年", "昭和65年", "H27", "27", "", "令和", "平成27", 27, 3000, True, 2015.0, None]
)
def test_gregorian_year_refuses(year):
    with pytest.raises(ValueError):
        gregorian_year(year)


def test_release_records_load_as_they_are_and_with_integer_years(tmp_path: Path):
    recs = [
        release_record(),
        release_record(
            id="平成２７年-刑法-５-２",
            year="平成27年",
            subject="Criminal Law",
            subject_jp="刑法",
            label="N",
            answer=False,
            theme="放火罪",
            question_type="CSQ",
        ),
        release_record(id="令和元年-憲法-3-1", year="令和元年", subject="Constitutional Law", subject_jp="憲法"),
    ]
    items = load_items(str(write_jsonl(tmp_path / "test.jsonl", recs)), "test")
    assert [it.year for it in items] == ["令和５年", "平成27年", "令和元年"]  # kept exactly as given
    assert [it.year_ad for it in items] == [2023, 2015, 2019]
    assert [it.subject for it in items] == ["Civil Law", "Criminal Law", "Constitutional Law"]
    assert items[0].id == "令和５年-民法-１８-１" and items[0].theme == "None"
    as_int = [dict(r, year=gregorian_year(r["year"])) for r in recs]
    items2 = load_items(str(write_jsonl(tmp_path / "int.jsonl", as_int)), "test")
    assert [it.year for it in items2] == [2023, 2015, 2019]
    assert [it.year_ad for it in items2] == [2023, 2015, 2019]


def test_per_year_results_are_gregorian_in_time_order_and_per_subject_uses_subject_jp(tmp_path: Path):
    recs = [
        release_record(id=f"{y}-{s}-１-{i}", year=y, subject_jp=s, label=lab, answer=lab == "Y")
        for i, (y, s, lab) in enumerate(
            [
                ("令和元年", "民法", "Y"),
                ("平成３０年", "刑法", "N"),
                ("令和６年", "憲法", "Y"),
                ("平成27年", "民法", "N"),
                ("令和元年", "刑法", "N"),
            ]
        )
    ]
    write_jsonl(tmp_path / "test.jsonl", recs)
    task = make_task("jbeqa", {"protocol": "offline-eval", "data": str(tmp_path), "mode": ["free"], "bootstrap": 0})
    items = task.load()
    s = {"shots": 0, "mode": "free"}
    records = [task.score(it, Result(text="1"), s) for it in items]
    assert [r.year for r in records] == [2019, 2018, 2024, 2015, 2019]
    m = task.run_metrics(records, s)
    years = m.groups("year", "accuracy")
    assert list(years) == ["2015", "2018", "2019", "2024"]
    assert years["2019"].value == 0.5 and years["2015"].value == 0.0 and years["2024"].value == 1.0
    assert set(m.groups("subject", "f1")) == {"民法", "刑法", "憲法"}
    assert m.groups("subject", "f1")["民法"].n == 2  # 令和元年 and 平成27年


@pytest.mark.parametrize(
    "item_id,question",
    [
        ("令和５年-民法-１８-１", "2023-民法-18"),  # the release's own form: full-width digits
        ("令和５年-民法-１８-２", "2023-民法-18"),  # its sibling statement: the same question
        ("平成２８年-民法-13-4", "2016-民法-13"),  # half-width question and statement numbers
        ("平成27年-刑法-５-２", "2015-刑法-5"),
        ("令和元年-憲法-4-5", "2019-憲法-4"),  # 元年
        ("令和５年－民法－１８－１", "2023-民法-18"),  # full-width hyphens
        ("平成３２年-民法-1-1", None),  # no such year
        ("令和５年-民法-１８", None),  # no statement number
        ("R5-civil-18-1", None),
        ("42", None),
    ],
)
def test_statements_cluster_by_exam_question(item_id, question):
    from offline_eval.tasks.jbeqa.data import question_of

    assert question_of(item_id) == question


def test_run_metrics_resample_questions_and_count_items_without_one(tmp_path: Path):
    """30 questions of 3 statements, answered all right or all wrong per question, and 2 ids of another shape:
    32 clusters (2 of them items without a question), CIs from resampled questions, a design effect near 3."""
    recs = []
    for q in range(30):
        for st in range(1, 4):
            lab = "Y" if (q + st) % 2 else "N"
            recs.append(
                release_record(id=f"令和５年-民法-{q + 1}-{st}", label=lab, answer=lab == "Y", question=f"{q}{st}")
            )
    recs += [release_record(id=f"extra-{i}", question=f"x{i}") for i in range(2)]
    write_jsonl(tmp_path / "test.jsonl", recs)
    task = make_task("jbeqa", {"protocol": "offline-eval", "data": str(tmp_path), "mode": ["free"], "bootstrap": 500})
    items = task.load()
    s = {"shots": 0, "mode": "free"}
    right = {f"令和５年-民法-{q + 1}-{st}" for q in range(30) if q % 3 for st in range(1, 4)}
    records = [
        task.score(
            it,
            Result(text=("1" if it.answer else "0") if it.id in right else "1" if not it.answer else "0"),
            s,
        )
        for it in items
    ]
    m = task.run_metrics(records, s)
    assert m["n_clusters"] == 32 and m["n_unclustered"] == 2
    acc, f1 = m.metric("accuracy"), m.metric("f1")
    assert acc is not None and f1 is not None and acc.n_clusters == 32
    assert acc.ci_low is not None and acc.ci_high is not None and acc.ci_low < m["accuracy"] < acc.ci_high
    assert f1.design_effect is not None and f1.design_effect > 2.0  # whole questions right or wrong: close to m = 3
    civil = m.groups("subject", "f1")["民法"]
    assert civil.n_clusters == 32 and civil.ci_low is not None and civil.n == 92
    assert m.groups("year", "accuracy")["2023"].n_clusters == 32
    few = task.run_metrics(records[:12], s)  # 4 questions: no CI to print, never [x, x], and why
    fa, ff = few.metric("accuracy"), few.metric("f1")
    assert few["n_clusters"] == 4 and fa is not None and ff is not None
    assert fa.ci_low is None and ff.ci_high is None and fa.note == ff.note == "n too small"


@pytest.mark.slow
def test_unparseable_year_is_a_one_line_error_naming_file_record_field(tmp_path: Path):
    f = write_jsonl(
        tmp_path / "test.jsonl",
        [release_record(), release_record(id="平成32年-民法-1-1", year="平成32年"), release_record(id="x", year="H27")],
    )
    proc = run_cli("data", "validate", "jbeqa", str(f))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert str(f) in lines[0] and "line 2 (id 平成32年-民法-1-1)" in lines[0] and "field 'year'" in lines[0]
    assert "平成32年" in lines[0]
    write_jsonl(f, [release_record(id="x", year="H27")])
    proc = run_cli("data", "validate", "jbeqa", str(f))
    assert proc.returncode == 2 and "line 1 (id x)" in proc.stderr and "field 'year'" in proc.stderr
    assert "'H27'" in proc.stderr and "Value error" not in proc.stderr


def test_label_and_answer_that_disagree_are_a_data_error_naming_line_and_both_fields(tmp_path: Path):
    f = write_jsonl(
        tmp_path / "test.jsonl", [release_record(), release_record(id="令和５年-民法-１８-２", answer=False)]
    )
    proc = run_cli("data", "validate", "jbeqa", str(f))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    err = proc.stderr
    assert str(f) in err and "line 2 (id 令和５年-民法-１８-２)" in err and "label" in err and "answer" in err
    assert "'Y'" in err and "false" in err


def test_validate_the_sample_data():
    proc = run_cli("data", "validate", "jbeqa", str(DATA))
    assert proc.returncode == 0, proc.stderr
    assert "all: 38 items; train: 12 items" in proc.stdout  # paper, the default: every split
    for args in (["--protocol", "offline-eval"], ["--split", "test"]):
        proc = run_cli("data", "validate", "jbeqa", str(DATA), *args)
        assert proc.returncode == 0 and "test: 26 items; train: 12 items" in proc.stdout, proc.stderr


@pytest.mark.engine
def test_summary_keys_years_by_the_gregorian_year(tmp_path: Path):
    out = tmp_path / "out"
    proc = run_tiny_jbeqa(
        "--mode",
        "logprob",
        "--max-model-len",
        "1024",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads((out / "summary.json").read_text(encoding="utf-8"))["runs"]
    m = typed(run)
    assert list(m.groups("year", "accuracy")) == [str(y) for y in range(2015, 2025)]
    assert sorted(g for g, v in m.groups("subject", "f1").items() if v.n) == sorted(["民法", "刑法", "憲法"])
    recs = [json.loads(x) for x in (out / "results" / run["run"] / f"{run['setting']}.jsonl").read_text().splitlines()]
    assert {r["year"] for r in recs} == set(range(2015, 2025))


def test_parquet_and_datasets_folder_load_the_same_items(tmp_path: Path):
    datasets = pytest.importorskip("datasets")  # the `data` extra
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
    it = next(r for r in load_items(str(DATA), "test") if r.remark)
    msg = user_message(it)
    assert "1" in SYSTEM_PROMPT and "0" in SYSTEM_PROMPT and "説明" in SYSTEM_PROMPT
    assert f"科目：{it.subject_jp}" in msg
    assert it.question in msg and it.instruction in msg
    assert "なお、" in msg
    blank = it.model_copy(update={"theme": "None", "lead_in": "", "remark": ""})
    m2 = user_message(blank)
    assert "テーマ" not in m2 and "None" not in m2 and "なお" not in m2


def test_fewshot_exemplars_are_balanced_and_never_scored(tmp_path: Path):
    # One split only: exemplars must come from it and be excluded from scoring.
    (tmp_path / "test.jsonl").write_text((DATA / "test.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    task = make_task("jbeqa", {"protocol": "offline-eval", "data": str(tmp_path), "shots": [0, 4]})
    items = task.load()
    ex = task.exemplars
    assert [e.answer for e in ex] == [True, False, True, False]
    assert not {e.id for e in ex} & {it.id for it in items}
    assert len(items) == len(rows("test")) - 4
    phase0 = task.build(items, {"shots": 0, "mode": "constrained"})
    phase4 = task.build(items, {"shots": 4, "mode": "constrained"})
    assert phase0.item_ids == phase4.item_ids  # 0-shot and 4-shot score the same items
    msgs = phase4.requests[0].message_dicts()
    assert [m["role"] for m in msgs] == ["system"] + ["user", "assistant"] * 4 + ["user"]
    assert [m["content"] for m in msgs[2:9:2]] == ["1", "0", "1", "0"]
    assert phase4.requests[0].constraint == Choice(["0", "1"])


def test_a_fresh_task_builds_and_names_its_prompts_without_load_first():
    """No call-order dependency: build and prompt_template on a task whose load() never ran give what they give
    after it (the exemplars are read on first use)."""
    opts = {"protocol": "offline-eval", "data": str(DATA), "shots": [0, 4]}
    fresh, loaded = make_task("jbeqa", opts), make_task("jbeqa", opts)
    items = loaded.load()
    s = {"shots": 4, "mode": "constrained"}
    assert "exemplars: " + ", ".join(e.id for e in loaded.exemplars) in fresh.prompt_template(s)
    assert fresh.prompt_template(s) == loaded.prompt_template(s)
    assert fresh.build(items, s).requests == loaded.build(items, s).requests
    assert fresh.load() == items


def test_exemplar_ids_option_and_missing_ids():
    task = make_task(
        "jbeqa",
        {
            "protocol": "offline-eval",
            "data": str(DATA),
            "shots": 2,
            "exemplar_ids": [rows("train")[0]["id"], rows("train")[1]["id"]],
        },
    )
    task.load()
    assert [e.id for e in task.exemplars] == [rows("train")[0]["id"], rows("train")[1]["id"]]
    bad = make_task(
        "jbeqa", {"protocol": "offline-eval", "data": str(DATA), "shots": 2, "exemplar_ids": ["nope", "nada"]}
    )
    with pytest.raises(Exception, match="exemplar ids not found: nope, nada"):
        bad.load()


@pytest.mark.parametrize("text,want", [("1", 1), (" 0\n", 0), ("1です", None), ("", None), ("10", None), ("１", None)])
def test_parse_answer(text, want):
    assert parse_answer(text) == want


def test_scoring_rules():
    task = make_task("jbeqa", {"protocol": "offline-eval", "data": str(DATA), "mode": ["free"], "bootstrap": 0})
    items = task.load()
    s = {"shots": 0, "mode": "free"}
    true_item = next(i for i in items if i.answer)
    false_item = next(i for i in items if not i.answer)
    r1 = task.score(true_item, Result(text="1"), s)
    assert r1.scores == {"correct": 1, "faithful": 1} and r1.parsed == 1
    # An explanation is unfaithful and scored as 0 (false), which happens to be right for a false item.
    r2 = task.score(false_item, Result(text="0 です。理由は"), s)
    assert r2.parsed is None and r2.pred == 0 and r2.scores == {"correct": 1, "faithful": 0}
    # Cut off by max_tokens: a parse failure even if the text looks like a label.
    r3 = task.score(true_item, Result(text="1", finish_reason="length"), s)
    assert r3.parsed is None and r3.scores["correct"] == 0
    r4 = task.score(true_item, Result(text="", finish_reason="overflow"), s)
    assert r4.skipped and r4.parsed is None
    m = task.run_metrics([r1, r2, r3, r4], s)
    assert m["n_scored"] == 3 and m["n_skipped"] == 1 and m["parse_failures"] == 2
    assert m["faithfulness"] == pytest.approx(1 / 3)
    assert m["accuracy"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx(2 * 1 / (2 * 1 + 0 + 1))  # tp=1 (r1), fn=1 (r3)
