"""Contracts and statutes as a tree: Document -> Article -> Paragraph -> Item -> sub-items, each with its
source span.

Parses what appears in practice: `## 第8条（再委託）`, `第8条（再委託）`, `Article 8 (Subcontracting)`,
e-Gov statute text (`（見出し）` on its own line, then `第八条　本文`); paragraphs `1.`, `２`, `(2)` or
unnumbered; items `(1)`, `（１）`, `一`, `①`, `(a)`; a preamble and a signature block. Lists nest by marker
family, as statutes do (号 `一`, then `イ`, then `（１）`, then `（ｉ）`): the first family under a paragraph is its
items, a family not yet open below is a deeper level, and a family already open closes the levels under it.
Supplementary provisions (`附　則` and after) restart article numbers, so they stay in the tail with the
signature block.

The tree partitions the source: every character belongs to exactly one raw piece, so `render(parse(s)) == s`.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from .numerals import NUM, article_label, to_int

_SP = r"[ \t\u3000]"


@dataclass
class Item:
    number: int
    marker: str  # as written: "(1)", "一", "①", "イ"
    text: str
    start: int  # start of the item's own line
    end: int  # end of its line, or of its last sub-item
    family: str = "kanji"  # kanji | paren | circled | alpha | iroha | gojuon | roman
    children: list[Item] = field(default_factory=list)  # sub-items (イ ロ ハ under 一; (1) (2) under イ)
    suffix: int | None = None  # 一の二 (an item inserted by amendment): number 1, suffix 2


@dataclass
class Paragraph:
    number: int
    explicit: bool  # numbered in the source (else implied by position)
    marker: str
    text: str  # the paragraph's own sentence(s), without marker and items
    items: list[Item]
    raw: str  # exact source of the paragraph, its items and the blank lines after it
    start: int
    end: int


@dataclass
class Article:
    number: int
    suffix: int | None
    title: str | None
    heading: str  # the heading line(s) as written, without the body that may follow on the same line
    style: str  # heading style: markdown level, numerals, title brackets, e.g. "md2-arabic-full", "plain-kanji"
    head_raw: str
    paragraphs: list[Paragraph]
    start: int
    end: int

    @property
    def label(self) -> str:
        return article_label(self.number, self.suffix)

    @property
    def body(self) -> str:
        """Text of the article without its heading line: what alignment and diffs compare."""
        return "".join(p.raw for p in self.paragraphs)

    @property
    def raw(self) -> str:
        return self.head_raw + self.body


@dataclass
class Document:
    source: str
    preamble: str
    articles: list[Article]
    signature: str
    signature_start: int = field(default=-1)

    def article(self, label: str) -> Article | None:
        return next((a for a in self.articles if a.label == label), None)

    def labels(self) -> list[str]:
        return [a.label for a in self.articles]


def render(doc: Document) -> str:
    return doc.preamble + "".join(a.raw for a in doc.articles) + doc.signature


_JA_HEAD = re.compile(
    rf"^(?P<md>#{{1,6}}{_SP}*)?(?P<num>第(?P<n>{NUM})条(?:の(?P<s>{NUM}))?)"
    rf"(?:{_SP}*[（(](?P<title>[^）)\n]*)[）)])?(?=$|{_SP}|[（(])(?P<rest>.*)$"
)
_EN_HEAD = re.compile(
    rf"^(?P<md>#{{1,6}}{_SP}*)?(?P<num>Article{_SP}+(?P<n>\d+)(?:-(?P<s>\d+))?)"
    rf"(?:{_SP}*\((?P<title>[^)\n]*)\))?(?=$|{_SP})(?P<rest>.*)$"
)
_CAPTION = re.compile(r"^[（(][^）)\n]{1,40}[）)]$")
_CHAPTER = re.compile(rf"^(?:#{{1,6}}{_SP}*)?第{NUM}[編章節款目](?:の{NUM})?(?:{_SP}|$)")
_SIGNATURE = re.compile(
    r"^(以上|本契約の成立を証|以上の合意を証|本書[0-9０-９一二三四五]+通|IN WITNESS WHEREOF|"
    r"(令和|平成|昭和)[0-9０-９一二三四五六七八九十元]+年[0-9０-９一二三四五六七八九十]+月)"
)
_PARA_DOT = re.compile(rf"^(?P<n>[0-9０-９]+)[.．]{_SP}*")
_PARA_SP = re.compile(rf"^(?P<n>[0-9０-９]+){_SP}+")
_PAREN_NUM = re.compile(rf"^[（(](?P<n>[0-9０-９]+)[)）]{_SP}*")
_ITEM_KANJI = re.compile(rf"^(?P<n>[一二三四五六七八九十百]+)(?:の(?P<s>[一二三四五六七八九十]+))?{_SP}+")
IROHA = "イロハニホヘトチリヌルヲワカヨタレソツネナラムウヰノオクヤマケフコエテアサキユメミシヱヒモセス"
GOJUON = "アイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワヲン"
_ITEM_KATAKANA = re.compile(rf"^(?P<n>[{IROHA}{GOJUON}]){_SP}+")
_ITEM_ROMAN = re.compile(rf"^[（(](?P<n>[ivxｉｖｘ]+)[)）]{_SP}*")
DELETED = re.compile(rf"^{_SP}*第(?P<a>{NUM})条から第(?P<b>{NUM})条まで{_SP}+削除", re.M)  # repealed together
_SUPPLEMENT = re.compile(rf"^附{_SP}*則(?:{_SP}|[（(]|$)")
_ITEM_CIRCLED = re.compile(rf"^(?P<n>[\u2460-\u2473]){_SP}*")
_ITEM_ALPHA = re.compile(rf"^[（(](?P<n>[a-zａ-ｚ])[)）]{_SP}*")
_INTRO_ITEMS = re.compile(r"(各号|次に掲げる|次の|以下の|[：:]$|including:?$|following:?$)")


def _line_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each line, the end including its newline."""
    spans, pos = [], 0
    for line in text.splitlines(keepends=True):
        spans.append((pos, pos + len(line)))
        pos += len(line)
    return spans


