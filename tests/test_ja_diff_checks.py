"""Diffs (hand-counted and against an independent edit distance), article alignment, change precision,
and structure findings on hand-made cases and the planted-defect sample."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, run_cli

from offline_eval.ja.align import align, change_precision, changed_set, changes
from offline_eval.ja.checks import check, introduced_defects
from offline_eval.ja.contract import parse
from offline_eval.ja.diff import diff_texts

C = ROOT / "data" / "contracts"


def load(name: str):  # type: ignore[no-untyped-def]
    return parse((C / name).read_text(encoding="utf-8"))


def _edit_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def test_hand_counted_diffs():
    s = diff_texts("第5条の期間は30日とする。", "第5条の期間は60日とする。").stats
    assert (s.replaced_chars_from, s.replaced_chars_to, s.inserted_chars, s.deleted_chars) == (1, 1, 0, 0)
    assert s.diff_chars == 2
    s = diff_texts("甲は乙に通知する。", "甲は乙に書面で通知する。").stats
    assert (s.inserted_chars, s.deleted_chars, s.diff_chars) == (3, 0, 3)
    assert (s.inserted_morphemes, s.deleted_morphemes) == (2, 0)  # 書面 / で
    s = diff_texts("一行目\n二行目\n三行目\n", "一行目\n三行目\n").stats
    assert (s.deleted_chars, s.inserted_chars, s.diff_chars) == (4, 0, 4)
    s = diff_texts("同じ\n", "同じ\n").stats
    assert s.diff_chars == 0 and s.diff_morphemes == 0


@pytest.mark.parametrize(
    "a,b",
    [
        ("契約の解除は書面で行う。", "本契約の解除は、書面により行うものとする。"),
        ("abcdef", "azcdxf"),
        ("", "新しい条項"),
        ("削除される文", ""),
    ],
)
def test_single_line_edit_counts_match_an_independent_edit_distance(a, b):
    s = diff_texts(a, b).stats
    assert s.replaced_chars_from == s.replaced_chars_to
    assert s.inserted_chars + s.deleted_chars + s.replaced_chars_from == _edit_distance(a, b)


def test_ops_rebuild_both_texts():
    a = (C / "service_agreement.md").read_text(encoding="utf-8")
    b = (C / "service_agreement.revised_insert.md").read_text(encoding="utf-8")
    d = diff_texts(a, b)
    assert "".join(a[o[1] : o[2]] for o in d.ops) == a
    assert "".join(b[o[3] : o[4]] for o in d.ops) == b


def test_alignment_survives_renumbering():
    src, ins = load("service_agreement.md"), load("service_agreement.revised_insert.md")
    pairs = [(p.a, p.b) for p in align(src, ins)]
    assert pairs == [
        (0, 0),
        (1, 1),
        (2, 2),
        (3, 3),
        (None, 4),
        (4, 5),
        (5, 6),
        (6, 7),
        (7, 8),
        (8, 9),
        (9, 10),
        (10, 11),
    ]
    kinds = [(c.kind, c.a_label, c.b_label) for c in changes(src, ins)]
    assert ("inserted", None, "5") in kinds and ("renumbered", "5", "6") in kinds
    assert ("changed", "9", "10") in kinds  # its reference 第7条 became 第8条
    assert set(changed_set(src, ins)) == {"+after:4", "9"}


def test_change_precision_hand_made():
    src, clean = load("service_agreement.md"), load("service_agreement.revised_clean.md")
    assert set(changed_set(src, clean)) == {"4", "5"}
    same = change_precision(src, clean, clean)
    assert same["changed_precision"] == same["changed_recall"] == same["changed_f1"] == 1.0
    assert same["chars_changed_outside_gold"] == 0
    # The model changed 第4条 as asked, and also 第10条, which nobody asked for.
    text = (C / "service_agreement.revised_clean.md").read_text(encoding="utf-8")
    extra = parse(text.replace("甲乙誠実に協議の上", "甲乙誠実に協議し"))
    gold_only4 = parse(
        (C / "service_agreement.md").read_text(encoding="utf-8").replace("月額金五十万円", "月額金六十万円")
    )
    r = change_precision(src, extra, gold_only4)
    assert (r["n_changed_model"], r["n_changed_gold"]) == (3, 1)
    assert r["changed_precision"] == pytest.approx(1 / 3) and r["changed_recall"] == 1.0
    assert r["changed_f1"] == pytest.approx(2 * (1 / 3) / (1 / 3 + 1))
    # Outside the gold's article: all of 第5条's edit plus 第10条's ("の上" -> "し").
    c = {k: v.stats.diff_chars for k, v in changed_set(src, extra).items()}
    assert r["chars_changed_outside_gold"] == c["5"] + c["10"] and c["10"] == 3


def test_planted_defects_are_found_exactly():
    found = [(f.kind, f.location, f.message) for f in check(load("service_agreement.revised_defects.md"))]
    assert found == [
        ("numbering_gap", "document", "article 8 missing between 7 and 9"),
        ("dangling_reference", "第10条第2項", "第13条 points nowhere: article 13 does not exist"),
        ("term_defined_twice", "line 28", "「秘密情報」 is defined 2 times"),
    ]


@pytest.mark.parametrize(
    "name",
    [
        "service_agreement.md",
        "nda.md",
        "sales_master.md",
        "data_processing.md",
        "service_agreement.revised_clean.md",
        "service_agreement.revised_insert.md",
    ],
)
def test_clean_samples_have_no_findings(name):
    assert check(load(name)) == []


def test_introduced_defects_only():
    src = load("service_agreement.md")
    assert introduced_defects(src, load("service_agreement.revised_clean.md")) == []
    assert introduced_defects(src, load("service_agreement.revised_insert.md")) == []
    assert len(introduced_defects(src, load("service_agreement.revised_defects.md"))) == 3
    stale = (
        (C / "service_agreement.revised_insert.md")
        .read_text(encoding="utf-8")
        .replace("第8条に基づく損害賠償", "第7条に基づく損害賠償")
    )
    [f] = introduced_defects(src, parse(stale))
    assert (f.kind, f.location) == ("moved_reference", "第10条第2項")
    assert f.message == "第7条 still points at article 7, which is now article 8"
    # A defect already in the input is not the output's fault.
    assert (
        introduced_defects(load("service_agreement.revised_defects.md"), load("service_agreement.revised_defects.md"))
        == []
    )


def test_other_findings_hand_made():
    t = (
        "# 契約書\n\n乙は甲に報告する。A社（以下「甲」という。）とB社（以下「乙」という。）は契約する。\n\n"
        "## 第1条（目的）\n1. 甲は委託する。\n3. 乙は受託する。\n\n第2条（業務）\n(1) 保守\n\n"
        "## 第2条（期間）\n一年とする。\n"
    )
    got = sorted((f.kind, f.location, f.message) for f in check(parse(t)))
    assert ("numbering_duplicate", "document", "article 2 appears more than once") in got
    assert ("numbering_gap", "第1条", "paragraph 2 missing between 1 and 3") in got
    assert ("term_used_before_definition", "line 3", "「甲」 is used before it is defined") in got
    assert ("term_used_before_definition", "line 3", "「乙」 is used before it is defined") in got
    assert [k for k, *_ in got].count("inconsistent_heading") == 1
    assert len(got) == 5


@pytest.mark.slow
def test_ja_cli(tmp_path):
    a, b = str(C / "service_agreement.md"), str(C / "service_agreement.revised_insert.md")
    st = run_cli("ja", "stats", a, "--json")
    assert st.returncode == 0 and json.loads(st.stdout)["articles"] == 11
    df = run_cli("ja", "diff", a, b, "--json")
    assert df.returncode == 0
    j = json.loads(df.stdout)
    assert j["stats"]["diff_chars"] == diff_texts(open(a).read(), open(b).read()).stats.diff_chars
    assert {"kind": "inserted", "a": None, "b": "5", "key": "+after:4", "diff_chars": 93} in j["articles"]
    plain = run_cli("ja", "diff", a, b, "--color", "never")
    assert "第[-7-]{+8+}条" in plain.stdout and "\x1b[" not in plain.stdout
    color = run_cli("ja", "diff", a, b, "--color", "always")
    assert "\x1b[31m7\x1b[0m\x1b[32m8\x1b[0m" in color.stdout
    ck = run_cli("ja", "check", str(C / "service_agreement.revised_defects.md"), "--against", a, "--strict")
    assert ck.returncode == 1 and "dangling_reference" in ck.stdout
    bad = tmp_path / "sjis.md"
    bad.write_bytes("第1条（目的）\n".encode() + "本契約".encode("shift_jis"))
    e = run_cli("ja", "check", str(bad))
    assert e.returncode == 2 and "line 2" in e.stderr and "not UTF-8" in e.stderr and "Traceback" not in e.stderr
