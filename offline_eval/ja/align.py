"""Article alignment that survives renumbering, and the change sets built on it.

An inserted article shifts the numbers of the ones after it; they are still the same articles. Articles
are matched by their content (title + body, ignoring their own number): identical ones first, then, between
those anchors, the most similar pairs in order (a small DP).
"""

from __future__ import annotations

from dataclasses import dataclass

from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein

from .contract import Article, Document
from .diff import DiffStats, affordable, diff_texts

MIN_SIMILARITY = 0.5


@dataclass
class Pair:
    a: int | None  # index into the first document's articles
    b: int | None
    similarity: float


def _key(art: Article) -> str:
    return f"{art.title or ''}\n{art.body.strip()}"


def align(a: Document, b: Document) -> list[Pair]:
    ka, kb = [_key(x) for x in a.articles], [_key(x) for x in b.articles]
    pairs: list[Pair] = []
    ia = ib = 0  # start of the current run of unmatched articles
    for op in Levenshtein.opcodes(ka, kb):
        if op.tag != "equal":
            continue
        pairs += _dp(ka, kb, ia, op.src_start, ib, op.dest_start)
        pairs += [Pair(op.src_start + k, op.dest_start + k, 1.0) for k in range(op.src_end - op.src_start)]
        ia, ib = op.src_end, op.dest_end
    pairs += _dp(ka, kb, ia, len(ka), ib, len(kb))
    return pairs


def _similarity(x: str, y: str) -> float:
    """fuzz.ratio / 100 (1 - indel distance / total length); for two articles too long to compare exactly in
    bounded time, the same from the bounded character diff (a lower bound: its edit is an upper bound)."""
    if affordable(len(x), len(y)):
        return fuzz.ratio(x, y) / 100
    total = len(x) + len(y)
    return 1 - diff_texts(x, y, with_morphemes=False).stats.diff_chars / total


def _dp(ka: list[str], kb: list[str], a0: int, a1: int, b0: int, b1: int) -> list[Pair]:
    """Order-preserving matching of ka[a0:a1] to kb[b0:b1] that maximises total similarity."""
    n, m = a1 - a0, b1 - b0
    if n == 0 or m == 0:
        return [Pair(a0 + i, None, 0.0) for i in range(n)] + [Pair(None, b0 + j, 0.0) for j in range(m)]
    sim = [[_similarity(ka[a0 + i], kb[b0 + j]) for j in range(m)] for i in range(n)]
    best = [[0.0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            take = sim[i][j] + best[i + 1][j + 1] if sim[i][j] >= MIN_SIMILARITY else -1.0
            best[i][j] = max(take, best[i + 1][j], best[i][j + 1])
    out, i, j = [], 0, 0
    while i < n and j < m:
        if sim[i][j] >= MIN_SIMILARITY and best[i][j] == sim[i][j] + best[i + 1][j + 1]:
            out.append(Pair(a0 + i, b0 + j, sim[i][j]))
            i, j = i + 1, j + 1
        elif best[i][j] == best[i + 1][j]:
            out.append(Pair(a0 + i, None, 0.0))
            i += 1
        else:
            out.append(Pair(None, b0 + j, 0.0))
            j += 1
    out += [Pair(a0 + k, None, 0.0) for k in range(i, n)] + [Pair(None, b0 + k, 0.0) for k in range(j, m)]
    return out


@dataclass
class ArticleChange:
    kind: str  # changed | deleted | inserted | renumbered (content equal, number differs)
    a_label: str | None
    b_label: str | None
    stats: DiffStats

    @property
    def key(self) -> str:
        """Identity in terms of the first document: its label, or where a new article was inserted."""
        return self.a_label if self.a_label is not None else f"+after:{self.b_label_anchor}"

    b_label_anchor: str = "start"


def changes(a: Document, b: Document) -> list[ArticleChange]:
    """Per-article changes from a to b (unchanged articles are left out)."""
    out: list[ArticleChange] = []
    last_a = "start"
    for p in align(a, b):
        if p.a is not None and p.b is not None:
            x, y = a.articles[p.a], b.articles[p.b]
            last_a = x.label
            if _key(x) != _key(y):
                out.append(ArticleChange("changed", x.label, y.label, diff_texts(x.raw, y.raw).stats))
            elif x.label != y.label:
                out.append(ArticleChange("renumbered", x.label, y.label, DiffStats()))
        elif p.a is not None:
            x = a.articles[p.a]
            last_a = x.label
            out.append(ArticleChange("deleted", x.label, None, diff_texts(x.raw, "").stats))
        else:
            y = b.articles[p.b]  # type: ignore[index]
            c = ArticleChange("inserted", None, y.label, diff_texts("", y.raw).stats)
            c.b_label_anchor = last_a
            out.append(c)
    return out


def changed_set(a: Document, b: Document) -> dict[str, ArticleChange]:
    """Articles whose content changed, were deleted, or were inserted (renumbering alone is not a change)."""
    return {c.key: c for c in changes(a, b) if c.kind != "renumbered"}


def change_precision(source: Document, output: Document, gold: Document) -> dict[str, float]:
    """The model's changed articles against the gold's: precision, recall, F1, and the characters the model
    changed outside the articles the gold changed (a deterministic counterpart of the paper's CP)."""
    m, g = changed_set(source, output), changed_set(source, gold)
    hit = len(set(m) & set(g))
    p = hit / len(m) if m else 1.0
    r = hit / len(g) if g else 1.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    outside = sum(c.stats.diff_chars for k, c in m.items() if k not in g)
    pre = diff_texts(source.preamble, output.preamble, with_morphemes=False).stats.diff_chars
    sig = diff_texts(source.signature, output.signature, with_morphemes=False).stats.diff_chars
    gpre = diff_texts(source.preamble, gold.preamble, with_morphemes=False).stats.diff_chars
    gsig = diff_texts(source.signature, gold.signature, with_morphemes=False).stats.diff_chars
    outside += (pre if not gpre else 0) + (sig if not gsig else 0)
    return {
        "changed_precision": p,
        "changed_recall": r,
        "changed_f1": f,
        "n_changed_model": len(m),
        "n_changed_gold": len(g),
        "chars_changed_outside_gold": outside,
    }
