"""Cross-references in a contract or statute, each classified as internal (resolved to nodes that exist),
external (into another law or contract, with its name where the text gives one) or dangling.

Chains come from `refscan` (前条第二項から第四項まで, 第十五条第三項又は第四項, 同法第三条...). Within a chain a
bare later element inherits the article (and paragraph) of the element before it, and the chain goes on past
a bracketed insertion or a part word: in 第四十三条第一項（前条において…を含む。）、第四項（…）及び第五項 and in
第七十三条第一項ただし書、第三項, the bare paragraphs are 第四十三条's and 第七十三条's. 同条 / 同項 / 同号 mean the
article / paragraph / item mentioned last, in this law or another, leaving out what was mentioned only inside a
bracket that has closed since; a reference mentions an article only when it says 条 and a paragraph only when it
says 項 (a bare 第一号 is an item of the paragraph it sits in, and 同項 after it is still the one named before).
English "Article N" is read too. Everything is one pass over the text plus O(log n) lookups per reference, and
memory per open bracket is constant, however deep brackets nest.
"""

from __future__ import annotations

import bisect
import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from .brackets import OPEN, Brackets, merged, quotes
from .contract import DELETED, Article, Document, Item, Paragraph
from .docindex import DocIndex
from .refscan import Path, chains

_EN = re.compile(
    r"Article\s+(?P<a>\d+)(?:\s+(?:through|to)\s+Article\s+(?P<a2>\d+))?"
    r"(?P<law>\s+of\s+(?:the\s+)?[A-Z][\w ]{0,60}?(?:Act|Code|Law|Agreement|Regulations?|Ordinance))?"
)


@dataclass(frozen=True)
class Target:
    article: str
    paragraph: int | None = None
    item: int | None = None
    sub: int | None = None
    branch: int | None = None  # 第一号の二: item 1, branch 2


@dataclass
class Reference:
    text: str
    kind: str  # absolute | range | paragraph | item | relative | english
    start: int
    end: int
    source_article: str | None  # the article the reference sits in
    source_paragraph: int | None
    targets: list[Target] = field(default_factory=list)
    resolved: bool = False
    problem: str = ""
    law: str | None = None  # set for a reference into another law ("" when unnamed)

    @property
    def status(self) -> str:
        """internal (resolved) | external | dangling."""
        if self.law is not None:
            return "external"
        return "internal" if self.resolved else "dangling"


@dataclass(frozen=True)
class _Mentions:
    """What 同条 / 同項 / 同号 and 同法 refer to: the last article, paragraph, item and law mentioned. Immutable,
    so that the state at an opening bracket can be kept (by reference) and put back at its closing one."""

    article: tuple[str | None, Target] | None = None
    paragraph: tuple[str | None, Target] | None = None
    item: tuple[str | None, Target] | None = None
    law: str | None = None

    def noted(self, law: str | None, t: Target, names: _Names) -> _Mentions:
        """A reference names an article only when it says 条 (第三条, 前条, 同条), and a paragraph only when it
        says 項 (第四項, 前項, 同項): a bare 第一号 is an item of the paragraph it is written in and leaves 同項
        the paragraph named last (第三十九条第四項各号…ただし、第一号…同項第一号: 同項 is 第三十九条第四項)."""
        return _Mentions(
            (law, Target(t.article)) if names.article else self.article,
            (law, Target(t.article, t.paragraph)) if t.paragraph is not None and names.paragraph else self.paragraph,
            (law, Target(t.article, t.paragraph, t.item, branch=t.branch)) if t.item is not None else self.item,
            law or self.law,
        )


@dataclass(frozen=True)
class _Names:
    """Whether an element names its article and its paragraph (says 条 / 項, or goes on from one that did)."""

    article: bool = False
    paragraph: bool = False

    def next(self, path: Path) -> _Names:
        """What `path` names, coming after an element that named these: 第三十九条第四項第一号及び第二号 names
        article and paragraph in both; in 第一号及び第二号 neither does."""
        goes_on = path.anchor is None
        return _Names(
            path.article is not None or path.level == "条" or (self.article and goes_on),
            path.paragraph is not None or path.level == "項" or (self.paragraph and goes_on),
        )


