"""References as enacted statutes write them, resolved to the article, paragraph and item they name.

Three kinds of false "dangling" findings on real statutes (issue 24, item 13):
- 前条第N項: 前条 gives the article of the paragraph;
- 同項 / 同号 / 同条 after a reference into another article: the one mentioned last, wherever it was, and not
  one mentioned only inside a bracketed insertion in between (drafting practice: 「同」 does not take up what
  a parenthetical says);
- an article carried along a list across bracketed insertions and part words: in
  第四十三条第一項（前条において…を含む。）、第四項（…）及び第五項, 第四項 and 第五項 are 第四十三条's.

Statute text carries no copyright (Copyright Act, article 13). The referencing sentences below and in
tests/ja_texts/egov_real_*.txt are quoted as enacted, from these sources:
- 行政手続法 第十五条 (all of it) and 第十六条第一項: e-Gov text as quoted on public commentary pages, and
  第十六条第一項 and 第四十五条第一項 as quoted in the test suite of Lawtext (yamachig/Lawtext,
  core/src/analyzer/pointerEnvs/getPointerEnvs.spec.ts);
- 電波法 第五条第三項第二号, 第二十四条の二第一項・第二項 and 第二十四条の十第一号: as quoted in the same Lawtext
  test; the pointer list 「次項第三号、…第七十三条第一項ただし書、第三項及び第六項並びに第百二条の十八第一項
  において同じ。」 as quoted in Lawtext's core/src/analyzer/textParser/rules/$pointerRanges.spec.ts;
- 会社経理応急措置法 第七条・第八条: the e-Gov text as shown by iuris.jp (its display spaces around 及び / 又は /
  その他 removed, and the full stop that its display drops at the end of 第八条第六項 and 第八項 put back);
- 民法 第九百六十八条, 第九百九十五条 to 第九百九十七条: e-Gov text as quoted on public commentary pages;
- 労働基準法 第三十八条の三 第一項第四号から第六号まで and 第二項: e-Gov text (as stored in a public data set);
- 租税特別措置法 第八条の五 第二号・第三号 (an earlier version): as quoted on lawinfo.joureikun.jp.

Reconstructed, so that every reference has its target: the articles and paragraphs written 「略」 (in the test
texts below and in egov_real_refs.txt, egov_real_kaisha.txt and egov_real_roki.txt) stand for enacted text
that is not quoted; only their numbering (paragraphs and items) is the enacted one as far as the references
need it. The PROBE text at the end is constructed (not real): it holds the variants a probe would try.
"""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

from offline_eval.ja.checks import check
from offline_eval.ja.contract import parse, render
from offline_eval.ja.references import scan

T = ROOT / "tests" / "ja_texts"
REAL = [
    "egov_real_refs.txt",
    "egov_real_hearing.txt",
    "egov_real_kaisha.txt",
    "egov_real_minpo.txt",
    "egov_real_roki.txt",
]


def rows(doc):  # type: ignore[no-untyped-def]
    """(text, article it sits in, paragraph, status, targets) of every reference."""
    return [
        (r.text, r.source_article, r.source_paragraph, r.status, [(t.article, t.paragraph, t.item) for t in r.targets])
        for r in scan(doc)
    ]


def find(doc, text: str, article: str, paragraph: int | None = None, nth: int = 0):  # type: ignore[no-untyped-def]
    got = [x for x in rows(doc) if x[0] == text and x[1] == article and (paragraph is None or x[2] == paragraph)]
    assert len(got) > nth, (text, article, paragraph, rows(doc))
    return got[nth]


@pytest.mark.parametrize("name", REAL)
def test_real_statute_excerpts_have_no_findings(name):
    src = (T / name).read_text(encoding="utf-8")
    doc = parse(src)
    assert render(doc) == src
    assert check(doc) == [], name
    assert [x for x in rows(doc) if x[3] == "dangling"] == []
    labels = json.loads((T / "labels.json").read_text(encoding="utf-8"))
    assert labels[f"tests/ja_texts/{name}"] == []  # labeled clean


