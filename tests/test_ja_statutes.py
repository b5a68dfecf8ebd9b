"""Drafting conventions of enacted statutes and contracts: references into other laws, context carried along
ranges and lists, 同条/同項/同号, iroha sub-items, definitions. Texts in tests/ja_texts are in the e-Gov
plain-text layout (and a Markdown contract); the *_defects copies carry planted defects (labels.json)."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

from offline_eval.ja.checks import check
from offline_eval.ja.contract import parse, render
from offline_eval.ja.labeled import evaluate
from offline_eval.ja.references import counts, extract, scan
from offline_eval.ja.show import stats

T = ROOT / "tests" / "ja_texts"


def load(name: str):  # type: ignore[no-untyped-def]
    return parse((T / name).read_text(encoding="utf-8"))


def table(doc):  # type: ignore[no-untyped-def]
    """(text, article it sits in, status, targets, law) of every reference."""
    return [
        (r.text, r.source_article, r.status, [(t.article, t.paragraph, t.item, t.sub) for t in r.targets], r.law)
        for r in scan(doc)
    ]


def test_egov_act_has_no_findings_and_counts_three_kinds():
    d = load("egov_act.txt")
    assert check(d) == []
    # 意見公募手続 is defined (unscoped) in 第九条 and appears before only in the table of contents, the
    # chapter heading and the caption; 規則 is defined inside the very phrase that uses it.
    src = d.source
    assert src.index("意見公募手続") < src.index("以下「意見公募手続」という") and "「規則」" in src
    s = stats(d)
    assert (s["articles"], s["paragraphs"], s["items"], s["sub_items"]) == (12, 27, 18, 9)
    assert (s["internal_references"], s["external_references"], s["dangling_references"]) == (48, 7, 0)
    assert s["references"] == 55
    assert s["external_laws"] == ["内閣府設置法 (2)", "出入国管理及び難民認定法 (2)", "民法 (2)", "地方自治法 (1)"]
    assert d.labels() == ["1", "2", "3", "4", "5", "6", "7", "8", "8-2", "9", "10", "11"]  # 附則 is not renumbered in


def test_references_into_other_laws_are_external_with_their_names():
    got = [x for x in table(load("egov_act.txt")) if x[2] == "external"]
    assert got == [
        ("第四十九条第一項", "3", "external", [("49", 1, None, None)], "内閣府設置法"),
        ("第二項", "3", "external", [("49", 2, None, None)], "内閣府設置法"),  # 若しくは第二項: the same law
        ("第六十一条の二第一項", "3", "external", [("61-2", 1, None, None)], "出入国管理及び難民認定法"),
        ("同条第二項", "3", "external", [("61-2", 2, None, None)], "出入国管理及び難民認定法"),
        ("第五百四十一条", "3", "external", [("541", None, None, None)], "民法"),
        ("第五百四十二条", "3", "external", [("542", None, None, None)], "民法"),  # 同法
        ("第二百五十二条の十九第一項", "3", "external", [("252-19", 1, None, None)], "地方自治法"),
    ]
    # extract() keeps its old meaning: the document's own references only.
    assert all(r.law is None for r in extract(load("egov_act.txt")))


def test_regulation_refers_to_its_act_as_law():
    d = load("egov_rules.txt")
    assert check(d) == []
    ext = [(text, law) for text, _, status, _, law in table(d) if status == "external"]
    assert ext == [
        ("第三条第二項第四号", "架空行政手続法"),
        ("第九条第一項", "架空行政手続法"),
        ("第三条第二項第四号", "法"),
        ("第二条第五号イ", "法"),
        ("第九条第二項", "法"),
        ("第五条", "架空行政手続法施行令"),
        ("第六条第一項", "架空行政手続法施行令"),  # 同令
        ("第十条第一項各号", "法"),
        ("第二条", "規則"),
        ("第三条第一項", ""),
    ]  # （令和四年法律第五十号）
    internal = [(text, targets) for text, _, status, targets, _ in table(d) if status == "internal"]
    assert ("第一条", [("1", None, None, None)]) in internal  # 本府令第一条
    assert ("第二条", [("2", None, None, None)]) in internal  # この府令第二条
    assert ("同号", [("3", 1, 2, None)]) in internal  # 前項第二号, then 同号 (after 法第二条第五号イ)


@pytest.mark.parametrize(
    "text,art,targets",
    [
        ("前条第二項から第四項まで", "4", [("3", 2, None, None), ("3", 4, None, None)]),  # range inherits 前条
        ("同条第二項", "4", [("3", 2, None, None)]),  # 同条: the article last mentioned (前条), not 前項's
        ("第四項", "4", [("3", 4, None, None)]),  # 同条第二項及び第四項
        ("第四項", "5", [("6", 4, None, None)]),  # 第六条第三項又は第四項
        ("第三号から第五号まで", "3", [("3", 2, 3, None), ("3", 2, 5, None)]),  # bare items: this paragraph's
        ("第三号", "7", [("3", 1, 3, None)]),  # 第三条第一項第二号、第三号及び第五号
        ("第五号", "7", [("3", 1, 5, None)]),
        ("同項第四号", "7", [("3", 1, 4, None)]),  # 同項: the paragraph last mentioned
        ("第二号", "11", [("10", 1, 2, None)]),
        ("第二条第五号ニ", "8-2", [("2", None, 5, 4)]),  # a sub-item: katakana ニ is the fourth iroha letter
        ("前号", "2", [("2", 1, 4, None)]),  # inside sub-item (1) of item 五: counts from 五
        ("前二号", "3", [("3", 1, 3, None), ("3", 1, 4, None)]),
        ("前三項", "3", [("3", 1, None, None), ("3", 2, None, None), ("3", 3, None, None)]),
    ],
)
def test_context_carried_along_chains_and_ranges(text, art, targets):
    rows = [x for x in table(load("egov_act.txt")) if x[0] == text and x[1] == art]
    assert rows and rows[0][2] == "internal" and rows[0][3] == targets


def test_iroha_sub_items_are_their_own_level_and_round_trip():
    src = (T / "egov_act.txt").read_text(encoding="utf-8")
    d = parse(src)
    assert render(d) == src
    a2 = d.article("2")
    assert [p.number for p in a2.paragraphs] == [1]  # ニ and ホ are not paragraphs
    items = a2.paragraphs[0].items
    assert [(i.number, i.marker) for i in items] == [(n, m) for n, m in zip(range(1, 7), "一二三四五六")]
    subs = items[4].children
    assert [(c.marker, c.number, c.family) for c in subs] == [
        ("イ", 1, "iroha"),
        ("ロ", 2, "iroha"),
        ("ハ", 3, "iroha"),
        ("ニ", 4, "iroha"),
        ("ホ", 5, "iroha"),
    ]
    assert [(c.marker, c.family) for c in subs[3].children] == [("（１）", "paren"), ("（２）", "paren")]
    assert [(c.marker, c.number, c.family) for c in subs[3].children[1].children] == [
        ("（ｉ）", 1, "roman"),
        ("（ｉｉ）", 2, "roman"),
    ]

    # Every node's span starts with its marker, and an item's span covers its sub-items.
    def walk(it):  # type: ignore[no-untyped-def]
        assert src[it.start : it.end].startswith(it.marker) and it.text in src[it.start : it.end]
        for c in it.children:
            assert it.start < c.start and c.end <= it.end
            walk(c)

    for it in items:
        walk(it)
    assert items[4].end == subs[-1].end


def test_contract_conventions():
    d = load("contract_conventions.md")
    assert check(d) == []
    a2 = d.article("2").paragraphs[0].items
    assert [c.marker for c in a2[1].children] == ["イ", "ロ", "ハ", "ニ"]
    rows = {(x[0], x[1]): x for x in table(d)}
    assert rows[("前条第2項から第4項まで", "4")][3] == [("3", 2, None, None), ("3", 4, None, None)]
    assert rows[("第3項", "4")][3] == [("3", 3, None, None)]  # 第3条第1項又は第3項
    assert rows[("同条第2項", "4")][3] == [("3", 2, None, None)]
    assert rows[("第4項", "4")][3] == [("3", 4, None, None)]
    assert rows[("第2条第1項第2号イ", "5")][2:4] == ("internal", [("2", 1, 2, 1)])  # 本契約第2条…
    assert rows[("前項第2号ロ", "2")][3] == [("2", 1, 2, 2)]
    assert rows[("第541条", "5")][2::2] == ("external", "民法")
    assert rows[("第542条", "5")][2::2] == ("external", "民法")
    assert rows[("第5条", "5")][2] == rows[("第6条", "5")][2] == "external"  # another contract (基本契約)
    assert counts(scan(d)) == {"internal": 12, "external": 4, "dangling": 0}


def test_planted_defects_found_exactly_and_nothing_else():
    labels = json.loads((T / "labels.json").read_text(encoding="utf-8"))
    for name in ("egov_act_defects.txt", "contract_conventions_defects.md"):
        got = sorted((f.kind, f.location) for f in check(load(name)))
        assert got == sorted(tuple(x) for x in labels[f"tests/ja_texts/{name}"]), name
    ev = evaluate(T / "labels.json", ROOT)
    assert ev["false_findings"] == [] and ev["missed"] == []
    assert ev["precision"] == ev["recall"] == 1.0 and ev["planted"] == 14 and ev["documents"] == 19


def test_dangling_findings_carry_the_text_span():
    d = load("contract_conventions_defects.md")
    f = next(f for f in check(d) if f.location == "第4条第3項")
    assert f.kind == "dangling_reference" and f.message == "第6項 points nowhere: article 3 has no paragraph 6"
    line, chars, text = f.span.split(", ", 1)[0], f.span.split(", ")[1].split(":")[0], f.span.split(": ")[1]
    a, b = (int(x) for x in chars.removeprefix("chars ").split("-"))
    assert d.source[a:b] == text == "第6項"
    assert line == f"line {d.source.count(chr(10), 0, a) + 1}"


DEFS = """# 委託契約書