@dataclass
class _Here:
    article: int | None
    paragraph: Paragraph | None
    item: int | None  # index of the top-level item


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The cycle collector rescans every live object on each full pass, which makes building millions of
    (acyclic) references grow faster than the text; it runs again once the scan is done."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def scan(doc: Document) -> list[Reference]:
    """Every reference in the document, internal, external or dangling, in reading order."""
    with _gc_paused():
        return _scan(doc)


def _scan(doc: Document) -> list[Reference]:
    ix = DocIndex(doc)
    seen = _Mentions()
    refs: list[Reference] = []
    # The signature block and supplementary provisions (附則, numbered afresh) are not read.
    end = doc.signature_start if doc.articles and doc.signature_start >= 0 else len(doc.source)
    deleted = [m.span() for m in DELETED.finditer(doc.source)]
    quoted = quotes(doc.source)
    brackets: Brackets[_Mentions, tuple[tuple[str | None, Target] | None, _Names]] = Brackets(doc.source, quoted)
    # The end, last target and what its element named, of the last chain.
    before: tuple[int, tuple[str | None, Target] | None, _Names] = (-1, None, _Names())
    for ch in chains(doc.source, merged(ix.heads + quoted + deleted), end):
        seen = brackets.advance(ch.start, seen)
        k, para, item = ix.locate(ch.start)
        here = _Here(k, para, item)
        law = ch.law
        if law is not None and law.startswith("同") and seen.law:
            law = seen.law  # 同法: the law named last
        prev: tuple[str | None, Target] | None = None
        prev_names = _Names()
        carried = brackets.carried(ch.start)
        if carried is not None:
            prev, prev_names = carried  # 第四十三条第一項（…）、第四項: the list goes on past the insertion
        elif ch.start == before[0] + 1 and doc.source[before[0]] in OPEN:
            # 第十二条第一項（第二号に係る部分に限る。）: the item is 12(1)'s
            prev, prev_names = before[1], replace(before[2], article=True)
        for path, until in ch.elements:
            r = _element(ix, here, path, until, law, prev, seen)
            refs.append(r)
            names = prev_names.next(path)
            if r.targets:
                prev = (r.law, r.targets[-1])
                for t in r.targets:
                    seen = seen.noted(r.law, t, names)
            elif law is not None:
                seen = replace(seen, law=law)
            prev_names = names
        before = (ch.end, prev, prev_names)
        if prev is not None:
            brackets.offer(ch.end, (prev, prev_names))
    for m in _EN.finditer(doc.source, 0, end):
        h = bisect.bisect_right(ix.starts, m.start()) - 1
        if h >= 0 and ix.heads[h][0] <= m.start() < ix.heads[h][1]:
            continue  # the article's own heading
        k, para, _ = ix.locate(m.start())
        ts = [Target(m.group("a"))] + ([Target(m.group("a2"))] if m.group("a2") else [])
        r = Reference(
            m.group(0).strip(),
            "range" if m.group("a2") else "english",
            m.start(),
            m.end(),
            _label(ix, k),
            para.number if para else None,
            ts,
        )
        if m.group("law"):
            r.law = m.group("law").strip()[3:].strip()
        refs.append(r)
    refs.sort(key=lambda r: r.start)
    for r in refs:
        _resolve(ix, r)
    return refs


def extract(doc: Document) -> list[Reference]:
    """The references into the document itself (resolved or dangling); external ones are left out."""
    return [r for r in scan(doc) if r.law is None]


def counts(refs: list[Reference]) -> dict[str, int]:
    out = {"internal": 0, "external": 0, "dangling": 0}
    for r in refs:
        out[r.status] += 1
    return out