@pytest.mark.parametrize(
    "name,text,article,paragraph,targets",
    [
        # 行政手続法 第四十五条第一項: the list goes on past two parenthetical insertions.
        ("egov_real_refs.txt", "第三十九条第一項", "45", 1, [("39", 1, None)]),
        ("egov_real_refs.txt", "第四十三条第一項", "45", 1, [("43", 1, None)]),
        ("egov_real_refs.txt", "前条", "45", 1, [("44", None, None)]),
        ("egov_real_refs.txt", "第四項", "45", 1, [("43", 4, None)]),
        ("egov_real_refs.txt", "第五項", "45", 1, [("43", 5, None)]),
        # 行政手続法 第十五条第三項: 同項 is 第一項, the paragraph named last (not 第三項, where it is written).
        ("egov_real_hearing.txt", "第一項", "15", 3, [("15", 1, None)]),
        ("egov_real_hearing.txt", "同項第三号", "15", 3, [("15", 1, 3)]),
        ("egov_real_hearing.txt", "第四号", "15", 3, [("15", 1, 4)]),
        ("egov_real_hearing.txt", "同項各号", "15", 3, [("15", 1, None)]),
        # 第十六条第一項: 前条第一項, then 同条第三項後段 inside the bracket: 同条 is 前条.
        ("egov_real_hearing.txt", "前条第一項", "16", 1, [("15", 1, None)]),
        ("egov_real_hearing.txt", "同条第三項", "16", 1, [("15", 3, None)]),
        # 会社経理応急措置法 第八条: 前条第三項 (twice) and 前条第七項 are 第七条's paragraphs.
        ("egov_real_kaisha.txt", "前条第三項", "8", 1, [("7", 3, None)]),
        ("egov_real_kaisha.txt", "前条第三項", "8", 4, [("7", 3, None)]),
        ("egov_real_kaisha.txt", "前条第七項", "8", 5, [("7", 7, None)]),
        ("egov_real_kaisha.txt", "第一項乃至第四項", "7", 6, [("7", 1, None), ("7", 4, None)]),  # 乃至: a range
        # 民法 第九百九十七条: 前条ただし書; 同項 is 前項.
        ("egov_real_minpo.txt", "前条", "997", 1, [("996", None, None)]),
        ("egov_real_minpo.txt", "同項", "997", 2, [("997", 1, None)]),
        # 労働基準法 第三十八条の三第二項: 前条第三項 is 第三十八条の二's.
        ("egov_real_roki.txt", "前条第三項", "38-3", 2, [("38-2", 3, None)]),
    ],
)
def test_real_references_resolve_to_their_targets(name, text, article, paragraph, targets):
    row = find(parse((T / name).read_text(encoding="utf-8")), text, article, paragraph)
    assert row[3] == "internal" and row[4] == targets, row


DENPA = """電波法（抄）

第五条　略
２　略
３　次の各号のいずれかに該当する者には、無線局の免許を与えないことができる。
一　略
二　第七十五条第一項又は第七十六条第四項（第四号を除く。）若しくは第五項（第五号を除く。）の規定により無線局の免許の取消しを受け、その取消しの日から二年を経過しない者
三　略
四　略
五　略

第二十四条の二　無線設備等の検査又は点検の事業を行う者は、総務大臣の登録を受けることができる。
２　前項の登録を受けようとする者は、総務省令で定めるところにより、次に掲げる事項を記載した申請書を総務大臣に提出しなければならない。
一　氏名又は名称及び住所並びに法人にあつては、その代表者の氏名
二　事務所の名称及び所在地
三　点検に用いる測定器その他の設備の概要
四　無線設備等の点検の事業のみを行う者にあつては、その旨

第二十四条の十　総務大臣は、登録検査等事業者が次の各号のいずれかに該当するときは、その登録を取り消し、又は期間を定めてその登録に係る検査又は点検の業務の全部若しくは一部の停止を命ずることができる。
一　第二十四条の二第二項各号（第二号を除く。）のいずれかに該当するに至つたとき。

第七十五条　略
２　略

第七十六条　略
２　略
３　略
４　略
一　略
二　略
三　略
四　略
五　略
５　略
一　略
二　略
三　略
四　略
五　略
"""


