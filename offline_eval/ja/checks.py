"""Structure checks: a deterministic counterpart of LegalRikai's Structural Consistency (SC).

Each finding has a kind, a location and a message. `introduced_defects(input, output)` keeps only what
the output added, which is what a revision should be held to.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass

from .align import align
from .contract import DELETED, GOJUON, IROHA, Document, Item
from .definitions import Definition, Sentences, definitions, first_uses
from .numerals import to_int
from .references import Reference, extract, scan
from .tokenize import morpheme_spans


@dataclass(frozen=True)
class Finding:
    kind: str  # numbering_gap | numbering_duplicate | dangling_reference | moved_reference |
    #            term_used_before_definition | term_defined_twice | inconsistent_heading
    location: str  # e.g. "第9条第2項", "line 12"
    message: str
    key: str  # location-independent identity, for comparing two versions of a document
    span: str = ""  # where in the text: "line 12, chars 340-345: 第13条" (references)

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def _loc(article: str | None, paragraph: int | None = None, item: int | None = None) -> str:
    if article is None:
        return "preamble"
    s = f"第{article.replace('-', '条の')}条" if "-" in article else f"第{article}条"
    if paragraph is not None:
        s += f"第{paragraph}項"
    if item is not None:
        s += f"第{item}号"
    return s


def _sequence(nums: list[int], what: str, where: str, key: str, name: Callable[[int], str] = str) -> list[Finding]:
    out = []
    seen: Counter[int] = Counter()
    for k, n in enumerate(nums):
        seen[n] += 1
        if seen[n] == 2:
            out.append(
                Finding("numbering_duplicate", where, f"{what} {name(n)} appears more than once", f"dup:{key}:{n}")
            )
        if k and n > nums[k - 1] + 1:
            missing = ", ".join(name(x) for x in range(nums[k - 1] + 1, n))
            out.append(
                Finding(
                    "numbering_gap",
                    where,
                    f"{what} {missing} missing between {name(nums[k - 1])} and {name(n)}",
                    f"gap:{key}:{missing}",
                )
            )
        elif k and n < nums[k - 1] and seen[n] == 1:
            out.append(
                Finding("numbering_gap", where, f"{what} {name(n)} comes after {name(nums[k - 1])}", f"order:{key}:{n}")
            )
    return out


def numbering(doc: Document) -> list[Finding]:
    out = []
    # e-Gov writes articles repealed together as one line, 第十条から第十二条まで　削除: they are not a gap.
    placed = [(a.start, [a.number]) for a in doc.articles if a.suffix is None]
    placed += [
        (m.start(), list(range(to_int(m.group("a")), to_int(m.group("b")) + 1))) for m in DELETED.finditer(doc.source)
    ]
    main = [n for _, ns in sorted(placed) for n in ns]
    out += _sequence(main, "article", "document", "article")
    labels = Counter(a.label for a in doc.articles)
    out += [
        Finding("numbering_duplicate", _loc(lbl), f"article {lbl} appears {n} times", f"dup:article:{lbl}")
        for lbl, n in labels.items()
        if n > 1 and "-" in lbl
    ]
    for a in doc.articles:
        explicit = [p.number for p in a.paragraphs if p.explicit]
        if explicit:
            nums = [p.number for p in a.paragraphs]
            out += _sequence(nums, "paragraph", _loc(a.label), f"para:{a.title or a.label}")
        for p in a.paragraphs:
            if p.items:
                out += _sequence(
                    [it.number for it in p.items if it.suffix is None],
                    "item",
                    _loc(a.label, p.number),
                    f"item:{a.title or a.label}:{p.number}",
                )
            for it in p.items:
                out += _sub_items(it, _loc(a.label, p.number, it.number), f"sub:{a.title or a.label}:{p.number}")
    return out


def _sub_items(it: Item, where: str, key: str) -> list[Finding]:
    if not it.children:
        return []
    letters = {"iroha": IROHA, "gojuon": GOJUON}.get(it.children[0].family)
    name: Callable[[int], str] = (lambda n: letters[n - 1] if 0 < n <= len(letters) else str(n)) if letters else str
    out = _sequence([c.number for c in it.children], f"sub-item of {it.marker}:", where, f"{key}:{it.marker}", name)
    for c in it.children:
        out += _sub_items(c, f"{where}{c.marker}", f"{key}:{it.marker}")
    return out


def references(doc: Document, refs: list[Reference] | None = None) -> list[Finding]:
    """Dangling references only: external ones point into another law and are not ours to check."""
    refs = scan(doc) if refs is None else refs
    lines = _Lines(doc.source)
    return [
        Finding(
            "dangling_reference",
            _loc(r.source_article, r.source_paragraph),
            f"{r.text} points nowhere: {r.problem}",
            f"dangling:{r.text}:{r.problem}",
            f"line {lines.line(r.start)}, chars {r.start}-{r.end}: {r.text}",
        )
        for r in refs
        if r.status == "dangling"
    ]


class _Lines:
    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line(self, pos: int) -> int:
        return bisect.bisect_right(self.starts, pos)


def terms(doc: Document) -> list[Finding]:
    """A term defined twice in the same scope; an abbreviation (以下「乙」という。) used in body text before the
    sentence that defines it. Definitions of the form 「X」とは are not held to order: statutes use a term in
    their purpose article before the definitions article."""
    text = doc.source
    lines = _Lines(text)
    defs = definitions(text, Sentences(text))
    out = []
    by_term: dict[str, list[Definition]] = {}
    for d in defs:
        if not d.scoped:
            by_term.setdefault(d.term, []).append(d)
    for term, found in by_term.items():
        if len(found) > 1:
            out.append(
                Finding(
                    "term_defined_twice",
                    f"line {lines.line(found[1].start)}",
                    f"「{term}」 is defined {len(found)} times",
                    f"twice:{term}",
                )
            )
    for term, pos in first_uses(doc, defs, lambda a, b: _word_at(text, a, b)).items():
        out.append(
            Finding(
                "term_used_before_definition",
                f"line {lines.line(pos)}",
                f"「{term}」 is used before it is defined",
                f"early:{term}",
            )
        )
    return out


def _word_at(text: str, a: int, b: int) -> bool:
    """Whether text[a:b] is a word of its own (not 本契約 inside 基本契約): morpheme boundaries, found by
    tokenizing only the stretch around it, up to the nearest 。 or line break."""

    lo = max(text.rfind("。", max(0, a - 200), a), text.rfind("\n", max(0, a - 200), a), a - 200) + 1
    ends = [x for x in (text.find("。", b, b + 200), text.find("\n", b, b + 200)) if x >= 0]
    hi = min(ends) + 1 if ends else min(len(text), b + 200)
    bounds = {x + lo for span in morpheme_spans(text[lo:hi]) for x in span}
    return a in bounds and b in bounds


def headings(doc: Document) -> list[Finding]:
    styles = Counter(a.style for a in doc.articles)
    if len(styles) <= 1:
        return []
    main, _ = styles.most_common(1)[0]
    odd = [a for a in doc.articles if a.style != main]
    desc = ", ".join(f"{_loc(a.label)} ({a.heading.strip()[:24]})" for a in odd[:5])
    return [
        Finding(
            "inconsistent_heading",
            _loc(odd[0].label),
            f"{len(odd)} heading(s) differ from the usual format '{main}': {desc}",
            "headings:" + ",".join(sorted(styles)),
        )
    ]


def check(doc: Document) -> list[Finding]:
    return numbering(doc) + references(doc) + terms(doc) + headings(doc)


def moved_references(before: Document, after: Document) -> list[Finding]:
    """References that kept their text while their target article was renumbered in the revision."""
    pairs = [(p.a, p.b) for p in align(before, after) if p.a is not None and p.b is not None]
    new_label = {before.articles[i].label: after.articles[j].label for i, j in pairs}
    rb = _abs_refs_by_article(before)
    ra = _abs_refs_by_article(after)
    out = []
    for i, j in pairs:
        la, lb = before.articles[i].label, after.articles[j].label
        for old, new in zip(rb.get(la, []), ra.get(lb, [])):
            target = old.targets[0].article
            moved_to = new_label.get(target)
            if new.text == old.text and moved_to is not None and moved_to != target:
                out.append(
                    Finding(
                        "moved_reference",
                        _loc(lb, new.source_paragraph),
                        f"{new.text} still points at article {target}, which is now article {moved_to}",
                        f"moved:{old.text}:{moved_to}",
                    )
                )
    return out


def _abs_refs_by_article(doc: Document) -> dict[str, list[Reference]]:
    out: dict[str, list[Reference]] = {}
    for r in extract(doc):
        if r.kind in ("absolute", "english") and r.source_article is not None:
            out.setdefault(r.source_article, []).append(r)
    return out


def introduced_defects(before: Document, after: Document) -> list[Finding]:
    """Findings in `after` that `before` did not have, plus references left behind by renumbering."""
    old = Counter(f.key for f in check(before))
    out = []
    for f in check(after):
        if old[f.key]:
            old[f.key] -= 1
        else:
            out.append(f)
    return out + moved_references(before, after)