def _label(ix: DocIndex, k: int | None) -> str | None:
    return None if k is None else ix.doc.articles[k].label


def _element(
    ix: DocIndex,
    here: _Here,
    path: Path,
    until: Path | None,
    law: str | None,
    prev: tuple[str | None, Target] | None,
    seen: _Mentions,
) -> Reference:
    end = path.end if until is None else until.end + (2 if ix.doc.source.startswith("まで", until.end) else 0)
    text = ix.doc.source[path.start : end]
    kind = (
        "range"
        if until
        else ("relative" if path.anchor else "absolute" if path.article else "paragraph" if path.paragraph else "item")
    )
    r = Reference(
        text, kind, path.start, end, _label(ix, here.article), here.paragraph.number if here.paragraph else None
    )
    first = _targets(ix, here, path, law, prev, seen, r)
    if r.problem or not first:
        return r
    r.targets = first
    if until is not None:
        last = _targets(ix, here, until, r.law, (r.law, first[-1]), seen, r)
        r.targets = first[:1] + last[-1:]
    return r


def _targets(
    ix: DocIndex,
    here: _Here,
    path: Path,
    law: str | None,
    prev: tuple[str | None, Target] | None,
    seen: _Mentions,
    r: Reference,
) -> list[Target]:
    """What one path points at; sets r.law for an external one and r.problem when it cannot point anywhere."""
    base: list[Target]
    if path.anchor in ("前", "次", "本", "この"):
        r.law = None
        base = _relative(ix, here, path, r)
        if not base:
            return []
    elif path.anchor == "同":
        which = {"条": "article", "項": "paragraph", "号": "item"}[path.level or "条"]
        got = getattr(seen, which)
        if got is None:
            r.problem = f"no earlier {which} reference for 同{path.level}"
            return []
        r.law, t = got
        base = [t]
    else:
        # No anchor: 第N条 stands alone; 第N項 / 第N号 take what is above them from the element they are
        # coordinated with, else from where they are written.
        r.law = law if prev is None else prev[0]
        if path.article is not None:
            return [Target(path.article, path.paragraph, path.item, path.sub, path.branch)]
        if prev is not None:
            above = prev[1]
        elif r.law is not None:
            return [Target("?", path.paragraph, path.item, path.sub, path.branch)]
        elif here.article is None:
            r.problem = f"{path.text} outside any article"
            return []
        else:
            # A bare 第N号 is this paragraph's item; in a paragraph without items, the article's list.
            above = Target(
                ix.doc.articles[here.article].label,
                here.paragraph.number if here.paragraph and (here.paragraph.items or path.paragraph) else None,
            )
        if path.paragraph is not None:
            return [Target(above.article, path.paragraph, path.item, path.sub, path.branch)]
        return [Target(above.article, above.paragraph, path.item, path.sub, path.branch)]
    # An anchor, narrowed by what follows it: 前条第一項第二号, 前項第二号, 同号イ.
    out = []
    for t in base:
        if path.level == "条":
            t = Target(t.article, path.paragraph, path.item, path.sub, path.branch)
        elif path.level == "項":
            t = Target(t.article, t.paragraph, path.item, path.sub, path.branch)
        elif path.sub is not None:
            t = Target(t.article, t.paragraph, t.item, path.sub, t.branch)
        out.append(t)
    return out


