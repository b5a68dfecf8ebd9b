"""Overflow policy 'focus': keep only the statute articles that differ between the pre- and post-amendment
text, plus their neighbours (aligned by the Japanese toolkit, so renumbered articles still pair up)."""

from __future__ import annotations

from offline_eval.ja.align import _key, align
from offline_eval.ja.contract import Document, parse

GAP = "（中略）\n\n"


def changed_pairs(pre: Document, post: Document) -> tuple[list[tuple[int | None, int | None]], set[int]]:
    pairs = [(p.a, p.b) for p in align(pre, post)]
    changed = set()
    for i, (a, b) in enumerate(pairs):
        if a is None or b is None:
            changed.add(i)
            continue
        x, y = pre.articles[a], post.articles[b]
        if _key(x) != _key(y) or x.label != y.label:
            changed.add(i)
    return pairs, changed


def focus_statutes(pre_text: str, post_text: str, neighbours: int = 1) -> tuple[str, str] | None:
    """(pre excerpt, post excerpt), or None when focusing cannot shorten anything (no articles, nothing changed,
    or every article is kept)."""
    pre, post = parse(pre_text), parse(post_text)
    if not pre.articles or not post.articles:
        return None
    pairs, changed = changed_pairs(pre, post)
    keep = sorted({j for i in changed for j in range(i - neighbours, i + neighbours + 1) if 0 <= j < len(pairs)})
    if not changed or len(keep) == len(pairs):
        return None
    n = len(pairs)
    return _excerpt(pre, [pairs[i][0] for i in keep], keep, n), _excerpt(post, [pairs[i][1] for i in keep], keep, n)


def _excerpt(doc: Document, idx: list[int | None], keep: list[int], n_pairs: int) -> str:
    out, last = [doc.preamble], -1
    for k, i in zip(keep, idx):
        if i is None:
            continue
        if (last >= 0 and k != last + 1) or (last < 0 and k > 0):
            out.append(GAP)
        out.append(doc.articles[i].raw.rstrip("\n") + "\n\n")
        last = k
    if keep[-1] < n_pairs - 1 or last < 0:
        out.append(GAP)
    return "".join(out).rstrip("\n") + "\n"