def _heading(line: str) -> tuple[re.Match[str], str] | None:
    s = line.rstrip("\r\n")
    m = _JA_HEAD.match(s)
    if m:
        return m, "ja"
    m = _EN_HEAD.match(s)
    return (m, "en") if m else None


def _style(m: re.Match[str], kind: str) -> str:
    md = f"md{m.group('md').count('#')}" if m.group("md") else "plain"
    if kind == "en":
        return f"{md}-english"
    n = m.group("n")
    digits = "kanji" if not re.search(r"[0-9０-９]", n) else ("full" if re.search(r"[０-９]", n) else "arabic")
    title = m.group("title")
    bracket = "" if title is None else ("-full" if "（" in m.group(0) else "-half")
    return f"{md}-{digits}{bracket}"


def parse(text: str) -> Document:
    lines = _line_spans(text)
    heads: list[tuple[int, int, re.Match[str], str, bool]] = []  # (line index, start offset, match, kind, caption)
    for i, (a, b) in enumerate(lines):
        h = _heading(text[a:b])
        if h:
            m, kind = h
            caption = (
                m.group("title") is None
                and i > 0
                and bool(_CAPTION.match(text[lines[i - 1][0] : lines[i - 1][1]].strip()))
                and not _heading(text[lines[i - 1][0] : lines[i - 1][1]])
            )
            start = lines[i - 1][0] if caption else a
            heads.append((i, start, m, kind, caption))
    if not heads:
        return Document(source=text, preamble=text, articles=[], signature="")
    supplement = next(
        (i for i in range(heads[0][0] + 1, len(lines)) if _SUPPLEMENT.match(text[lines[i][0] : lines[i][1]].strip())),
        None,
    )
    if supplement is not None:
        heads = [h for h in heads if h[0] < supplement]

    # The signature block starts at the first signature-like line after the last article heading.
    sig_start = len(text) if supplement is None else lines[supplement][0]
    for a, b in lines[heads[-1][0] + 1 : supplement]:
        if _SIGNATURE.match(text[a:b].strip()):
            sig_start = a
            break

    articles = []
    for k, (i, start, m, kind, caption) in enumerate(heads):
        end = heads[k + 1][1] if k + 1 < len(heads) else sig_start
        a, b = lines[i]
        title = m.group("title")
        if caption:
            cap = text[lines[i - 1][0] : lines[i - 1][1]].strip()
            title = cap[1:-1]
        rest_start = a + m.start("rest")
        # Statute style: the first paragraph follows the number on the same line after a space.
        body_start = (
            b
            if not m.group("rest").strip()
            else rest_start + (len(m.group("rest")) - len(m.group("rest").lstrip(" \t\u3000")))
        )
        paragraphs = _paragraphs(text, body_start, end)
        number = to_int(m.group("n"))
        suffix = to_int(m.group("s")) if m.group("s") else None
        articles.append(
            Article(
                number=number,
                suffix=suffix,
                title=title,
                heading=text[start:body_start].rstrip("\n"),
                style=_style(m, kind),
                head_raw=text[start:body_start],
                paragraphs=paragraphs,
                start=start,
                end=end,
            )
        )
    return Document(
        source=text,
        preamble=text[: heads[0][1]],
        articles=articles,
        signature=text[sig_start:],
        signature_start=sig_start,
    )


