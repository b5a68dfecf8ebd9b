"""Cross-references inside a contract or statute: extraction and resolution to the node they point at.

Absolute: 第N条, 第N条の2, 第N条第M項, 第N条第M項第K号, 第M項 (this article), ranges 第3条から第5条まで,
English "Article N". Relative: 前条, 次条, 本条, 同条, 前項, 次項, 同項, 前号, 前各号, 前二号.
References to other laws (著作権法第27条, 同法第3条) are recognised and left out.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from .contract import Article, Document
from .numerals import NUM, NUM_CHARS, article_label, to_int

_ABS = re.compile(
    rf"(?P<law>[^\s、。（）「」第条項号]{{0,12}}?(?:法|令|規則|同法|同令))?"
    rf"第(?P<a>{NUM})条(?:の(?P<s>{NUM}))?(?:第(?P<p>{NUM})項)?(?:第(?P<i>{NUM})号)?"
    rf"(?:から第(?P<a2>{NUM})条(?:の(?P<s2>{NUM}))?まで)?")
_PARA_ONLY = re.compile(rf"(?<![条項号の{NUM_CHARS}])第(?P<p>{NUM})項(?:第(?P<i>{NUM})号)?")
_REL = re.compile(rf"前各号|前(?P<k>[二三四五六七八九])号|前号|次号|"
                  rf"(?P<w>前条|次条|本条|同条|前項|次項|同項)(?:第(?P<p>{NUM})項)?(?:第(?P<i>{NUM})号)?")
_LIST_JOINER = re.compile(r"及び|、|又は|並びに|若しくは|,|，")
_EN = re.compile(r"Article\s+(?P<a>\d+)(?:\s+(?:through|to)\s+Article\s+(?P<a2>\d+))?")


@dataclass(frozen=True)
class Target:
    article: str
    paragraph: int | None = None
    item: int | None = None


@dataclass
class Reference:
    text: str
    kind: str  # absolute | range | paragraph | relative | english
    start: int
    end: int
    source_article: str | None  # the article the reference sits in
    source_paragraph: int | None
    targets: list[Target] = field(default_factory=list)
    resolved: bool = False
    problem: str = ""


def _locate(doc: Document, pos: int) -> tuple[Article | None, int | None, int | None]:
    """(article, paragraph number, index of the item the position falls in, if any)."""
    starts = [a.start for a in doc.articles]
    k = bisect.bisect_right(starts, pos) - 1
    if k < 0 or pos >= doc.articles[k].end:
        return None, None, None
    art = doc.articles[k]
    for p in art.paragraphs:
        if p.start <= pos < p.end:
            for n, it in enumerate(p.items):
                if it.start <= pos < it.end:
                    return art, p.number, n
            return art, p.number, None
    return art, (art.paragraphs[0].number if art.paragraphs else None), None


def extract(doc: Document) -> list[Reference]:
    text = doc.source
    refs: list[Reference] = []
    taken: list[tuple[int, int]] = []
    heads = [(a.start, a.start + len(a.head_raw)) for a in doc.articles]
    external_end = -1
    for m in _ABS.finditer(text):
        # Another law's article (著作権法第27条), and the rest of its list (…及び第28条), is not ours.
        if m.group("law") or (external_end >= 0 and _LIST_JOINER.fullmatch(text[external_end:m.start()])):
            taken.append(m.span())
            external_end = m.end()
            continue
        external_end = -1
        if any(a <= m.start() < b for a, b in heads):
            taken.append(m.span())
            continue  # the article's own heading
        art, para, _ = _locate(doc, m.start())
        a = article_label(to_int(m.group("a")), to_int(m.group("s")) if m.group("s") else None)
        if m.group("a2"):
            b = article_label(to_int(m.group("a2")), to_int(m.group("s2")) if m.group("s2") else None)
            refs.append(Reference(m.group(0), "range", m.start(), m.end(), art and art.label, para,
                                  [Target(a), Target(b)]))
        else:
            t = Target(a, to_int(m.group("p")) if m.group("p") else None,
                       to_int(m.group("i")) if m.group("i") else None)
            refs.append(Reference(m.group(0), "absolute", m.start(), m.end(), art and art.label, para, [t]))
        taken.append(m.span())
    for m in _PARA_ONLY.finditer(text):
        if any(a <= m.start() < b for a, b in taken):
            continue
        art, para, _ = _locate(doc, m.start())
        if art is None:
            continue
        t = Target(art.label, to_int(m.group("p")), to_int(m.group("i")) if m.group("i") else None)
        refs.append(Reference(m.group(0), "paragraph", m.start(), m.end(), art.label, para, [t]))
    for m in _EN.finditer(text):
        art, para, _ = _locate(doc, m.start())
        if art is not None and m.start() < art.start + len(art.head_raw):
            continue  # the article's own heading
        ts = [Target(m.group("a"))] + ([Target(m.group("a2"))] if m.group("a2") else [])
        refs.append(Reference(m.group(0), "range" if m.group("a2") else "english", m.start(), m.end(),
                              art and art.label, para, ts))
    last_abs: dict[str, Target] = {}
    for m in _REL.finditer(text):
        if any(a <= m.start() < b for a, b in taken):
            continue
        art, para, item_idx = _locate(doc, m.start())
        refs.append(_relative(doc, m, art, para, item_idx))
        if m.group("w") and (m.group("p") or m.group("i")):
            _narrow(refs[-1], m)
    refs.sort(key=lambda r: r.start)
    # 同条 / 同項 mean "the article / paragraph last referred to"; resolve them in reading order.
    for r in refs:
        if r.kind in ("absolute", "paragraph") and r.targets:
            last_abs["article"] = Target(r.targets[0].article)
            if r.targets[0].paragraph:
                last_abs["paragraph"] = Target(r.targets[0].article, r.targets[0].paragraph)
        elif r.text.startswith(("同条", "同項")) and not r.problem and not r.targets:
            which = "article" if r.text.startswith("同条") else "paragraph"
            if which in last_abs:
                r.targets = [last_abs[which]]
                m2 = _REL.fullmatch(r.text)
                if m2 and (m2.group("p") or m2.group("i")):
                    _narrow(r, m2)
            else:
                r.problem = f"no earlier {which} reference for {r.text[:2]}"
    for r in refs:
        resolve(doc, r)
    return refs


def _narrow(r: Reference, m: re.Match[str]) -> None:
    """前条第1項第2号: the relative word picks the article (or paragraph), the rest narrows it."""
    p = to_int(m.group("p")) if m.group("p") else None
    i = to_int(m.group("i")) if m.group("i") else None
    if m.group("w").endswith("項"):  # 前項第2号: the paragraph is already chosen
        r.targets = [Target(t.article, t.paragraph, i) for t in r.targets]
    else:
        r.targets = [Target(t.article, p, i) for t in r.targets]


def _relative(doc: Document, m: re.Match[str], art: Article | None, para: int | None,
              item_idx: int | None) -> Reference:
    word = m.group("w") or m.group(0)
    r = Reference(m.group(0), "relative", m.start(), m.end(), art and art.label, para)
    if art is None:
        r.problem = f"{word} outside any article"
        return r
    k = doc.articles.index(art)
    if word in ("前条", "次条"):
        j = k - 1 if word == "前条" else k + 1
        if 0 <= j < len(doc.articles):
            r.targets = [Target(doc.articles[j].label)]
        else:
            r.problem = f"{word} of the {'first' if word == '前条' else 'last'} article"
    elif word == "本条":
        r.targets = [Target(art.label)]
    elif word in ("前項", "次項"):
        nums = [p.number for p in art.paragraphs]
        i = nums.index(para) if para in nums else -1
        j = i - 1 if word == "前項" else i + 1
        if i >= 0 and 0 <= j < len(nums):
            r.targets = [Target(art.label, nums[j])]
        else:
            r.problem = f"{word} of the {'first' if word == '前項' else 'last'} paragraph"
    elif word.startswith("前") and word.endswith("号"):
        # Inside an item it counts back from that item; in a paragraph's sentence after its items, from the end.
        p = next((p for p in art.paragraphs if p.number == para), None)
        items = p.items if p else []
        upto = item_idx if item_idx is not None else len(items)
        count = upto if word == "前各号" else (1 if word == "前号" else to_int(m.group("k")))
        chosen = items[max(0, upto - count):upto]
        if not chosen or len(chosen) < count:
            r.problem = f"{word} with only {upto} item(s) before it"
        r.targets = [Target(art.label, para, it.number) for it in chosen]
    elif word == "次号":
        p = next((p for p in art.paragraphs if p.number == para), None)
        if p and item_idx is not None and item_idx + 1 < len(p.items):
            r.targets = [Target(art.label, para, p.items[item_idx + 1].number)]
        else:
            r.problem = "次号 of the last item"
    return r


def resolve(doc: Document, r: Reference) -> None:
    """Mark the reference resolved if every target exists; else record what is missing."""
    if r.problem:
        r.resolved = False
        return
    if not r.targets:
        r.resolved, r.problem = False, "no target"
        return
    labels = doc.labels()
    for t in r.targets:
        art = doc.article(t.article)
        if art is None:
            r.resolved, r.problem = False, f"article {t.article} does not exist"
            return
        if t.paragraph is not None:
            p = next((p for p in art.paragraphs if p.number == t.paragraph), None)
            if p is None:
                r.resolved, r.problem = False, f"article {t.article} has no paragraph {t.paragraph}"
                return
            if t.item is not None and not any(it.number == t.item for it in p.items):
                r.resolved, r.problem = False, f"article {t.article} paragraph {t.paragraph} has no item {t.item}"
                return
    if r.kind == "range" and len(r.targets) == 2 and labels.index(r.targets[0].article) > \
            labels.index(r.targets[1].article):
        r.resolved, r.problem = False, "range runs backwards"
        return
    r.resolved = True

