"""A parsed document's articles, paragraphs and items by position and by number, for O(log n) lookups."""

from __future__ import annotations

import bisect

from .contract import Article, Document, Item, Paragraph


class DocIndex:
    """Positions and numbers of a parsed document, for O(log n) lookups."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.starts = [a.start for a in doc.articles]
        self.order: dict[str, int] = {}
        for k, a in enumerate(doc.articles):
            self.order.setdefault(a.label, k)
        self._paras: dict[int, dict[int, Paragraph]] = {}
        self._pstarts: dict[int, list[int]] = {}
        self._istarts: dict[int, list[int]] = {}
        self._items: dict[int, dict[tuple[int, int | None], Item]] = {}
        self._listed: dict[int, list[Paragraph]] = {}
        self.heads = [(a.start, a.start + len(a.head_raw)) for a in doc.articles]

    def locate(self, pos: int) -> tuple[int | None, Paragraph | None, int | None]:
        """(article index, paragraph, index of the top-level item) that a position falls in."""
        k = bisect.bisect_right(self.starts, pos) - 1
        if k < 0 or pos >= self.doc.articles[k].end:
            return None, None, None
        paras = self.doc.articles[k].paragraphs
        if not paras:
            return k, None, None
        j = bisect.bisect_right(self._para_starts(k), pos) - 1
        p = paras[max(j, 0)]
        i = bisect.bisect_right(self._item_starts(p), pos) - 1
        return k, p, (i if i >= 0 and pos < p.items[i].end else None)

    def _para_starts(self, k: int) -> list[int]:
        if k not in self._pstarts:
            self._pstarts[k] = [p.start for p in self.doc.articles[k].paragraphs]
        return self._pstarts[k]

    def _item_starts(self, p: Paragraph) -> list[int]:
        if id(p) not in self._istarts:
            self._istarts[id(p)] = [it.start for it in p.items]
        return self._istarts[id(p)]

    def para_index(self, k: int, p: Paragraph | None) -> int:
        """Position of a paragraph in its article (-1 for none)."""
        if p is None:
            return -1
        j = bisect.bisect_left(self._para_starts(k), p.start)
        return j if j < len(self.doc.articles[k].paragraphs) and self.doc.articles[k].paragraphs[j] is p else -1

    def item(self, p: Paragraph, number: int, branch: int | None) -> Item | None:
        if id(p) not in self._items:
            found: dict[tuple[int, int | None], Item] = {}
            for it in p.items:
                found.setdefault((it.number, it.suffix), it)
            self._items[id(p)] = found
        return self._items[id(p)].get((number, branch))

    def first_with_items(self, art: Article) -> list[Paragraph]:
        k = self.order[art.label]
        if k not in self._listed:
            self._listed[k] = [p for p in art.paragraphs if p.items][:1]
        return self._listed[k]

    def article(self, label: str) -> Article | None:
        k = self.order.get(label)
        return None if k is None else self.doc.articles[k]

    def paragraph(self, art: Article, number: int) -> Paragraph | None:
        k = self.order[art.label]
        if k not in self._paras:
            self._paras[k] = {}
            for p in art.paragraphs:
                self._paras[k].setdefault(p.number, p)
        return self._paras[k].get(number)
