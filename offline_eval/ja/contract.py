"""Contracts and statutes as a tree: Document -> Article -> Paragraph -> Item, each with its source span.

Parses what appears in practice: `## 第8条（再委託）`, `第8条（再委託）`, `Article 8 (Subcontracting)`,
e-Gov statute text (`（見出し）` on its own line, then `第八条　本文`); paragraphs `1.`, `２`, `(2)` or
unnumbered; items `(1)`, `（１）`, `一`, `①`, `(a)`; a preamble and a signature block.

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
    marker: str  # as written: "(1)", "一", "①"
    text: str
    start: int
    end: int


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
    rf"(?:{_SP}*[（(](?P<title>[^）)\n]*)[）)])?(?=$|{_SP}|[（(])(?P<rest>.*)$")
_EN_HEAD = re.compile(
    rf"^(?P<md>#{{1,6}}{_SP}*)?(?P<num>Article{_SP}+(?P<n>\d+)(?:-(?P<s>\d+))?)"
    rf"(?:{_SP}*\((?P<title>[^)\n]*)\))?(?=$|{_SP})(?P<rest>.*)$")
_CAPTION = re.compile(r"^[（(][^）)\n]{1,40}[）)]$")
_CHAPTER = re.compile(rf"^(?:#{{1,6}}{_SP}*)?第{NUM}[章節款](?:{_SP}|$)")
_SIGNATURE = re.compile(
    r"^(以上|本契約の成立を証|以上の合意を証|本書[0-9０-９一二三四五]+通|IN WITNESS WHEREOF|"
    r"(令和|平成|昭和)[0-9０-９一二三四五六七八九十元]+年[0-9０-９一二三四五六七八九十]+月)")
_PARA_DOT = re.compile(rf"^(?P<n>[0-9０-９]+)[.．]{_SP}*")
_PARA_SP = re.compile(rf"^(?P<n>[0-9０-９]+){_SP}+")
_PAREN_NUM = re.compile(rf"^[（(](?P<n>[0-9０-９]+)[)）]{_SP}*")
_ITEM_KANJI = re.compile(rf"^(?P<n>[一二三四五六七八九十]+){_SP}+")
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
            caption = (m.group("title") is None and i > 0 and
                       bool(_CAPTION.match(text[lines[i - 1][0]:lines[i - 1][1]].strip())) and
                       not _heading(text[lines[i - 1][0]:lines[i - 1][1]]))
            start = lines[i - 1][0] if caption else a
            heads.append((i, start, m, kind, caption))
    if not heads:
        return Document(source=text, preamble=text, articles=[], signature="")

    # The signature block starts at the first signature-like line after the last article heading.
    sig_start = len(text)
    for a, b in lines[heads[-1][0] + 1:]:
        if _SIGNATURE.match(text[a:b].strip()):
            sig_start = a
            break

    articles = []
    for k, (i, start, m, kind, caption) in enumerate(heads):
        end = heads[k + 1][1] if k + 1 < len(heads) else sig_start
        a, b = lines[i]
        title = m.group("title")
        if caption:
            cap = text[lines[i - 1][0]:lines[i - 1][1]].strip()
            title = cap[1:-1]
        rest_start = a + m.start("rest")
        # Statute style: the first paragraph follows the number on the same line after a space.
        body_start = b if not m.group("rest").strip() else rest_start + (len(m.group("rest")) -
                                                                          len(m.group("rest").lstrip(" \t\u3000")))
        paragraphs = _paragraphs(text, body_start, end)
        number = to_int(m.group("n"))
        suffix = to_int(m.group("s")) if m.group("s") else None
        articles.append(Article(number=number, suffix=suffix, title=title, heading=text[start:body_start].rstrip("\n"),
                                style=_style(m, kind), head_raw=text[start:body_start],
                                paragraphs=paragraphs, start=start, end=end))
    return Document(source=text, preamble=text[:heads[0][1]], articles=articles, signature=text[sig_start:],
                    signature_start=sig_start)


def _num(s: str) -> int:
    s = unicodedata.normalize("NFKC", s)
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

    def close(at: int) -> None:
        if cur is not None:
            paras.append(Paragraph(number=cur["number"], explicit=cur["explicit"], marker=cur["marker"],
                                   text=cur["text"].rstrip("\n"), items=cur["items"], raw=text[cur["start"]:at],
                                   start=cur["start"], end=at))

    for a, b in spans:
        line = text[a:b]
        content = line.strip()
        if not content or _CHAPTER.match(content) or (_CAPTION.match(content) and cur is not None):
            if cur is None:
                cur = dict(number=1, explicit=False, marker="", text="", items=[], start=a)
            continue  # blank lines, chapter headings and stray captions stay in the raw text only
        kind, m = _classify(line, explicit_style, cur)
        if kind == "item" and cur is not None:
            cur["items"].append(Item(number=_num(m.group("n")), marker=line[:m.end()].strip(),
                                     text=line[m.end():].rstrip("\r\n"), start=a, end=b))
            continue
        if cur is not None and (cur["text"] or cur["items"]):
            close(a)
            prev = paras[-1].number
            cur = None
        else:
            prev = 0
        if cur is None:
            cur = dict(start=a, items=[])
        if kind == "para":
            cur.update(number=_num(m.group("n")), explicit=True, marker=line[:m.end()].strip(),
                       text=line[m.end():])
        else:
            cur.update(number=prev + 1, explicit=False, marker="", text=line)
    if cur is not None:
        close(end)
    return paras


def _classify(line: str, explicit_style: bool, cur: dict | None) -> tuple[str, re.Match[str] | None]:
    for rx in (_PARA_DOT, _PARA_SP):
        m = rx.match(line)
        if m:
            return "para", m
    for rx in (_ITEM_KANJI, _ITEM_CIRCLED, _ITEM_ALPHA):
        m = rx.match(line)
        if m and cur is not None:
            return "item", m
    m = _PAREN_NUM.match(line)
    if m:
        intro = bool(cur and (cur["items"] or _INTRO_ITEMS.search(cur["text"].strip())))
        if cur is not None and (explicit_style or intro):
            return "item", m
        return "para", m
    return "text", None