def test_denpa_an_article_is_carried_across_parenthetical_insertions():
    """電波法 第五条第三項第二号: 第五項 is 第七十六条第五項 (it was read as 第五条第五項, which does not exist), and the
    item excluded in each bracket is that paragraph's. 第二十四条の十第一号: 第二号 is 第二十四条の二第二項第二号."""
    d = parse(DENPA)
    got = [(x[0], x[3], x[4]) for x in rows(d) if x[1] == "5"]
    assert got == [
        ("第七十五条第一項", "internal", [("75", 1, None)]),
        ("第七十六条第四項", "internal", [("76", 4, None)]),
        ("第四号", "internal", [("76", 4, 4)]),
        ("第五項", "internal", [("76", 5, None)]),
        ("第五号", "internal", [("76", 5, 5)]),
    ]
    assert find(d, "第二十四条の二第二項各号", "24-10")[3:] == ("internal", [("24-2", 2, None)])
    assert find(d, "第二号", "24-10")[3:] == ("internal", [("24-2", 2, 2)])
    assert [f for f in check(d) if f.kind == "dangling_reference"] == []


def test_denpa_pointer_list_goes_on_past_tadashigaki():
    """A real pointer list (電波法, quoted by Lawtext): 第三項 and 第六項 after 第七十三条第一項ただし書 are
    第七十三条's paragraphs, not those of the article the list is written in."""
    frag = (
        "次項第三号、第十条第一項、第十二条、第十七条、第十八条、第二十四条の二第四項、第二十七条の十三第二項第九号、"
        "第三十八条の二第一項、第七十条の五の二第一項、第七十一条の五、第七十三条第一項ただし書、第三項及び第六項並びに"
        "第百二条の十八第一項において同じ。"
    )
    d = parse(f"第一条　略\n２　{frag}\n３　略\n")
    got = [(x[0], x[4]) for x in rows(d)]
    assert ("第七十三条第一項", [("73", 1, None)]) in got
    assert ("第三項", [("73", 3, None)]) in got and ("第六項", [("73", 6, None)]) in got
    assert ("第二十七条の十三第二項第九号", [("27-13", 2, 9)]) in got
    assert ("第七十条の五の二第一項", [("70-5-2", 1, None)]) in got
    assert ("次項第三号", [("1", 3, 3)]) in got


MINPO_968 = """民法（抄）

（自筆証書遺言）
第九百六十八条　自筆証書によって遺言をするには、遺言者が、その全文、日付及び氏名を自書し、これに印を押さなければならない。
２　前項の規定にかかわらず、自筆証書にこれと一体のものとして相続財産（第九百九十七条第一項に規定する場合における同項に規定する権利を含む。）の全部又は一部の目録を添付する場合には、その目録については、自書することを要しない。この場合において、遺言者は、その目録の毎葉（自書によらない記載がその両面にある場合にあっては、その両面）に署名し、印を押さなければならない。
３　自筆証書（前項の目録を含む。）中の加除その他の変更は、遺言者が、その場所を指示し、これを変更した旨を付記して特にこれに署名し、かつ、その変更の場所に印を押さなければ、その効力を生じない。

"""


def test_minpo_968_same_paragraph_after_a_reference_into_another_article():
    """民法 第九百六十八条第二項: 同項 (inside the bracket) is 第九百九十七条第一項, named just before it."""
    d = parse(MINPO_968 + (T / "egov_real_minpo.txt").read_text(encoding="utf-8").split("\n\n", 1)[1])
    assert find(d, "前項", "968", 2)[3:] == ("internal", [("968", 1, None)])
    assert find(d, "第九百九十七条第一項", "968", 2)[3:] == ("internal", [("997", 1, None)])
    assert find(d, "同項", "968", 2)[3:] == ("internal", [("997", 1, None)])
    assert find(d, "前項", "968", 3)[3:] == ("internal", [("968", 2, None)])


def test_sozei_previous_article_paragraph_and_item():
    """租税特別措置法 第八条の五第二号・第三号: 前条第一項第一号 and 前条第一項第二号 are 第八条の四's."""
    t = (
        "第八条の四　略\n一　略\n二　略\n\n第八条の五　略\n一　略\n"
        "二　内国法人から支払を受ける前条第一項第一号に掲げる配当等\n"
        "三　内国法人から支払を受ける公社債投資信託以外の証券投資信託でその設定に係る受益権の募集が公募（前条第一項第二号に"
        "規定する公募をいう。）により行われたもの（特定株式投資信託を除く。）の収益の分配に係る配当等\n"
    )
    d = parse(t)
    assert find(d, "前条第一項第一号", "8-5")[3:] == ("internal", [("8-4", 1, 1)])
    assert find(d, "前条第一項第二号", "8-5")[3:] == ("internal", [("8-4", 1, 2)])


