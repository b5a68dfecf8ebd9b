"""Two JSON values compared whole: every path at which they differ, one line each, naming both values.

A list of objects that name themselves (a run, a setting, a model, a file...) is matched element by element by
that name, so a line says which run differs rather than which index; its order is compared too (a leaderboard's
order is its ranking), except where the order is incidental.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

# Keys that name an element of a list; an element's identity is its values of those it has.
_IDENTITY = ("run", "setting", "model", "task", "kind", "family", "role", "path", "run_a", "run_b", "variant", "id")
_MISSING = object()


def _label(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:150] + "…" + text[-8:]


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON reads them: NaN and null alike (summary.json writes NaN as null), floats to 1e-9."""

    def nothing(x: Any) -> bool:
        return x is None or (isinstance(x, float) and math.isnan(x))

    if nothing(a) or nothing(b):
        return nothing(a) and nothing(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return bool(type(a) is type(b) and a == b)


def _identity(element: Any) -> tuple[Any, ...] | None:
    if not isinstance(element, dict):
        return None
    got = tuple(str(element[k]) for k in _IDENTITY if k in element and isinstance(element[k], str | int))
    return got or None


def _ids(items: list[Any]) -> list[tuple[Any, ...]] | None:
    """Each element's identity, if every element has one and no two share it."""
    ids = [_identity(x) for x in items]
    if any(i is None for i in ids) or len(set(ids)) != len(ids):
        return None
    return [i for i in ids if i is not None]


def diff(
    claimed: Any, rebuilt: Any, path: str = "", orderless: frozenset[str] = frozenset(), what: str = "the rebuild"
) -> Iterator[str]:
    """Where `claimed` (what a file says) and `rebuilt` differ. `orderless`: paths of lists whose order means
    nothing (written in the order events happened)."""
    where = path or "(the whole file)"
    if isinstance(claimed, dict) and isinstance(rebuilt, dict):
        for k in sorted(set(claimed) | set(rebuilt), key=str):
            sub = f"{path}.{k}" if path else str(k)
            a, b = claimed.get(k, _MISSING), rebuilt.get(k, _MISSING)
            if a is _MISSING:
                yield f"{sub}: not in the file; {what} gives {_label(b)}"
            elif b is _MISSING:
                yield f"{sub}: the file says {_label(a)}; {what} has no such field"
            else:
                yield from diff(a, b, sub, orderless, what)
        return
    if isinstance(claimed, list) and isinstance(rebuilt, list):
        yield from _lists(claimed, rebuilt, path, orderless, what)
        return
    if not _same(claimed, rebuilt):
        yield f"{where}: the file says {_label(claimed)}, {what} gives {_label(rebuilt)}"


def _lists(claimed: list[Any], rebuilt: list[Any], path: str, orderless: frozenset[str], what: str) -> Iterator[str]:
    mine, theirs = _ids(claimed), _ids(rebuilt)
    if mine is None or theirs is None:
        if len(claimed) != len(rebuilt):
            yield f"{path}: the file has {len(claimed)} entries, {what} {len(rebuilt)}"
        for i, (a, b) in enumerate(zip(claimed, rebuilt)):
            yield from diff(a, b, f"{path}[{i}]", orderless, what)
        return
    by_id = dict(zip(theirs, rebuilt))
    for ident, a in zip(mine, claimed):
        name = f"{path}[{' / '.join(ident)}]"
        if ident not in by_id:
            yield f"{name}: in the file, not in {what}"
        else:
            yield from diff(a, by_id[ident], name, orderless, what)
    for ident in theirs:
        if ident not in set(mine):
            yield f"{path}[{' / '.join(ident)}]: in {what}, not in the file"
    common = [i for i in mine if i in by_id]
    again = [i for i in theirs if i in set(mine)]
    if path not in orderless and common != again:
        shown = [" / ".join(i) for i in common]
        yield f"{path}: the file's order is {_label(shown)}, {what} gives {_label([' / '.join(i) for i in again])}"
