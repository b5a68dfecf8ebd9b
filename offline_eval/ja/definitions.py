"""Defined terms: where each is defined, whether the definition is scoped, and the first use before it.

Two forms: the abbreviation 「…（以下「甲」という。）」 and the definition 「「電子取引」とは、…をいう。」.
A definition whose sentence limits it (この章において, 以下この条において) is scoped: the same term may be
defined again elsewhere. Sentences end at 。 outside brackets, so in 規則（規程を含む。以下「規則」という。）
the use and the definition are one sentence. Headings (chapters, sections, article captions) are not uses.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass

from .contract import Document
from .numerals import NUM, NUM_CHARS

_ABBREV = re.compile(
    r"以下(?P<scope>[^「『」』。\n]{0,30}?)[「『](?P<t>[^」』\n]{1,30})[」』]と(?:いう|総称する|略称する|略す)"
)
_MEANS = re.compile(r"[「『](?P<u>[^」』\n]{1,30})[」』]とは")
_SCOPE = re.compile(rf"(?:この|本|前|次|同|第[{NUM_CHARS}]{{1,12}})[編章節款条項号](?:[^。「]{{0,30}})において")
_SCOPE_LEN = 2 + 12 + 30 + 4  # the longest text _SCOPE matches
_HEADING_LINE = re.compile(
    rf"^[ \t\u3000]*(?:#.*|第{NUM}[編章節款目](?:の{NUM})?(?:[ \t\u3000].*)?|附[ \t\u3000]*則.*|"
    r"[（(][^）)\n]{1,40}[）)][ \t\u3000]*|Article .*)$",
    re.MULTILINE,
)
_OPEN, _CLOSE = "（(「『", "）)」』"
_MARKS = re.compile(r"[（(「『）)」』。\n]")
_KANJI = re.compile(r"[\u4e00-\u9fff々]")
_GLUED = re.compile(r"[\u4e00-\u9fff々\u30a0-\u30ff]")


@dataclass
class Definition:
    term: str
    start: int
    abbreviation: bool  # 以下「X」という (held to order) rather than 「X」とは
    scoped: bool
    sentence: int  # where its sentence starts


def trie_pattern(words: list[str]) -> str:
    """One regex for many literal words, shaped as a trie so a match costs the word's length, not the number
    of words (a plain alternation of 10,000 terms is 10,000 tries at every position). Longest word first."""
    trie: dict[str, dict] = {}
    for w in words:
        node = trie
        for c in w:
            node = node.setdefault(c, {})
        node[""] = {}

    def build(node: dict[str, dict]) -> str:
        alts = [re.escape(c) + build(child) for c, child in sorted(node.items()) if c]
        end = "" in node
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if end else body

    return build(trie)


class Sentences:
    """Sentence starts of a text (after 。 outside brackets, and at line starts), found in one pass."""

    def __init__(self, text: str) -> None:
        self.starts = [0]
        pos, n = 0, len(text)
        while pos < n:
            eol = text.find("\n", pos)
            stop = n if eol < 0 else eol
            if text.find("。", pos, stop) >= 0:  # a line with no 。 has no sentence start but its own
                depth = 0
                for m in _MARKS.finditer(text, pos, stop):
                    c = m.group(0)
                    if c in _OPEN:
                        depth += 1
                    elif c in _CLOSE:
                        depth = max(0, depth - 1)
                    elif depth == 0:
                        self.starts.append(m.end())
            if eol < 0:
                break
            self.starts.append(eol + 1)
            pos = eol + 1

    def start_of(self, pos: int) -> int:
        return self.starts[bisect.bisect_right(self.starts, pos) - 1]


def definitions(text: str, sentences: Sentences) -> list[Definition]:
    out = []
    for m in _ABBREV.finditer(text):
        s = sentences.start_of(m.start())
        out.append(Definition(m.group("t"), m.start(), True, "において" in m.group("scope"), s))
    # Whether the sentence says where the definition holds before it: read each sentence once, however many
    # definitions it holds (a sentence runs on inside brackets, so one can hold thousands).
    sentence, upto, scoped = -1, -1, False
    for m in _MEANS.finditer(text):
        s = sentences.start_of(m.start())
        if s != sentence:
            sentence, upto, scoped = s, s, False
        if not scoped and m.start() > upto:
            scoped = bool(_SCOPE.search(text, max(s, upto - _SCOPE_LEN), m.start()))
            upto = m.start()
        out.append(Definition(m.group("u"), m.start(), False, scoped, s))
    return sorted(out, key=lambda d: d.start)


def heading_spans(doc: Document) -> list[tuple[int, int]]:
    """Article headings and captions, chapter and section lines (also indented, as in a table of contents),
    the title line, Markdown headings: sorted and merged. A term in them is not a use."""
    spans = [(a.start, a.start + len(a.head_raw)) for a in doc.articles]
    title = re.search(r"\S[^\n]*", doc.preamble)  # the document's title line
    if title:
        spans.append(title.span())
    spans += [m.span() for m in _HEADING_LINE.finditer(doc.source)]
    merged: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def first_uses(doc: Document, defs: list[Definition], bounds_ok: Callable[[int, int], bool]) -> dict[str, int]:
    """The first use of each abbreviation in body text before the sentence that defines it: one scan with all
    terms at once. `bounds_ok(start, end)` says whether the match is a word of its own."""
    first: dict[str, Definition] = {}
    for d in defs:
        if d.abbreviation and not d.scoped:
            first.setdefault(d.term, d)
    if not first:
        return {}
    text = doc.source
    heads = heading_spans(doc)
    head_starts = [a for a, _ in heads]
    rx = re.compile(trie_pattern(list(first)))
    out: dict[str, int] = {}
    limit = max(d.sentence for d in first.values())
    for m in rx.finditer(text, 0, limit):
        term = m.group(0)
        if term in out or m.start() >= first[term].sentence:
            continue
        before = text[m.start() - 1] if m.start() else ""
        after = text[m.end()] if m.end() < len(text) else ""
        if (before in "「『" and after in "」』") or (_KANJI.match(term) and _GLUED.match(before)):
            continue  # quoted, or the tail of a compound word (府令 for 令, 手続法 for 法)
        h = bisect.bisect_right(head_starts, m.start()) - 1
        if h >= 0 and m.start() < heads[h][1]:
            continue
        if bounds_ok(m.start(), m.end()):
            out[term] = m.start()
            if len(out) == len(first):
                break
    return out