def _relative(ix: DocIndex, here: _Here, path: Path, r: Reference) -> list[Target]:
    word = (
        (path.anchor or "") + ("" if path.count in (None, 1) else "各" if path.count == 0 else "N") + (path.level or "")
    )
    if here.article is None:
        r.problem = f"{word} outside any article"
        return []
    k = here.article
    art = ix.doc.articles[k]
    n = path.count or 0
    if path.level == "条":
        if path.anchor in ("本", "この"):
            return [Target(art.label)]
        if path.anchor == "次":
            if k + 1 < len(ix.doc.articles):
                return [Target(ix.doc.articles[k + 1].label)]
            r.problem = "次条 of the last article"
            return []
        lo = 0 if n == 0 else k - n
        if k == 0 or lo < 0:
            r.problem = (
                "前条 of the first article" if path.count == 1 else f"{path.text} with only {k} article(s) before it"
            )
            return []
        return [Target(a.label) for a in ix.doc.articles[lo:k]]
    paras = art.paragraphs
    pi = ix.para_index(k, here.paragraph)
    if path.level == "項":
        if path.anchor in ("本", "この"):
            return [Target(art.label, here.paragraph.number)] if here.paragraph else []
        if path.anchor == "次":
            if 0 <= pi < len(paras) - 1:
                return [Target(art.label, paras[pi + 1].number)]
            r.problem = "次項 of the last paragraph"
            return []
        lo = 0 if n == 0 else pi - n
        if pi <= 0 or lo < 0:
            r.problem = (
                "前項 of the first paragraph"
                if path.count == 1
                else f"{path.text} with only {max(pi, 0)} paragraph(s) before it"
            )
            return []
        return [Target(art.label, p.number) for p in paras[lo:pi]]
    items = here.paragraph.items if here.paragraph else []
    pn = here.paragraph.number if here.paragraph else None
    if path.anchor in ("本", "この"):
        return [_item_target(art, pn, items[here.item])] if here.item is not None else []
    if path.anchor == "次":
        if here.item is not None and here.item + 1 < len(items):
            return [_item_target(art, pn, items[here.item + 1])]
        r.problem = "次号 of the last item"
        return []
    # Inside an item 前号 counts back from that item; in a sentence after the items, from the end.
    upto = here.item if here.item is not None else len(items)
    want = upto if n == 0 else n
    chosen = items[max(0, upto - want) : upto]
    if not chosen or len(chosen) < want:
        r.problem = f"{path.text[:4]} with only {upto} item(s) before it"
    return [_item_target(art, pn, it) for it in chosen]


def _item_target(art: Article, paragraph: int | None, it: Item) -> Target:
    return Target(art.label, paragraph, it.number, branch=it.suffix)


def _resolve(ix: DocIndex, r: Reference) -> None:
    """Mark an internal reference resolved if every target exists; else record what is missing."""
    if r.law is not None:
        r.resolved, r.problem = False, ""
        return
    if r.problem:
        r.resolved = False
        return
    if not r.targets:
        r.resolved, r.problem = False, "no target"
        return
    for t in r.targets:
        problem = _missing(ix, t)
        if problem:
            r.resolved, r.problem = False, problem
            return
    if r.kind == "range" and len(r.targets) == 2 and _order(ix, r.targets[0]) > _order(ix, r.targets[1]):
        r.resolved, r.problem = False, "range runs backwards"
        return
    r.resolved = True


def _order(ix: DocIndex, t: Target) -> tuple[int, int, int]:
    return ix.order.get(t.article, -1), t.paragraph or 0, t.item or 0


def _missing(ix: DocIndex, t: Target) -> str:
    art = ix.article(t.article)
    if art is None:
        return f"article {t.article} does not exist"
    if t.paragraph is not None:
        p = ix.paragraph(art, t.paragraph)
        if p is None:
            return f"article {t.article} has no paragraph {t.paragraph}"
        holders = [p]
    else:
        holders = ix.first_with_items(art)
    if t.item is None:
        return ""
    it = next((found for p in holders if (found := ix.item(p, t.item, t.branch)) is not None), None)
    if it is None:
        where = f"paragraph {t.paragraph} " if t.paragraph is not None else ""
        return f"article {t.article} {where}has no item {t.item}" + (f"-{t.branch}" if t.branch else "")
    if t.sub is not None and not _has_sub(it, t.sub):
        return f"article {t.article} item {t.item} has no sub-item {t.sub}"
    return ""


def _has_sub(it: Item, n: int) -> bool:
    return any(c.number == n for c in it.children)