# 行政手続法 第四十三条第五項 (with its two items) as enacted, as the e-Gov text reads it; the other articles and
# paragraphs are 略, with the enacted numbering (第三十九条第四項 has eight items, 第四十三条第一項 four).
GYOTE_43 = """行政手続法（抄）

（意見公募手続）
第三十九条　略
２　略
３　略
４　略
一　略
二　略
三　略
四　略
五　略
六　略
七　略
八　略

第四十条　略
２　略

第四十一条　略

第四十二条　略

（結果の公示等）
第四十三条　略
一　略
二　略
三　略
四　略
２　略
３　略
４　略
５　命令等制定機関は、第三十九条第四項各号のいずれかに該当することにより意見公募手続を実施しないで命令等を定めた場合には、当該命令等の公布と同時期に、次に掲げる事項を公示しなければならない。ただし、第一号に掲げる事項のうち命令等の趣旨については、同項第一号から第四号までのいずれかに該当することにより意見公募手続を実施しなかった場合において、当該命令等自体から明らかでないときに限る。
一　命令等の題名及び趣旨
二　意見公募手続を実施しなかった旨及びその理由
"""


def test_gyote_43_same_paragraph_is_the_one_named_last_not_one_a_bare_item_sits_in():
    """行政手続法 第四十三条第五項: 同項 is 第三十九条第四項, the paragraph named last. The bare 第一号 in between is
    this paragraph's item (第四十三条第五項第一号) and names no paragraph, so it does not make 同項 第四十三条第五項
    (which has two items, and was reported as lacking item 4)."""
    d = parse(GYOTE_43)
    assert render(d) == GYOTE_43
    assert find(d, "第三十九条第四項各号", "43", 5)[3:] == ("internal", [("39", 4, None)])
    assert find(d, "第一号", "43", 5)[3:] == ("internal", [("43", 5, 1)])
    assert find(d, "同項第一号から第四号まで", "43", 5)[3:] == ("internal", [("39", 4, 1), ("39", 4, 4)])
    assert check(d) == []


@pytest.mark.parametrize(
    "old,new,message",
    [
        # 同項 is 第三十九条第四項, which has eight items: a ninth is still a finding.
        ("同項第一号から第四号まで", "同項第一号から第九号まで", "article 39 paragraph 4 has no item 9"),
        # Nothing before 同項 names a paragraph (第三十九条各号, and the bare 第一号, name none): 同項 has no
        # antecedent, and is not taken to be the paragraph it is written in.
        ("第三十九条第四項各号", "第三十九条各号", "no earlier paragraph reference for 同項"),
    ],
)
def test_gyote_43_a_wrong_same_paragraph_still_gives_its_finding(old, new, message):
    d = parse(GYOTE_43.replace(old, new, 1))
    found = [f for f in check(d) if f.kind == "dangling_reference"]
    assert len(found) == 1 and found[0].location == "第43条第5項", found
    assert found[0].message.startswith("同項第一号から") and message in found[0].message, found


# Constructed (not real): the variants a probe would try, on a text whose targets are all known.
PROBE = """架空法

第一条　甲
２　乙
３　次に掲げる者
一　あ
二　い
三　う

第二条　甲
２　乙
３　次に掲げる者
一　あ
二　い
４　次に掲げる者
一　あ
二　い
三　う
四　え
５　戊

第三条　前条第三項第二号、次条第二項及び前二条の規定を準用する。
２　第二条第四項各号（この項において「対象」という。）に掲げる者は、同項第一号から第四号までに掲げる事項を行う。
３　第二条第三項（前項において準用する場合を含む。）、第四項（前条（第二項を除く。）の規定により読み替えて適用する場合を含む。）並びに第五項の規定は、前項の場合について準用する。
４　第一条第三項（第三号を除く。）若しくは第二項又は第二条第二項（第一条第二項において準用する場合を含む。）及び第四項第三号の規定は、同号に掲げる者について準用する。
５　民法第九十条第一項（同法第九十一条第二項において準用する場合を含む。）及び第二項並びに同項第一号の規定を準用する。
６　第二条第二項ただし書、第三項及び第五項の規定並びに第一条第一項乃至第三項の規定を準用する。
７　第二条第四項（第一号を除く。）及び第九項の規定を準用する。
８　前条第二項（第一条第二項において準用する場合を含む。）及び第三項の規定は、同条第四項の場合について準用する。
９　第一条第三項第二号（第二条第四項第一号において準用する場合を含む。）に掲げる者は、同号の規定による。

第四条　甲
２　乙
"""