_ROMAN = {"i": 1, "v": 5, "x": 10}


def _num(s: str, family: str = "") -> int:
    s = unicodedata.normalize("NFKC", s)
    if family in ("iroha", "gojuon"):
        return (IROHA if family == "iroha" else GOJUON).index(s) + 1
    if family == "roman":
        vals = [_ROMAN[c] for c in s.lower()]
        return sum(-v if k + 1 < len(vals) and v < vals[k + 1] else v for k, v in enumerate(vals))
    if len(s) == 1 and "\u2460" <= s <= "\u2473":
        return ord(s) - 0x2460 + 1
    if len(s) == 1 and s.isalpha() and s.isascii():
        return ord(s.lower()) - ord("a") + 1
    return to_int(s)


def _paragraphs(text: str, start: int, end: int) -> list[Paragraph]:
    segment = text[start:end]
    spans = [(start + a, start + b) for a, b in _line_spans(segment)]
    explicit_style = any(_PARA_DOT.match(text[a:b]) or _PARA_SP.match(text[a:b]) for a, b in spans)
    paras: list[Paragraph] = []
    cur: dict | None = None
    levels: list[tuple[str, list[Item]]] = []  # open list levels: (family, the list its items go into)

    def close(at: int) -> None:
        if cur is not None:
            paras.append(
                Paragraph(
                    number=cur["number"],
                    explicit=cur["explicit"],
                    marker=cur["marker"],
                    text=cur["text"].rstrip("\n"),
                    items=cur["items"],
                    raw=text[cur["start"] : at],
                    start=cur["start"],
                    end=at,
                )
            )

    for a, b in spans:
        line = text[a:b]
        content = line.strip()
        if (
            not content
            or _CHAPTER.match(content)
            or DELETED.match(content)
            or (_CAPTION.match(content) and cur is not None)
        ):
            if cur is None:
                cur = dict(number=1, explicit=False, marker="", text="", items=[], start=a)
            continue  # blank lines, chapter headings, repealed ranges and stray captions: in the raw text only
        kind, m, family = _classify(line, explicit_style, cur, levels)
        if kind == "item" and cur is not None and m is not None:
            branch = m.groupdict().get("s")
            _add_item(
                levels,
                cur["items"],
                Item(
                    number=_num(m.group("n"), family),
                    marker=line[: m.end()].strip(),
                    text=line[m.end() :].rstrip("\r\n"),
                    start=a,
                    end=b,
                    family=family,
                    suffix=_num(branch) if branch else None,
                ),
            )
            continue
        levels = []
        if cur is not None and (cur["text"] or cur["items"]):
            close(a)
            prev = paras[-1].number
            cur = None
        else:
            prev = 0
        if cur is None:
            cur = dict(start=a, items=[])
        if kind == "para" and m is not None:
            cur.update(number=_num(m.group("n")), explicit=True, marker=line[: m.end()].strip(), text=line[m.end() :])
        else:
            cur.update(number=prev + 1, explicit=False, marker="", text=line)
    if cur is not None:
        close(end)
    return paras


