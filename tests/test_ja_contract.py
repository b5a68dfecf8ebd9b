"""The contract parser: exact trees on hand-made cases, the exact round trip, references and resolution."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT

from offline_eval.ja.contract import parse, render
from offline_eval.ja.references import extract

SAMPLES = sorted((ROOT / "data" / "contracts").glob("*.md")) + sorted((ROOT / "data" / "statutes").glob("*.txt"))

HAND = """# 委託契約書

A社（以下「甲」という。）とB社（以下「乙」という。）は、次のとおり契約する。

## 第1条（目的）
本契約は、委託の条件を定める。

## 第2条（業務）
1. 甲は、次の各号に掲げる業務を乙に委託する。
(1) 保守
(2) 運用
2. 前項の業務の詳細は、第3条に定める。

第3条（仕様）
仕様は別紙による。
乙は、前条第1項第2号の業務について報告する。

Article 4 (Term)
This Agreement is valid for one year.

以上
"""


def test_exact_tree_of_a_hand_made_contract():
    d = parse(HAND)
    assert d.preamble.startswith("# 委託契約書") and d.preamble.endswith("契約する。\n\n")
    assert d.signature == "以上\n"
    assert [(a.label, a.title, a.style) for a in d.articles] == [
        ("1", "目的", "md2-arabic-full"),
        ("2", "業務", "md2-arabic-full"),
        ("3", "仕様", "plain-arabic-full"),
        ("4", "Term", "plain-english"),
    ]
    a2 = d.articles[1]
    assert [(p.number, p.explicit, p.marker, p.text) for p in a2.paragraphs] == [
        (1, True, "1.", "甲は、次の各号に掲げる業務を乙に委託する。"),
        (2, True, "2.", "前項の業務の詳細は、第3条に定める。"),
    ]
    assert [(i.number, i.marker, i.text) for i in a2.paragraphs[0].items] == [(1, "(1)", "保守"), (2, "(2)", "運用")]
    a3 = d.articles[2]
    assert [(p.number, p.explicit, p.text) for p in a3.paragraphs] == [
        (1, False, "仕様は別紙による。"),
        (2, False, "乙は、前条第1項第2号の業務について報告する。"),
    ]
    # Spans point into the source.
    for a in d.articles:
        assert HAND[a.start : a.end] == a.raw
        for p in a.paragraphs:
            assert HAND[p.start : p.end] == p.raw
            for it in p.items:
                assert HAND[it.start : it.end].startswith(it.marker)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_round_trip_is_byte_for_byte(path: Path):
    text = path.read_text(encoding="utf-8")
    d = parse(text)
    assert render(d) == text
    assert render(d).encode("utf-8") == path.read_bytes()
    assert 7 <= len(d.articles) <= 20


def test_statute_layout():
    d = parse((ROOT / "data" / "statutes" / "sample_act.txt").read_text(encoding="utf-8"))
    assert d.labels() == ["1", "2", "3", "4", "4-2", "5", "6"]
    a3 = d.article("3")
    assert a3.title == "表示義務" and a3.heading == "（表示義務）\n第三条　"
    assert [p.number for p in a3.paragraphs] == [1, 2]
    assert [(i.number, i.marker) for i in a3.paragraphs[0].items] == [(1, "一"), (2, "二"), (3, "三")]
    assert d.article("4-2").suffix == 2 and d.article("4-2").number == 4


def test_styles_of_the_sample_contracts():
    def load(name: str):  # type: ignore[no-untyped-def]
        return parse((ROOT / "data" / "contracts" / name).read_text(encoding="utf-8"))

    nda = load("nda.md")
    assert nda.article("9").paragraphs[1].marker == "２" and nda.article("1").paragraphs[1].items[3].marker == "四"
    sales = load("sales_master.md")
    assert [i.marker for i in sales.article("2").paragraphs[0].items] == ["①", "②", "③"]
    assert [i.marker for i in sales.article("7").paragraphs[0].items] == ["（１）", "（２）", "（３）"]
    assert [(p.number, p.marker) for p in sales.article("1").paragraphs] == [(1, ""), (2, "(2)")]
    dpa = load("data_processing.md")
    assert dpa.article("6").title == "Subcontracting" and len(dpa.article("5").paragraphs[0].items) == 3


def test_references_extracted_and_resolved():
    d = parse(HAND)
    got = [
        (
            r.text,
            r.kind,
            r.source_article,
            r.source_paragraph,
            [(t.article, t.paragraph, t.item) for t in r.targets],
            r.resolved,
        )
        for r in extract(d)
    ]
    assert got == [
        ("前項", "relative", "2", 2, [("2", 1, None)], True),
        ("第3条", "absolute", "2", 2, [("3", None, None)], True),
        ("前条第1項第2号", "relative", "3", 2, [("2", 1, 2)], True),
    ]


REFS = """第1条（定義）
本条において「対象」とは、別表の物をいう。
２　次条及び第3条第2項第1号に従う。
第2条（範囲）
前条の規定は、第1条から第3条までに適用する。同条の例による。
２　第5条及び民法第541条並びに第542条の適用を妨げない。
第3条（手続）
通知は書面による。
２　前項の通知は、次に掲げる事項を含む。
一　日付
二　署名
三　前各号のほか、前二号の写し
四　次号
第3条の2（特則）
第3条の2第1項は、第3条第3項を準用する。
"""


def test_every_reference_kind():
    d = parse(REFS)
    refs = {(r.text, r.source_article): r for r in extract(d)}
    t = lambda text, art: [(x.article, x.paragraph, x.item) for x in refs[(text, art)].targets]  # noqa: E731
    assert t("本条", "1") == [("1", None, None)]
    assert t("次条", "1") == [("2", None, None)]
    assert t("第3条第2項第1号", "1") == [("3", 2, 1)] and refs[("第3条第2項第1号", "1")].resolved
    assert t("前条", "2") == [("1", None, None)]
    assert t("第1条から第3条まで", "2") == [("1", None, None), ("3", None, None)]
    assert refs[("第1条から第3条まで", "2")].kind == "range"
    assert t("同条", "2") == [("3", None, None)]  # the article last referred to
    assert not refs[("第5条", "2")].resolved and refs[("第5条", "2")].problem == "article 5 does not exist"
    assert ("第541条", "2") not in refs and ("第542条", "2") not in refs  # 民法's articles, not ours
    assert t("前項", "3") == [("3", 1, None)]
    assert t("前各号", "3") == [("3", 2, 1), ("3", 2, 2)]
    assert t("前二号", "3") == [("3", 2, 1), ("3", 2, 2)]
    assert not refs[("次号", "3")].resolved
    assert t("第3条の2第1項", "3-2") == [("3-2", 1, None)]
    assert not refs[("第3条第3項", "3-2")].resolved
    assert refs[("第3条第3項", "3-2")].problem == "article 3 has no paragraph 3"