## 第1条（目的）
本契約は、地方公共団体の執行機関の規則（規程を含む。以下「規則」という。）に従い、業務を委託する。

## 第2条（受託者の義務）
1. 受託者は、規則を遵守する。
2. この条において「報告」とは、書面による報告をいう。

## 第3条（報告）
1. この条において「報告」とは、電磁的方法による報告をいう。
2. 委託者（以下「甲」という。）は、報告を求めることができる。
"""


def test_definitions_in_the_same_phrase_headings_and_scopes():
    assert check(parse(DEFS)) == []  # 規則 used in its own defining phrase; 報告 defined once per article
    early = DEFS.replace("1. 受託者は、規則を遵守する。", "1. 受託者は、甲の指示に従う。")
    found = [(f.kind, f.message) for f in check(parse(early))]
    assert found == [("term_used_before_definition", "「甲」 is used before it is defined")]
    twice = DEFS.replace("この条において「報告」とは、電磁的", "「報告」とは、電磁的").replace(
        "2. この条において「報告」とは", "2. 「報告」とは"
    )
    assert [f.kind for f in check(parse(twice))] == ["term_defined_twice"]
    # A term in a chapter heading or an article caption before its definition is not a use.
    statute = (
        "架空法\n\n第一章　意見公募手続等\n\n（意見公募手続）\n"
        "第一条　機関は、意見を求めなければならない（以下「意見公募手続」という。）。\n"
        "２　意見公募手続は、三十日以上とする。\n"
    )
    assert check(parse(statute)) == []
    body_use = statute.replace("第一条　機関は、", "第一条　機関は、意見公募手続により、")
    assert [f.kind for f in check(parse(body_use))] == []  # same sentence: still no finding
    before = statute.replace("架空法\n", "架空法\n\n意見公募手続を定める。\n")
    assert [(f.kind, f.location) for f in check(parse(before))] == [("term_used_before_definition", "line 3")]


def test_numbering_of_sub_items_is_checked():
    t = "第一条　次に掲げるもの\n一　甲\nイ　あ\nロ　い\nニ　う\n二　乙\n"
    got = [(f.kind, f.location, f.message) for f in check(parse(t))]
    assert got == [("numbering_gap", "第1条第1項第1号", "sub-item of 一: ハ missing between ロ and ニ")]
    # アイウ lists are a family of their own: no gap for ア イ ウ.
    assert check(parse("第一条　次に掲げるもの\n一　甲\nア　あ\nイ　い\nウ　う\n")) == []


def test_supplementary_provisions_do_not_renumber_the_act():
    src = (T / "egov_act.txt").read_text(encoding="utf-8")
    d = parse(src)
    assert d.signature.lstrip().startswith("附　則") and "第二条　前条の規定" in d.signature
    assert render(d) == src


def test_numbered_terms_and_law_numbers_are_not_references():
    t = (
        "架空年金法（令和五年法律第百号）\n\n（定義）\n第一条　この法律において「第三号被保険者」とは、次に掲げる者をいう。\n"
        "一　配偶者\n２　第三号被保険者は、別記様式第五号により届け出る。第一号に掲げる者も、同様とする。\n"
    )
    refs = [(r.text, r.status) for r in scan(parse(t))]
    assert refs == [("第一号", "internal")]
    assert check(parse(t)) == []


def test_amendment_conventions_repealed_ranges_branch_items_and_reading_as():
    t = (
        "架空法\n\n（目的）\n第一条　この法律は、目的を定める。\n\n（定義）\n第二条　次に掲げる者をいう。\n一　甲\n一の二　乙\n二　丙\n\n"
        "第三条から第五条まで　削除\n\n（準用）\n第六条　第二条第一号の二及び皇室典範（昭和二十二年法律第三号）第二十六条の規定は、"
        "前条の場合について準用する。この場合において、第二条中「前項第三号」とあるのは「同条第九項」と読み替えるものとする。\n"
    )
    d = parse(t)
    assert [(i.marker, i.number, i.suffix) for i in d.article("2").paragraphs[0].items] == [
        ("一", 1, None),
        ("一の二", 1, 2),
        ("二", 2, None),
    ]
    assert check(d) == []  # no gap for 3-5, no duplicate item 1, nothing read inside 「」
    assert [p.number for p in d.article("2").paragraphs] == [1]  # the repealed range is not a paragraph
    refs = [(r.text, r.status, r.law) for r in scan(d)]
    assert refs == [
        ("第二条第一号の二", "internal", None),
        ("第二十六条", "external", "皇室典範"),
        ("前条", "internal", None),
        ("第二条", "internal", None),
    ]
    # 前条 of 第六条 is 第二条 here (the repealed ones are not articles of the text) and it resolves.
    assert next(r for r in scan(d) if r.text == "前条").targets[0].article == "2"
    assert [f.kind for f in check(parse(t.replace("第三条から第五条まで　削除\n\n", "")))] == ["numbering_gap"]


def test_hearing_act_conventions():
    d = load("egov_hearing.txt")
    assert check(d) == []
    rows = table(d)
    by = {(x[0], x[1]): x for x in rows}
    assert by[("第二条第一号の二イ", "3")][2:4] == ("internal", [("2", None, 1, 1)])
    assert next(r for r in scan(d) if r.text == "第二条第一号の二イ").targets[0].branch == 2
    assert by[("同条第三項", "5")][3] == [("4", 3, None, None)]  # 同条第三項後段: 前条 was named last
    assert by[("同条第二項第三号", "6")][3] == [("8", 2, 3, None)]  # inside （同条第二項第三号において「関係人」…）
    assert by[("第二十六条", "2")][2::2] == ("external", "皇室典範")
    assert by[("第三条第二項", "2")][2::2] == ("external", "国家行政組織法")
    assert by[("第八条", "2")][2::2] == ("external", "国家行政組織法")
    # The reading-as provision quotes 「前条第一項」「同条第三項後段」: nothing inside quotes is read.
    assert [x[0] for x in rows if x[1] == "8-3"] == ["第四条第三項", "第五条", "第四条第三項", "第五条第一項"]
    # A dangling 第一号の三 is still caught.
    bad = (T / "egov_hearing.txt").read_text(encoding="utf-8").replace("第二条第一号の二イ", "第二条第一号の三イ")
    assert [(f.kind, f.message) for f in check(parse(bad))] == [
        ("dangling_reference", "第二条第一号の三イ points nowhere: article 2 has no item 1-3")
    ]


def test_a_parenthesis_right_after_a_reference_narrows_that_reference():
    t = (
        "第一条　次に掲げる者\n一　甲\n二　乙\n２　前項の者\n"
        "第二条　第一条第一項（第二号に係る部分に限る。）の規定は、前項（第三号を除く。）の場合に準用する。\n"
        "２　民法第五条（第二号に係る部分に限る。）を準用する。\n３　第一号に掲げる場合\n"
    )
    rows = [(r.text, r.status, [(x.article, x.paragraph, x.item) for x in r.targets], r.law) for r in scan(parse(t))]
    assert rows == [
        ("前項", "internal", [("1", 1, None)], None),
        ("第一条第一項", "internal", [("1", 1, None)], None),
        ("第二号", "internal", [("1", 1, 2)], None),
        ("前項", "dangling", [], None),
        ("第三号", "dangling", [("2", None, 3)], None),  # 前項 of a first paragraph: no context
        ("第五条", "external", [("5", None, None)], "民法"),
        ("第二号", "external", [("5", None, 2)], "民法"),
        ("第一号", "dangling", [("2", None, 1)], None),
    ]


def test_a_kanji_after_an_article_keeps_the_reference_but_makes_an_item_a_word():
    t = (
        "第1条（目的）\n甲は、第2条記載の業務及び第9条違反の場合に、第一号法定受託事務を行う。\n"
        "第2条（準用）\n前条第1項各号列記以外の部分の規定を準用する。\n"
    )
    assert [(r.text, r.status) for r in scan(parse(t))] == [
        ("第2条", "internal"),
        ("第9条", "dangling"),
        ("前条第1項各号", "internal"),
    ]