def _add_item(levels: list[tuple[str, list[Item]]], top: list[Item], it: Item) -> None:
    """Put the item at the level of its marker family: an open level closes the ones below it; a new family
    opens a level under the last item; the first family is the paragraph's items."""
    depth = next((k for k, (fam, _) in enumerate(levels) if fam == it.family), None)
    if depth is not None:
        del levels[depth + 1 :]
    elif not levels:
        levels.append((it.family, top))
    elif levels[-1][1]:
        levels.append((it.family, levels[-1][1][-1].children))
    else:
        levels[-1] = (it.family, levels[-1][1])
    levels[-1][1].append(it)
    for _, siblings in levels[:-1]:  # every open ancestor now ends where this item ends
        siblings[-1].end = it.end


def _family_of(line: str, levels: list[tuple[str, list[Item]]]) -> tuple[str, re.Match[str]] | None:
    """The marker family of an item line. (i) (v) (x) read as Roman numerals unless they continue an
    alphabetical list, and (c) (l) never do."""
    open_ = {fam: lst for fam, lst in levels}
    m_roman, m_alpha = _ITEM_ROMAN.match(line), _ITEM_ALPHA.match(line)
    if m_roman and m_alpha:
        alpha = open_.get("alpha")
        continues_alpha = alpha is not None and alpha and _num(m_alpha.group("n")) == alpha[-1].number + 1
        if "roman" in open_ and not continues_alpha:
            return "roman", m_roman
        if continues_alpha or (alpha is None and _num(m_alpha.group("n")) == 1):
            return "alpha", m_alpha
        return ("roman", m_roman) if m_roman.group("n") in ("i", "ｉ") or "roman" in open_ else ("alpha", m_alpha)
    m = _ITEM_KATAKANA.match(line)
    if m:  # イロハ (statutes) or アイウ (other documents): the open one, else the one this letter starts
        c = m.group("n")
        for fam, order in (("iroha", IROHA), ("gojuon", GOJUON)):
            lst = open_.get(fam)
            if lst and c in order and order.index(c) == lst[-1].number:
                return fam, m
        for fam in ("iroha", "gojuon"):
            if fam in open_ and c in (IROHA if fam == "iroha" else GOJUON):
                return fam, m
        return ("gojuon" if c == "ア" or c not in IROHA else "iroha"), m
    for fam, rx in (("kanji", _ITEM_KANJI), ("circled", _ITEM_CIRCLED), ("roman", _ITEM_ROMAN), ("alpha", _ITEM_ALPHA)):
        m = rx.match(line)
        if m:
            return fam, m
    return None


def _classify(
    line: str, explicit_style: bool, cur: dict | None, levels: list[tuple[str, list[Item]]]
) -> tuple[str, re.Match[str] | None, str]:
    for rx in (_PARA_DOT, _PARA_SP):
        m = rx.match(line)
        if m:
            return "para", m, ""
    found = _family_of(line, levels) if cur is not None else None
    if found:
        return "item", found[1], found[0]
    m = _PAREN_NUM.match(line)
    if m:
        intro = bool(cur and (cur["items"] or _INTRO_ITEMS.search(cur["text"].strip())))
        if cur is not None and (explicit_style or intro):
            return "item", m, "paren"
        return "para", m, ""
    return "text", None, ""
