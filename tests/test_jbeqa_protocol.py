"""JBE-QA's `protocol: paper` pinned to the authors' code (hancules/JBE-QA at 783b4dc, src/config.py) byte for byte:
the message their notebook prints for the release's test[0], messages derived by hand from their format_question's
rules for records across their instruction table, their system prompt, their exemplar rows, every split but the
exemplars; and the protocol named in the summary, the report, the dry run and compare."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_cli

from offline_eval.metrics.classification import precision_recall_f1
from offline_eval.runtime.errors import InputError
from offline_eval.tasks import make_task
from offline_eval.tasks.jbeqa import authors
from offline_eval.tasks.jbeqa.data import JBEQAItem
from offline_eval.tasks.jbeqa.prompts import paper_message

# The release's test[0] at revision 37d89813, as the authors' notebook src/instance_constuction_sample.ipynb prints
# it (cell 0), and what their format_question made of it (cell 1; print added the last line break).
TEST_0 = {
    "id": "令和６年-民法-18-5",
    "year": "令和６年",
    "subject": "Civil Law",
    "subject_jp": "民法",
    "theme": "債務不履行による損害賠償",
    "question_type": "CSQ",
    "instruction": "判例の趣旨に照らし記述が正しいか",
    "remark": "",
    "label": "N",
    "lead_in": "",
    "question": "契約の一方当事者Aが、契約締結に先立ち、信義則上の説明義務に違反して、当該契約を締結するか否かに関する判断に影響を及ぼすべき情報を他方当事者Bに提供しなかったときは、Aは、Bに対し、Bが当該契約を締結したことにより受けた損害につき当該契約上の債務不履行による賠償責任を負う。",
    "answer": False,
}
NOTEBOOK_PRINTED = (
    "科目：民法\n債務不履行による損害賠償について\n判例の趣旨に照らして、次の記述は正しいか否か。\n"
    "契約の一方当事者Aが、契約締結に先立ち、信義則上の説明義務に違反して、当該契約を締結するか否かに関する判断に"
    "影響を及ぼすべき情報を他方当事者Bに提供しなかったときは、Aは、Bに対し、Bが当該契約を締結したことにより受けた"
    "損害につき当該契約上の債務不履行による賠償責任を負う。\n"
)


def _item(**kw: Any) -> JBEQAItem:
    base = {**TEST_0, "id": "令和２年-刑法-3-1", "year": "令和２年", "subject": "Criminal Law", "subject_jp": "刑法"}
    return JBEQAItem.model_validate({**base, **kw})


def test_the_authors_notebook_message_for_test_0_byte_for_byte():
    assert paper_message(JBEQAItem.model_validate(TEST_0)) + "\n" == NOTEBOOK_PRINTED


# Each expected string written out by hand from format_question's rules (config.py lines 82-105): 科目, a theme
# that is not None/""/"None" as 「{theme}について」, a non-empty lead-in, the table's phrase for the stripped
# instruction, the statement, a non-empty remark always after なお、, a line each, and the whole stripped.
HAND = [
    (  # theme "None" is no theme; a lead-in; an instruction of the table about 【事例】
        dict(theme="None", lead_in="次の【事例】に関する記述について検討する。\n【事例】甲は、Vを殴った。",
             instruction="【事例】に対して判例の立場に従って検討し記述が正しいか", question="甲に傷害罪が成立する。"),
        "科目：刑法\n次の【事例】に関する記述について検討する。\n【事例】甲は、Vを殴った。\n"
        "【事例】に対して判例の立場に従って検討すると、次の記述は正しいか否か。\n甲に傷害罪が成立する。",
    ),
    (  # no theme (None), the shortest instruction, a remark
        dict(theme=None, instruction="正しいか", remark="業務上過失致死罪は除く。", question="過失犯は処罰されない。"),
        "科目：刑法\n次の記述は正しいか否か。\n過失犯は処罰されない。\nなお、業務上過失致死罪は除く。",
    ),
    (  # a remark that already starts with なお gets it again, as their code does
        dict(theme="放火罪", instruction="正しいか", remark="なお、判例による。", question="放火は重罪である。"),
        "科目：刑法\n放火罪について\n次の記述は正しいか否か。\n放火は重罪である。\nなお、なお、判例による。",
    ),
    (  # an instruction with an ideographic space after it is looked up stripped
        dict(theme="", instruction="正しいか\u3000", question="未遂は処罰される。 "),
        "科目：刑法\n次の記述は正しいか否か。\n未遂は処罰される。",
    ),
    (  # the table's key with a space inside it, sent without the space
        dict(theme="財産犯",
             instruction="最高 裁判所の判決(最高裁判所昭和62年4月24日第二小法廷判決、民集41巻3号490頁)の趣旨に照らして正しいか",
             question="反論文の掲載請求権は認められない。"),
        "科目：刑法\n財産犯について\n最高裁判所の判決(最高裁判所昭和62年4月24日第二小法廷判決、民集41巻3号490頁)の趣旨に照らして、"
        "次の記述は正しいか否か。\n反論文の掲載請求権は認められない。",
    ),
    (  # bの見解 questions
        dict(theme="None", lead_in="", instruction="bの見解がaの見解の批判となっているか", remark=None,
             question="b　故意は構成要件要素である。"),
        "科目：刑法\nbの見解はaの見解の批判となっているか否か。\nb　故意は構成要件要素である。",
    ),
]  # fmt: skip


@pytest.mark.parametrize("fields,expected", HAND)
def test_messages_derived_by_hand_from_the_authors_rules(fields, expected):
    assert paper_message(_item(**fields)) == expected


def test_the_authors_strings_are_pinned():
    assert authors.SYSTEM_PROMPT.startswith("以下の法律に関する問題を解答せよ。理由や説明は不要。")
    assert authors.SYSTEM_PROMPT.endswith("出力は必ず1または0のいずれかの整数値のみとせよ。")
    assert hashlib.sha256(authors.SYSTEM_PROMPT.encode()).hexdigest()[:16] == "40c4f944b60a34ce"
    # 52 entries in their dict literal, 50 keys: line 50's value for 判例の趣旨に照らし記述が正しいか wins over line
    # 29's, as the notebook's message for test[0] shows
    assert len(authors.INSTRUCTIONS) == 50
    assert authors.INSTRUCTIONS["判例の趣旨に照らし記述が正しいか"] == "判例の趣旨に照らして、次の記述は正しいか否か。"
    table = json.dumps(authors.INSTRUCTIONS, ensure_ascii=False, sort_keys=True)
    assert hashlib.sha256(table.encode()).hexdigest()[:16] == "f25195b2aa05bbc3"
    assert authors.EXEMPLAR_ROWS == (113, 1285, 1628, 2609)
    assert authors.DATASET_REVISION.startswith("37d89813")


def test_random_guessing_gives_the_papers_f1_at_its_label_balance():
    """The paper: F1 0.488 expected from random guessing at 47.6% true. Analytically P = 0.476, R = 0.5; and by
    simulation through our own F1."""
    p, r = 0.476, 0.5
    assert round(2 * p * r / (p + r), 3) == 0.488
    rng = random.Random(7)
    gold = [rng.random() < 0.476 for _ in range(200_000)]
    pred = [rng.random() < 0.5 for _ in gold]
    _, _, f1 = precision_recall_f1(gold, pred)
    assert abs(f1 - 0.488) < 0.004


# ---- the item set and the exemplars: a folder in the release's form, its train split as long as the release's

ERAS = ["平成２７年", "平成３０年", "令和元年", "令和４年"]
PHRASES = list(authors.INSTRUCTIONS)


def _release(folder: Path, train_rows: int = 2610) -> list[dict[str, Any]]:
    folder.mkdir(parents=True, exist_ok=True)
    train = []
    for i in range(train_rows):
        q, k = divmod(i, 5)
        train.append({**TEST_0, "id": f"{ERAS[q % 4]}-民法-{q + 1}-{k + 1}", "year": ERAS[q % 4],
                      "instruction": PHRASES[i % len(PHRASES)], "question": f"記述{i}。",
                      "label": "Y" if i % 3 else "N", "answer": bool(i % 3)})  # fmt: skip
    for name, rows in (("train", train), ("test", [TEST_0])):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return train


def test_paper_scores_every_split_but_the_authors_exemplar_rows(tmp_path):
    train = _release(tmp_path / "data")
    task = make_task("jbeqa", {"data": str(tmp_path / "data"), "protocol": "paper", "shots": [0, 4]})
    items = task.load()
    exemplar_ids = [train[i]["id"] for i in authors.EXEMPLAR_ROWS]
    assert [e.id for e in task.exemplars] == exemplar_ids
    assert len(items) == 2610 + 1 - 4 and not set(exemplar_ids) & {it.id for it in items}
    assert [it.id for it in items][:2] == [train[0]["id"], train[1]["id"]]  # train first, as the authors run it
    phase = task.build(items[:1], {"shots": 4, "mode": "free"})
    msgs = phase.requests[0].messages
    assert msgs[0] == ("system", authors.SYSTEM_PROMPT)
    for n, row in enumerate(authors.EXEMPLAR_ROWS):
        it = JBEQAItem.model_validate(train[row])
        assert msgs[1 + 2 * n] == ("user", paper_message(it))
        assert msgs[2 + 2 * n] == ("assistant", "1" if it.answer else "0")
    assert msgs[-1] == ("user", paper_message(items[0]))
    assert phase.requests[0].sampling.max_tokens == 1000 and phase.requests[0].sampling.temperature == 0.0
    # split: test scores the test split alone, the exemplars still the authors'
    only = make_task("jbeqa", {"data": str(tmp_path / "data"), "protocol": "paper", "split": "test", "shots": [4]})
    assert [it.id for it in only.load()] == [TEST_0["id"]]


def test_offline_eval_keeps_its_own_prompt_and_item_set(tmp_path):
    _release(tmp_path / "data", train_rows=20)
    task = make_task("jbeqa", {"data": str(tmp_path / "data"), "protocol": "offline-eval"})
    assert [it.id for it in task.load()] == [TEST_0["id"]]
    msgs = task.build(task.load(), {"shots": 0, "mode": "free"}).requests[0].messages
    assert msgs[0][1] != authors.SYSTEM_PROMPT and "記述：" in msgs[1][1]


def _error(tmp_path: Path, options: dict[str, Any]) -> InputError:
    with pytest.raises(InputError) as e:
        make_task("jbeqa", {"data": str(tmp_path / "data"), **options}).load()
    return e.value


def test_an_instruction_outside_the_authors_table_is_one_error_naming_file_record_and_field(tmp_path):
    _release(tmp_path / "data", train_rows=20)
    odd = {**TEST_0, "instruction": "次の記述の正誤を判断しなさい。"}
    (tmp_path / "data" / "test.jsonl").write_text(json.dumps(odd, ensure_ascii=False) + "\n", "utf-8")
    e = _error(tmp_path, {"protocol": "paper", "split": "test"})
    assert e.field == "instruction" and e.record == f"id {TEST_0['id']}" and e.file.endswith("test.jsonl")
    assert "authors' table" in str(e) and "\n" not in str(e)
    ours = make_task("jbeqa", {"data": str(tmp_path / "data"), "protocol": "offline-eval"})
    assert (
        "次の記述の正誤を判断しなさい。"
        in ours.build(ours.load(), {"shots": 0, "mode": "free"}).requests[0].messages[1][1]
    )


def test_a_train_split_shorter_than_the_release_has_no_paper_exemplars(tmp_path):
    _release(tmp_path / "data", train_rows=12)
    e = _error(tmp_path, {"protocol": "paper", "shots": [4]})
    assert "rows 113, 1285, 1628, 2609" in str(e) and "has 12 rows" in str(e) and "exemplar_ids" in str(e)
    # exemplar_ids chooses them under the paper's prompt
    ids = [f"平成２７年-民法-1-{k}" for k in range(1, 5)]
    task = make_task("jbeqa", {"data": str(tmp_path / "data"), "protocol": "paper", "shots": [4], "exemplar_ids": ids})
    assert [e.id for e in task.exemplars] == ids and len(task.load()) == 12 + 1 - 4


def test_more_shots_than_the_papers_four_and_an_unknown_protocol_are_config_errors(tmp_path):
    for options, words in (({"protocol": "paper", "shots": [5]}, "4 exemplars"), ({"protocol": "nonsense"}, "paper")):
        with pytest.raises(InputError) as e:
            make_task("jbeqa", {"data": str(tmp_path), **options}, source="models.yaml")
        assert e.value.file == "models.yaml" and e.value.field.startswith("tasks.jbeqa") and words in str(e.value)


# ---- through the CLI: the protocol in the dry run, the summary, the report and compare


def _sweep(tmp: Path, name: str, protocol: str, *args: str) -> tuple[Path, Any]:
    weights = tmp / "w.bin"
    weights.write_text("fake weights")
    cfg = {
        "output_dir": str(tmp / name),
        "models": [{"name": "m", "backend": "fake", "path": str(weights), "max_model_len": 4096,
                    "engine_args": {"default": "1"}}],
        "tasks": {"jbeqa": {"data": str(tmp / "data"), "protocol": protocol, "shots": [0, 4], "mode": ["free"],
                            "limit": 6, "split": "train"}},
    }  # fmt: skip
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    return tmp / name, run_cli("sweep", str(path), *args)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("protocol")
    _release(tmp / "data")
    paper, got = _sweep(tmp, "paper", "paper")
    assert got.returncode == 0, got.stderr[-2000:]
    ours, got = _sweep(tmp, "ours", "offline-eval")
    assert got.returncode == 0, got.stderr[-2000:]
    return tmp, paper, ours


def test_the_dry_run_prints_the_exact_messages_of_one_item_per_setting(swept):
    tmp, _, _ = swept
    _, got = _sweep(tmp, "dry", "paper", "--dry-run")
    assert got.returncode == 0, got.stderr[-2000:]
    out = got.stdout + got.stderr
    first = JBEQAItem.model_validate(json.loads((tmp / "data" / "train.jsonl").read_text("utf-8").splitlines()[0]))
    assert (
        "jbeqa.4shot.free (paper protocol, departing: the first 6 items (limit); the train split only (the paper "
        "scores every split)): what the model gets for item 平成２７年-民法-1-1" in out
    )
    assert f"    [system] {authors.SYSTEM_PROMPT}" in out
    shown = paper_message(first).split("\n")
    assert f"    [user] {shown[0]}" in out and all(f"        {x}" in out for x in shown[1:])
    assert "(8 exemplar turns between)" in out


def test_the_summary_and_the_reports_first_screen_name_the_protocol(swept):
    _, paper, ours = swept
    runs = json.loads((paper / "summary.json").read_text("utf-8"))["runs"]
    assert runs and {r["protocol"] for r in runs} == {"paper"}
    assert {r["protocol"] for r in json.loads((ours / "summary.json").read_text("utf-8"))["runs"]} == {"offline-eval"}
    head = (paper / "report.md").read_text("utf-8").split("## Leaderboard")[0]
    assert (
        "## Protocol\n\n- jbeqa: paper, 2 departures\n  - the first 6 items (limit)\n"
        "  - the train split only (the paper scores every split)\n" in head
    )
    assert "paper: the papers' protocols as their authors' code and text give them" in head
    assert [r["departures"] for r in runs] == [
        ["the first 6 items (limit)", "the train split only (the paper scores every split)"]
    ] * 2


def test_compare_refuses_to_pair_protocols_unless_told(swept):
    tmp, paper, ours = swept
    got = run_cli("compare", str(ours), str(paper), "--out", str(tmp / "cmp1"), "--json")
    c = json.loads(got.stdout)
    assert c["settings"] and all(s["verdict"] == "refused" for s in c["settings"])
    assert all("offline-eval protocol and NEW the paper protocol" in s["reason"] for s in c["settings"])
    got = run_cli("compare", str(ours), str(paper), "--out", str(tmp / "cmp2"), "--allow-protocol-change", "--json")
    c = json.loads(got.stdout)
    assert all(s["verdict"] != "refused" and s["old_protocol"] == "offline-eval" for s in c["settings"])
    text = run_cli("compare", str(paper), str(paper), "--out", str(tmp / "cmp3")).stdout
    assert "jbeqa.0shot.free (paper protocol)" in text


def test_the_commands_protocol_choices_are_the_tasks() -> None:
    from offline_eval import cli
    from offline_eval.tasks.kit.protocol import PROTOCOLS

    assert cli.PROTOCOLS == PROTOCOLS