@pytest.mark.parametrize(
    "text,paragraph,nth,status,targets",
    [
        ("前条第三項第二号", 1, 0, "internal", [("2", 3, 2)]),
        ("次条第二項", 1, 0, "internal", [("4", 2, None)]),
        ("前二条", 1, 0, "internal", [("1", None, None), ("2", None, None)]),
        # 同項 after a reference into another article, past a bracket that names this paragraph (この項).
        ("同項第一号から第四号まで", 2, 0, "internal", [("2", 4, 1), ("2", 4, 4)]),
        # Several insertions, one of them nested; 、 and 並びに as separators.
        ("第四項", 3, 0, "internal", [("2", 4, None)]),
        ("第二項", 3, 0, "internal", [("2", 2, None)]),  # 前条（第二項を除く。）: the bracket narrows 前条
        ("第五項", 3, 0, "internal", [("2", 5, None)]),
        # 若しくは / 又は / 及び; 同号 after a reference into another article.
        ("第三号", 4, 0, "internal", [("1", 3, 3)]),
        ("第二項", 4, 0, "internal", [("1", 2, None)]),
        ("第四項第三号", 4, 0, "internal", [("2", 4, 3)]),
        ("同号", 4, 0, "internal", [("2", 4, 3)]),
        # Into another law: the list and 同項 stay in 民法 (同法 inside the bracket does not change that).
        ("第二項", 5, 0, "external", [("90", 2, None)]),
        ("同項第一号", 5, 0, "external", [("90", 2, 1)]),
        # Past a part word (ただし書); 乃至 as a range.
        ("第三項", 6, 0, "internal", [("2", 3, None)]),
        ("第五項", 6, 0, "internal", [("2", 5, None)]),
        ("第一条第一項乃至第三項", 6, 0, "internal", [("1", 1, None), ("1", 3, None)]),
        # A target that does not exist stays dangling.
        ("第九項", 7, 0, "dangling", [("2", 9, None)]),
        # 前条第N項（…）及び第M項: 前条 gives the article of both; 同条 is 前条, not the one in the bracket.
        ("第三項", 8, 0, "internal", [("2", 3, None)]),
        ("同条第四項", 8, 0, "internal", [("2", 4, None)]),
        # 同号 is the item named outside the bracket, not the one named inside it.
        ("同号", 9, 0, "internal", [("1", 3, 2)]),
    ],
)
def test_probe_variants(text, paragraph, nth, status, targets):
    row = find(parse(PROBE), text, "3", paragraph, nth)
    assert row[3:] == (status, targets), row


def test_probe_findings_are_only_the_true_dangling_one():
    found = [(f.kind, f.location, f.message) for f in check(parse(PROBE))]
    assert found == [("dangling_reference", "第3条第7項", "第九項 points nowhere: article 2 has no paragraph 9")]


def test_half_width_brackets_in_a_contract():
    t = (
        "## 第1条(目的)\n本契約は、業務を定める。\n\n## 第2条(義務)\n1. 乙は、次の事項を行う。\n(1) 報告\n(2) 記録\n"
        "2. 乙は、誠実に行う。\n3. 乙は、記録を保存する。\n\n"
        "## 第3条(準用)\n第2条第1項(第2号を除く。)及び第3項の規定は、甲について準用する。\n"
    )
    d = parse(t)
    assert find(d, "第3項", "3")[3:] == ("internal", [("2", 3, None)])
    assert find(d, "第2号", "3")[3:] == ("internal", [("2", 1, 2)])
    assert check(d) == []
