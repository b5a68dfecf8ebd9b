"""Work counted, not timed: how the Japanese toolkit's scaling tests measure (issue 30, item 7).

A scaling test compares the work done on n characters with the work on 8n: linear work grows 8x, quadratic 64x.
A clock is no measure of it in a test, whatever the bound: other processes share the cores (even this process's
CPU time read a ratio of 24.47 for linear work, against a bound of 24). The work here is counted exactly, so the
same code on the same text gives the same number on any machine under any load:
- Python: every call, line, return and exception event the interpreter runs (sys.settrace), in any module;
- MeCab: the characters it reads. MeCab reads a run of characters that it groups into one unknown word to the
  run's end from each of its characters, so a run of r characters costs r(r+1)/2 reads; any other is one;
- rapidfuzz: the cells of the edit-distance table its calls fill at most: n*m to compare n units with m exactly,
  (2k+1) * max(n, m) within k edits (score_cutoff, score_hint).
Work inside other C calls (regular expressions, str methods) is not counted; its speed, and the toolkit's as a
whole, is measured by the benchmarks (scripts/bench_ja_nesting.py, scripts/bench_ja.py), not by a test.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import offline_eval.ja.align as align_mod
import offline_eval.ja.diff as diff_mod
import offline_eval.ja.tokenize as tokenize_mod
from offline_eval.ja.tokenize import _grouped_classes, morphemes, tagger


@dataclass
class Work:
    python: int = 0  # interpreter events
    mecab: int = 0  # characters MeCab reads
    cells: int = 0  # edit-distance cells

    @property
    def total(self) -> int:
        return self.python + self.mecab + self.cells


_GROUPED: re.Pattern[str] | None = None


def _grouped() -> re.Pattern[str]:
    """Runs of two or more characters of one class MeCab groups (each class's run found from its start)."""
    global _GROUPED
    if _GROUPED is None:
        _GROUPED = re.compile("|".join(f"(?<![{c}])[{c}]{{2,}}" for c in _grouped_classes(tagger())))
    return _GROUPED


class _Tagger:
    def __init__(self, real: Any, work: Work) -> None:
        self.real, self.work, self.runs = real, work, _grouped()

    def __call__(self, text: str) -> Any:
        extra = 0
        for m in self.runs.finditer(text):
            r = m.end() - m.start()
            extra += r * (r + 1) // 2 - r
        self.work.mecab += len(text) + extra
        return self.real(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def _cells(a: Any, b: Any, band: int | None) -> int:
    n, m = len(a), len(b)
    return n * m if band is None else min(n * m, (2 * band + 1) * max(n, m))


class _Levenshtein:
    def __init__(self, real: Any, work: Work) -> None:
        self.real, self.work = real, work

    def opcodes(self, a: Any, b: Any, **kw: Any) -> Any:
        self.work.cells += _cells(a, b, kw.get("score_hint"))
        return self.real.opcodes(a, b, **kw)

    def distance(self, a: Any, b: Any, **kw: Any) -> Any:
        self.work.cells += _cells(a, b, kw.get("score_cutoff"))
        return self.real.distance(a, b, **kw)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"Levenshtein.{name} is not counted: add it to tests/ja_work.py")


class _Fuzz:
    def __init__(self, real: Any, work: Work) -> None:
        self.real, self.work = real, work

    def ratio(self, a: Any, b: Any, **kw: Any) -> Any:
        self.work.cells += _cells(a, b, None)
        return self.real.ratio(a, b, **kw)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"fuzz.{name} is not counted: add it to tests/ja_work.py")


def warm() -> None:
    """Build what is built once per process (the tagger, its grouped classes, regex caches) before counting."""
    morphemes("甲は「（" * 200 + "乙に報告する。")
    _grouped()


_HERE = __file__


@contextmanager
def counting() -> Iterator[Work]:
    """The work done inside the block (this thread's)."""
    warm()
    work = Work()

    def local(frame: Any, event: str, arg: Any) -> Any:
        work.python += 1
        return local

    def call(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename == _HERE:
            return None  # the counters' own lines
        work.python += 1
        return local

    saved = (tokenize_mod._TAGGER, diff_mod.Levenshtein, align_mod.Levenshtein, align_mod.fuzz)
    tokenize_mod._TAGGER = _Tagger(tagger(), work)
    diff_mod.Levenshtein = align_mod.Levenshtein = _Levenshtein(saved[1], work)  # type: ignore[assignment]
    align_mod.fuzz = _Fuzz(saved[3], work)  # type: ignore[assignment]
    old = sys.gettrace()
    sys.settrace(call)
    try:
        yield work
    finally:
        sys.settrace(old)
        tokenize_mod._TAGGER, diff_mod.Levenshtein, align_mod.Levenshtein, align_mod.fuzz = saved


def work_of(fn: Callable[[], Any]) -> Work:
    """The work `fn()` does."""
    with counting() as w:
        fn()
    return w


def assert_grows_at_most(small: Work, large: Work, factor: float) -> None:
    """Each kind of work on its own: a quadratic MeCab read must not hide behind linear Python, nor the reverse."""
    for kind in ("python", "mecab", "cells"):
        a, b = getattr(small, kind), getattr(large, kind)
        assert b <= factor * a, (kind, b / a if a else b, small, large)
