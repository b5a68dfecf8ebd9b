"""Structure checks: a deterministic counterpart of LegalRikai's Structural Consistency (SC).

Each finding has a kind, a location and a message. `introduced_defects(input, output)` keeps only what
the output added, which is what a revision should be held to.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass

from .align import align
from .contract import Document
from .references import Reference, extract

_DEFINE = re.compile(r"以下[「『](?P<t>[^」』]{1,30})[」』]という|[「『](?P<u>[^」』]{1,30})[」』]とは")
_HEADING_LINE = re.compile(r"^(#.*|第.{1,12}条[（(].*[）)]\s*|Article .*|[（(][^）)]{1,40}[）)]\s*)$", re.M)


@dataclass(frozen=True)
class Finding:
    kind: str  # numbering_gap | numbering_duplicate | dangling_reference | moved_reference |
    #            term_used_before_definition | term_defined_twice | inconsistent_heading
    location: str  # e.g. "第9条第2項", "line 12"
    message: str
    key: str  # location-independent identity, for comparing two versions of a document

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


def _sequence(nums: list[int], what: str, where: str, key: str) -> list[Finding]:
    out = []
    seen: Counter[int] = Counter()
    for k, n in enumerate(nums):
        seen[n] += 1
        if seen[n] == 2:
            out.append(Finding("numbering_duplicate", where, f"{what} {n} appears more than once",
                               f"dup:{key}:{n}"))
        if k and n > nums[k - 1] + 1:
            missing = ", ".join(str(x) for x in range(nums[k - 1] + 1, n))
            out.append(Finding("numbering_gap", where, f"{what} {missing} missing between {nums[k - 1]} and {n}",
                               f"gap:{key}:{missing}"))
        elif k and n < nums[k - 1] and seen[n] == 1:
            out.append(Finding("numbering_gap", where, f"{what} {n} comes after {nums[k - 1]}",
                               f"order:{key}:{n}"))
    return out


def numbering(doc: Document) -> list[Finding]:
    out = []
    main = [a.number for a in doc.articles if a.suffix is None]
    out += _sequence(main, "article", "document", "article")
    labels = Counter(a.label for a in doc.articles)
    out += [Finding("numbering_duplicate", _loc(lbl), f"article {lbl} appears {n} times", f"dup:article:{lbl}")
            for lbl, n in labels.items() if n > 1 and "-" in lbl]
    for a in doc.articles:
        explicit = [p.number for p in a.paragraphs if p.explicit]
        if explicit:
            nums = [p.number for p in a.paragraphs]
            out += _sequence(nums, "paragraph", _loc(a.label), f"para:{a.title or a.label}")
        for p in a.paragraphs:
            if p.items:
                out += _sequence([it.number for it in p.items], "item", _loc(a.label, p.number),
                                 f"item:{a.title or a.label}:{p.number}")
    return out


def references(doc: Document, refs: list[Reference] | None = None) -> list[Finding]:
    refs = extract(doc) if refs is None else refs
    return [Finding("dangling_reference", _loc(r.source_article, r.source_paragraph),
                    f"{r.text} points nowhere: {r.problem}", f"dangling:{r.text}:{r.problem}")
            for r in refs if not r.resolved]


def terms(doc: Document) -> list[Finding]:
    """A term defined twice; an abbreviation (以下「乙」という。) used before the sentence that defines it.
    Definitions of the form 「X」とは are not held to order: statutes use a term in their purpose article
    before the definitions article."""
    text = doc.source
    out = []
    defs: dict[str, list[tuple[int, bool]]] = {}
    for m in _DEFINE.finditer(text):
        defs.setdefault(m.group("t") or m.group("u"), []).append((m.start(), m.group("t") is not None))
    bounds: set[int] | None = None
    for term, found in defs.items():
        if len(found) > 1:
            out.append(Finding("term_defined_twice", f"line {text.count(chr(10), 0, found[1][0]) + 1}",
                               f"「{term}」 is defined {len(found)} times", f"twice:{term}"))
        start, abbreviation = found[0]
        if not abbreviation:
            continue
        if bounds is None:
            bounds = _morpheme_bounds(text[:max(x[0] for f in defs.values() for x in f)])
        first_use = _first_use(text, term, start, bounds)
        if first_use is not None:
            out.append(Finding("term_used_before_definition", f"line {text.count(chr(10), 0, first_use) + 1}",
                               f"「{term}」 is used before it is defined", f"early:{term}"))
    return out


def _morpheme_bounds(text: str) -> set[int]:
    from .tokenize import morpheme_spans

    return {x for span in morpheme_spans(text) for x in span}


def _first_use(text: str, term: str, definition: int, bounds: set[int]) -> int | None:
    """The term as a word of its own (not inside 基本契約 for 本契約), outside brackets and headings,
    before the sentence that defines it."""
    sentence = max(text.rfind("。", 0, definition), text.rfind("\n", 0, definition)) + 1
    headings = [m.span() for m in _HEADING_LINE.finditer(text, 0, sentence)]
    for m in re.finditer(re.escape(term), text[:sentence]):
        before = text[m.start() - 1] if m.start() else ""
        after = text[m.end()] if m.end() < len(text) else ""
        if (before in "「『" and after in "」』") or any(a <= m.start() < b for a, b in headings):
            continue
        if m.start() in bounds and m.end() in bounds:
            return m.start()
    return None


def headings(doc: Document) -> list[Finding]:
    styles = Counter(a.style for a in doc.articles)
    if len(styles) <= 1:
        return []
    main, _ = styles.most_common(1)[0]
    odd = [a for a in doc.articles if a.style != main]
    desc = ", ".join(f"{_loc(a.label)} ({a.heading.strip()[:24]})" for a in odd[:5])
    return [Finding("inconsistent_heading", _loc(odd[0].label),
                    f"{len(odd)} heading(s) differ from the usual format '{main}': {desc}",
                    "headings:" + ",".join(sorted(styles)))]


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
                out.append(Finding("moved_reference", _loc(lb, new.source_paragraph),
                                   f"{new.text} still points at article {target}, which is now article {moved_to}",
                                   f"moved:{old.text}:{moved_to}"))
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
