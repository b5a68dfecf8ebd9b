"""LegalRikai's parts without an engine: StatRev merge-back, the focus excerpt, rubrics and judge parsing,
normalisation and averaging by hand, aggregation, human-score reading and agreement against scipy/sklearn."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest
from conftest import ROOT, statute
from scipy import stats
from sklearn.metrics import cohen_kappa_score, mean_absolute_error

from offline_eval.inference.constraints import JsonSchema
from offline_eval.inference.requests import Sampling
from offline_eval.ja.contract import parse
from offline_eval.results.records import RunKey
from offline_eval.runtime.errors import InputError
from offline_eval.tasks.kit import judges
from offline_eval.tasks.legalrikai import rubric
from offline_eval.tasks.legalrikai.focus import GAP, focus_statutes
from offline_eval.tasks.legalrikai.human.agreement import agreement, human_labels, read_human_scores
from offline_eval.tasks.legalrikai.outputs import amendexp_sections, merge_back
from offline_eval.tasks.legalrikai.task import LegalRikaiRecord, LegalRikaiTask, aggregate, average_scores

CONTRACT = (
    "# 業務委託契約書\n\n甲と乙は、次のとおり契約を締結する。\n\n"
    "## 第1条（目的）\n本契約は、業務の委託について定める。\n\n"
    "## 第2条（委託業務）\n甲は、乙に対し、システムの保守を委託する。\n\n"
    "## 第3条（報酬）\n甲は、乙に対し、月額10万円を支払う。\n\n"
    "## 第4条（秘密保持）\n乙は、業務上知り得た秘密を第三者に開示してはならない。\n\n"
    "以上\n"
)


# ---- StatRev merge-back, by hand


def _entry(run: str, subtask: str = "statrev"):  # type: ignore[no-untyped-def]
    from offline_eval.results.records import RunEntry

    return RunEntry(
        model="m",
        variant="v",
        backend="fake",
        run=run,
        max_model_len=1,
        task="legalrikai",
        setting=f"legalrikai.{subtask}",
        options={"subtask": subtask},
        prompt_format="plain",
        n_items=0,
        primary_metric="score",
        metrics={},
        weights_mb=0.0,
        throughput={},
    )


def test_merge_replaces_the_revised_article_and_keeps_the_rest_byte_for_byte():
    out = "第3条（報酬）\n甲は、乙に対し、月額12万円（消費税別）を支払う。\n"
    m = merge_back(CONTRACT, out)
    assert m.parsed and m.replaced == ["3"] and m.inserted == []
    assert m.text == CONTRACT.replace("月額10万円を支払う。", "月額12万円（消費税別）を支払う。")


def test_merge_adopts_the_contracts_markdown_heading_and_ignores_chatter_and_fences():
    out = "以下のとおり修正します。\n\n```markdown\n### 第2条（委託業務）\n甲は、乙に対し、システムの保守及び運用を委託する。\n```\n"
    m = merge_back(CONTRACT, out)
    assert m.replaced == ["2"]
    assert "## 第2条（委託業務）\n甲は、乙に対し、システムの保守及び運用を委託する。\n\n## 第3条" in m.text
    assert "以下のとおり" not in m.text and "###" not in m.text


def test_merge_inserts_new_articles_in_order_kanji_numbers_match():
    out = (
        "第四条の二（個人情報）\n乙は、個人情報を適切に管理する。\n\n"
        "第二条の二（再委託）\n乙は、甲の書面による承諾なく再委託してはならない。\n\n"
        "第五条（有効期間）\n本契約の有効期間は一年とする。\n"
    )
    m = merge_back(CONTRACT, out)
    assert m.replaced == [] and m.inserted == ["2-2", "4-2", "5"]
    labels = parse(m.text).labels()
    assert labels == ["1", "2", "2-2", "3", "4", "4-2", "5"]
    assert m.text.startswith("# 業務委託契約書") and m.text.endswith("以上\n")
    assert "## 第二条の二（再委託）" in m.text  # the contract's heading level, the model's numerals


def test_merge_first_duplicate_wins_and_unparseable_output_leaves_the_contract():
    m = merge_back(CONTRACT, "第1条（目的）\nA。\n\n第1条（目的）\nB。\n")
    assert "A。" in m.text and "B。" not in m.text
    none = merge_back(CONTRACT, "修正は不要です。")
    assert not none.parsed and none.text == CONTRACT and none.replaced == []


def test_amendexp_sections():
    text = "## 改正の概要\n保存期間が延びた。\n\n## 契約への影響\n保存条項の見直し。\n"
    assert amendexp_sections(text) == {"summary": "保存期間が延びた。", "impact": "保存条項の見直し。"}
    assert amendexp_sections("## 改正の概要\nのみ") is None


# ---- focus
def test_focus_keeps_changed_articles_and_neighbours_aligned_across_renumbering():
    pre = statute(12, {})
    post = statute(12, {6: "事業者は、記録を七年間保存しなければならない。"})
    a, b = focus_statutes(pre, post, neighbours=1)
    assert parse(a).labels() == ["5", "6", "7"] and parse(b).labels() == ["5", "6", "7"]
    assert "七年間" in b and "七年間" not in a
    assert a.startswith("架空法") and a.count(GAP.strip()) == 2 and len(a) < len(pre) / 2
    a0, _ = focus_statutes(pre, post, neighbours=0)
    assert parse(a0).labels() == ["6"]
    # An article inserted in the middle renumbers the rest; they still align, so only the insertion is "changed".
    ins = pre.replace("（第7条の見出し）", "（新設）\n第6条の2　事業者は、新たな義務を負う。\n\n（第7条の見出し）")
    a, b = focus_statutes(pre, ins, neighbours=1)
    assert parse(b).labels() == ["6", "6-2", "7"] and parse(a).labels() == ["6", "7"]


def test_focus_gives_up_when_it_cannot_shorten():
    same = statute(5, {})
    assert focus_statutes(same, same) is None  # nothing changed
    assert focus_statutes(statute(2, {}), statute(2, {1: "変更。"})) is None  # every article kept
    assert focus_statutes("条文なし", "条文なし") is None


# ---- rubrics, schema, judge answers
def test_rubrics_are_the_papers():
    rev = {c.code: (c.lo, c.hi) for c in rubric.criteria("statrev")}
    assert rev == {"IF": (1, 3), "SC": (1, 2), "CP": (1, 2), "TA": (1, 3), "WA": (1, 3)}
    for s in ("reqrev", "riskrev"):
        assert [c.code for c in rubric.criteria(s)] == ["IF", "SC", "CP", "TA", "WA"]
    assert {c.code: (c.lo, c.hi) for c in rubric.criteria("amendexp")} == {
        k: (1, 3) for k in ["CA", "AA", "RA", "CI", "AI", "RI"]
    }
    for s in rubric.SUBTASKS:
        for c in rubric.criteria(s):
            assert c.definition and all(any("\u3040" <= ch <= "\u30ff" for ch in d) for _, d in c.scale)


def test_judge_schema_and_parse():
    sch = rubric.judge_schema("statrev", 20)
    good = {c: {"rationale": "根拠", "score": 1} for c in ["IF", "SC", "CP", "TA", "WA"]}
    jsonschema.validate(good, sch)
    assert judges.parse_answer(rubric.criteria("statrev"), json.dumps(good)) == (
        {c: 1 for c in good},
        {c: "根拠" for c in good},
    )
    for bad in (
        {**good, "SC": {"rationale": "x", "score": 3}},  # SC is 2-point
        {**good, "IF": {"rationale": "x", "score": True}},
        {k: v for k, v in good.items() if k != "WA"},
    ):
        assert judges.parse_answer(rubric.criteria("statrev"), json.dumps(bad)) is None
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, sch)
    assert judges.parse_answer(rubric.criteria("statrev"), "{not json") is None


# ---- normalisation and averaging, by hand
def _judged(scores_a: dict[str, int] | None, scores_b: dict[str, int] | None) -> dict:
    return {"a": {"scores": scores_a, "finish_reason": "stop"}, "b": {"scores": scores_b, "finish_reason": "stop"}}


def test_normalise_and_average_over_judges_by_hand():
    j = _judged({"IF": 3, "SC": 1, "CP": 2, "TA": 2, "WA": 1}, {"IF": 2, "SC": 2, "CP": 2, "TA": 1, "WA": 1})
    # IF: (1 + 0.5)/2; SC: (0 + 1)/2; CP: (1 + 1)/2; TA: (0.5 + 0)/2; WA: 0.
    assert average_scores("statrev", j) == {"IF": 0.75, "SC": 0.5, "CP": 1.0, "TA": 0.25, "WA": 0.0}
    # A judge that failed does not count: the other's scores stand alone.
    assert average_scores("statrev", _judged({"IF": 2, "SC": 2, "CP": 1, "TA": 3, "WA": 3}, None)) == {
        "IF": 0.5,
        "SC": 1.0,
        "CP": 0.0,
        "TA": 1.0,
        "WA": 1.0,
    }
    assert average_scores("statrev", _judged(None, None)) == {}


def _rec(i: str, inp: str, judges: dict, **kw) -> LegalRikaiRecord:
    fields = {
        "id": i,
        "subtask": "statrev",
        "input": inp,
        "output": "",
        "finish_reason": "stop",
        "prompt_tokens": 0,
        "output_tokens": 0,
        "gold": "",
        "parsed": {},
        "judges": judges,
        "scores": average_scores("statrev", judges) if inp != "skipped" else {},
        "checks": {
            "diff_chars": 10,
            "changed_precision": 1.0,
            "changed_recall": 0.5,
            "changed_f1": 2 / 3,
            "introduced_defects": 1,
        }
        if inp != "skipped"
        else None,
    }
    return LegalRikaiRecord(**{**fields, **kw})


def test_aggregate_by_hand():
    full = {"IF": 3, "SC": 2, "CP": 2, "TA": 3, "WA": 3}
    low = {"IF": 1, "SC": 1, "CP": 1, "TA": 1, "WA": 1}
    recs = [
        _rec("1", "full", _judged(full, low)),  # Avg 0.5 everywhere
        _rec("2", "focused", _judged(full, None)),  # judge b failed: Avg 1.0 everywhere
        _rec("3", "skipped", {}),
    ]
    m = aggregate("statrev", recs)
    assert (m["n_items"], m["n_full"], m["n_focused"], m["n_skipped"], m["n_judged"]) == (3, 1, 1, 1, 2)
    assert (m.judges["a"].failures, m.judges["b"].failures) == (0, 1)
    assert (m.judges["a"].overflow, m.judges["b"].overflow) == (0, 0)
    shares = m.groups("criterion", "focused_share")
    for c in ["IF", "SC", "CP", "TA", "WA"]:
        assert m[c] == 0.75 and shares[c].value == 0.5
        assert m.judges["a"].criteria[c] == 1.0 and m.judges["b"].criteria[c] == 0.0
    assert m["score"] == 0.75 and m["diff_chars"] == 10 and m["changed_recall"] == 0.5
    item = LegalRikaiTask.paired_declaration().item  # the score's declaration gives each item's score
    assert item is not None and item(recs[0]) == 0.5 and item(recs[2]) is None


# ---- human scores and agreement against scipy / sklearn
def _human_csv(tmp_path, rows: list[list]) -> str:
    p = tmp_path / "human.csv"
    p.write_text(
        "task,item_id,model,criterion,score,annotator\n" + "".join(",".join(map(str, r)) + "\n" for r in rows),
        encoding="utf-8",
    )
    return str(p)


def test_agreement_matches_scipy_and_sklearn_with_ties_and_a_constant_column(tmp_path):
    rng = np.random.default_rng(7)
    n = 12
    ids = [f"s{i}" for i in range(n)]
    crits = ["IF", "SC", "CP", "TA", "WA"]
    hi = {"IF": 3, "SC": 2, "CP": 2, "TA": 3, "WA": 3}
    judge = {i: {c: int(rng.integers(1, hi[c] + 1)) for c in crits} for i in ids}
    ann_a = {i: {c: int(rng.integers(1, hi[c] + 1)) for c in crits} for i in ids}
    ann_b = {
        i: {c: (ann_a[i][c] if rng.random() < 0.6 else int(rng.integers(1, hi[c] + 1))) for c in crits} for i in ids
    }
    for i in ids:  # TA: every human label the same -> kappa and rho are nan
        ann_a[i]["TA"] = ann_b[i]["TA"] = 3
    rows = [
        ["statrev", i, "m", c, a[i][c], name] for i in ids for c in crits for a, name in ((ann_a, "A"), (ann_b, "B"))
    ]
    human = read_human_scores(_human_csv(tmp_path, rows))
    recs = [_rec(i, "full", {"J": {"scores": judge[i]}}) for i in ids]
    runs = [_entry("m.llamacpp.x.ctx1")]
    res = agreement(human, runs, {RunKey("m.llamacpp.x.ctx1", "legalrikai.statrev"): recs}, ["J"], "human.csv")
    assert res.matched_outputs == n and not res.unmatched
    for c in crits:
        crit = next(x for x in rubric.criteria("statrev") if x.code == c)
        h = [np.mean([crit.normalise(ann_a[i][c]), crit.normalise(ann_b[i][c])]) for i in ids]
        j = [crit.normalise(judge[i][c]) for i in ids]
        k = res.kappa["statrev"][c]
        rho = res.spearman["statrev"]["J"][c]
        if c == "TA":
            assert k.kappa is None and k.n == n and rho.rho is None
            continue
        assert k.kappa == pytest.approx(
            cohen_kappa_score([ann_a[i][c] for i in ids], [ann_b[i][c] for i in ids]), abs=1e-4
        )
        ref = stats.spearmanr(j, h)
        assert rho.rho == pytest.approx(ref.statistic, abs=1e-4) and rho.p == pytest.approx(ref.pvalue, abs=1e-4)
        assert res.spearman["statrev"]["Avg"][c] == rho  # one judge: Avg is that judge
        assert res.mae["statrev"]["J"][c].mae == pytest.approx(np.mean(np.abs(np.array(j) - h)), abs=1e-4)
        raw_h = [np.mean([ann_a[i][c], ann_b[i][c]]) for i in ids]  # the paper's Table 8: on the points
        assert res.mae["statrev"]["J"][c].mae_points == pytest.approx(
            mean_absolute_error(raw_h, [judge[i][c] for i in ids]), abs=1e-4
        )
        assert res.human_scores["statrev"]["m.llamacpp.x.ctx1"][c] == pytest.approx(np.mean(h), abs=1e-4)


def test_human_rows_that_match_nothing_are_counted_not_fatal(tmp_path):
    human = read_human_scores(
        _human_csv(tmp_path, [["statrev", "nope", "m", "IF", 2, "A"], ["statrev", "s1", "other", "IF", 2, "A"]])
    )
    recs = [_rec("s1", "full", {})]
    runs = [_entry("m.a.b.ctx1"), _entry("m.a.c.ctx1")]
    res = agreement(human, runs, {RunKey("m.a.b.ctx1", "legalrikai.statrev"): recs}, [], "h.csv")
    assert res.matched_outputs == 0
    assert res.unmatched == ["1 row(s): item not in this sweep", "1 row(s): model matches no run"]
    # The calibration's lines name the file, the first such row and the field.
    path = str(tmp_path / "human.csv")
    labels = human_labels(path, None, runs, {RunKey("m.a.b.ctx1", "legalrikai.statrev"): recs})
    assert labels is not None and labels.notes == [
        f"1 row(s): item not in this sweep (first: {path}, row 2, field item_id)",
        f"1 row(s): model matches no run (first: {path}, row 3, field model)",
    ]
    # A model name with two runs is ambiguous: the run name is needed.
    amb = read_human_scores(_human_csv(tmp_path, [["statrev", "s1", "m", "IF", 2, "A"]]))
    res = agreement(amb, runs, {RunKey("m.a.b.ctx1", "legalrikai.statrev"): recs}, [], "h.csv")
    assert "matches 2 runs; give the run name" in res.unmatched[0]


@pytest.mark.parametrize(
    "row, field, needle",
    [
        (["statrev", "s1", "m", "IF", 4, "A"], "score", "not an integer from 1 to 3"),
        (["statrev", "s1", "m", "SC", 3, "A"], "score", "not an integer from 1 to 2"),
        (["statrev", "s1", "m", "XX", 1, "A"], "criterion", "unknown criterion"),
        (["statrev", "s1", "m", "IF", 2, ""], "annotator", "missing"),
        (["nosuch", "s1", "m", "IF", 2, "A"], "task", "unknown task"),
    ],
)
def test_bad_human_scores_name_file_row_and_field(tmp_path, row, field, needle):
    path = _human_csv(tmp_path, [["statrev", "s0", "m", "IF", 1, "A"], row])
    with pytest.raises(InputError) as e:
        read_human_scores(path)
    msg = str(e.value)
    assert path in msg and "row 3" in msg and f"'{field}'" in msg and needle in msg


def test_sample_human_scores_read_and_have_a_constant_column():
    rows = read_human_scores(str(ROOT / "data" / "legalrikai" / "human_scores.csv"))
    ta = {r["score"] for r in rows if r["task"] == "statrev" and r["criterion"] == "TA"}
    assert len(rows) > 100 and ta == {3}


# ---- options and data
def test_field_map_per_subtask_and_data_paths(tmp_path):
    src = ROOT / "data" / "legalrikai" / "reqrev.jsonl"
    renamed = [
        {("input_contract" if k == "contract" else "answer" if k == "gold" else k): v for k, v in json.loads(x).items()}
        for x in src.read_text(encoding="utf-8").splitlines()
    ]
    (tmp_path / "reqrev.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in renamed), encoding="utf-8"
    )
    t = LegalRikaiTask.from_options(
        {
            "protocol": "offline-eval",
            "data": str(tmp_path),
            "field_map": {"reqrev": {"contract": "input_contract", "gold": "answer"}},
        }
    )
    items = t.load()
    assert [s["subtask"] for s in t.settings()] == ["reqrev"] and len(items) == 3
    assert items[0].contract.startswith("# 業務委託契約書")
    flat = LegalRikaiTask.from_options(
        {
            "protocol": "offline-eval",
            "data": {"reqrev": str(tmp_path / "reqrev.jsonl")},
            "field_map": {"contract": "input_contract", "gold": "answer"},
        }
    )
    assert len(flat.load()) == 3
    with pytest.raises(InputError, match="gold.*missing|missing"):
        LegalRikaiTask.from_options({"protocol": "offline-eval", "data": str(tmp_path)}).load()
    with pytest.raises(InputError, match="no data for statrev"):
        LegalRikaiTask.from_options(
            {"protocol": "offline-eval", "data": str(tmp_path), "subtasks": ["statrev"]}
        ).paths()
    with pytest.raises(InputError, match="unknown sub-task"):
        LegalRikaiTask.from_options({"protocol": "offline-eval", "data": {"statrevv": str(src)}}).paths()


def test_prompts_are_japanese_and_carry_the_inputs():
    from offline_eval.tasks.legalrikai.schema import AmendExpItem, RevisionItem, StatRevItem
    from offline_eval.tasks.legalrikai.task import LegalRikaiJudges

    t = LegalRikaiTask.from_options({"protocol": "offline-eval", "data": str(ROOT / "data" / "legalrikai")})
    items = t.load()
    assert t.evaluation() is None  # no judges configured: no second stage
    judges = LegalRikaiJudges(t)
    assert sorted({i.subtask for i in items}) == ["amendexp", "reqrev", "riskrev", "statrev"]
    for it in items:
        phase = t.build([it], {"subtask": it.subtask, "overflow": "focus"})
        user = phase.requests[0].messages[1][1]
        if isinstance(it, StatRevItem | RevisionItem):
            assert it.contract in user
        if isinstance(it, AmendExpItem | StatRevItem):
            assert it.statute_pre in user and it.statute_post in user
        for x in it.instructions if isinstance(it, RevisionItem) else []:
            assert x in user
        req = judges.judge(it, user, "回答", Sampling(), JsonSchema({"type": "object"}))
        judge = req.messages[1][1]  # type: ignore[index]
        assert judge[req.shared_chars :].strip() == "回答"  # the response last, after everything candidates share
        assert "# 評価基準" in judge and "回答" in judge and user in judge
        for c in rubric.criteria(it.subtask):
            assert c.definition in judge
    st = next(i for i in items if i.subtask == "statrev")
    from offline_eval.tasks.legalrikai.task import judge_gold

    gold = parse(judge_gold(st))  # only the gold's revised articles, the form a StatRev answer takes
    full, src = parse(st.gold), parse(st.contract)
    assert gold.labels() and len(gold.articles) < len(full.articles) / 2
    for a in gold.articles:
        assert a.raw.strip() == full.article(a.label).raw.strip()
        assert src.article(a.label) is None or src.article(a.label).raw.strip() != a.raw.strip()


def test_validate_data_cli_for_the_whole_folder():
    from conftest import run_cli

    p = run_cli("data", "validate", "legalrikai", str(ROOT / "data" / "legalrikai"))
    assert p.returncode == 0, p.stderr
    assert "3 amendexp, 3 statrev, 3 reqrev, 3 riskrev" in p.stdout


@pytest.mark.slow
def test_validate_cli_field_map_errors_are_one_line():
    from conftest import run_cli

    for task, path in (
        ("legalrikai", ROOT / "data" / "legalrikai"),
        ("statrev", ROOT / "data" / "legalrikai" / "statrev.jsonl"),
    ):
        p = run_cli("data", "validate", task, str(path), "--field-map", "{bad")
        assert p.returncode == 2 and "Traceback" not in p.stderr
        assert "field '--field-map': not valid JSON" in p.stderr
