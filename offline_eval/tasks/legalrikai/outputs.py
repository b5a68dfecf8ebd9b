"""Reading the candidates' Markdown: AmendExp's two sections, StatRev's revised clauses merged back into the
input contract by article, and whole revised contracts (ReqRev, RiskRev)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from offline_eval.ja.contract import Article, parse

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
_MD_PREFIX = re.compile(r"^#{1,6}[ \t\u3000]*")
_SECTION = re.compile(r"^#{1,6}[ \t\u3000]*(?P<title>.+?)[ \t\u3000]*$", re.M)


def strip_fences(text: str) -> str:
    """The inside of the answer's ``` fenced blocks, joined, when it has any (models often wrap the contract in
    one, with a sentence around it); the text as it is otherwise."""
    blocks = _FENCE.findall(text)
    return "\n\n".join(b.rstrip("\n") for b in blocks) + "\n" if blocks else text


def amendexp_sections(text: str) -> dict[str, str] | None:
    """{'summary', 'impact'} from headings containing 概要 and 影響; None when either is missing."""
    heads = list(_SECTION.finditer(text))
    out: dict[str, str] = {}
    for k, h in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(text)
        body = text[h.end() : end].strip()
        title = h.group("title")
        if "概要" in title and "summary" not in out:
            out["summary"] = body
        elif "影響" in title and "impact" not in out:
            out["impact"] = body
    return out if len(out) == 2 else None


@dataclass
class Merge:
    text: str  # the input contract with the revised articles put in
    replaced: list[str] = field(default_factory=list)
    inserted: list[str] = field(default_factory=list)
    parsed: bool = True  # False: no article in the output, the contract is unchanged


def _order(a: Article) -> tuple[int, int]:
    return (a.number, a.suffix or 0)


def _restyled(new: Article, old: Article | None, template: Article) -> str:
    """The model's article, with the contract's Markdown heading prefix and the blank lines that followed."""
    raw = new.raw.rstrip("\n")
    want = _MD_PREFIX.match(template.head_raw)
    raw = _MD_PREFIX.sub("", raw, count=1)
    if want:
        raw = want.group(0) + raw
    tail = (old or template).raw
    return raw + tail[len(tail.rstrip("\n")) :] if tail.endswith("\n") else raw + "\n\n"


def merge_back(contract: str, output: str) -> Merge:
    """StatRev: replace each article of `contract` that the output revises (same article number), and insert
    the output's new articles (e.g. 第5条の2) after the article they follow. The first of duplicates wins."""
    src, rev = parse(contract), parse(strip_fences(output))
    if not rev.articles or not src.articles:
        return Merge(contract, parsed=False)
    revised: dict[str, Article] = {}
    for a in rev.articles:
        revised.setdefault(a.label, a)
    labels = set(src.labels())
    new = sorted((a for a in revised.values() if a.label not in labels), key=_order)
    m = Merge("")
    pieces = [src.preamble]
    for k, a in enumerate(src.articles):
        if a.label in revised:
            pieces.append(_restyled(revised[a.label], a, a))
            m.replaced.append(a.label)
        else:
            pieces.append(a.raw)
        nxt = _order(src.articles[k + 1]) if k + 1 < len(src.articles) else (1 << 30, 0)
        for b in [b for b in new if _order(a) < _order(b) < nxt]:
            if not pieces[-1].endswith("\n"):
                pieces[-1] += "\n\n"
            pieces.append(_restyled(b, None, a))
            m.inserted.append(b.label)
    first = src.articles[0]
    lead = [b for b in new if _order(b) < _order(first)]
    if lead:
        pieces.insert(1, "".join(_restyled(b, None, first) for b in lead))
        m.inserted = [b.label for b in lead] + m.inserted
    pieces.append(src.signature)
    m.text = "".join(pieces)
    return m
