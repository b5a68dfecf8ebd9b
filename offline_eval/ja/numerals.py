"""Kanji numerals <-> integers, and article numbers such as 第二十三条の二 = "23-2"."""

from __future__ import annotations

import unicodedata
from functools import lru_cache

_DIGITS = {
    "〇": 0,
    "零": 0,
    "一": 1,
    "二": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
    "壱": 1,
    "弐": 2,
    "参": 3,
}
_SMALL = {"十": 10, "百": 100, "千": 1000}
_LARGE = {"万": 10_000, "億": 100_000_000}
KANJI_NUM_CHARS = "〇零一二三四五六七八九十百千万億壱弐参"
NUM_CHARS = f"0-9０-９{KANJI_NUM_CHARS}"
NUM = f"[{NUM_CHARS}]+"


def kanji_to_int(s: str) -> int:
    """百九 -> 109, 二十三 -> 23, 一千 -> 1000, 千 -> 1000, 二〇二五 -> 2025 (digit-by-digit form)."""
    s = s.strip()
    if not s:
        raise ValueError("empty numeral")
    if all(c in _DIGITS for c in s) and len(s) > 1:
        return int("".join(str(_DIGITS[c]) for c in s))
    total, section, digit = 0, 0, None
    for c in s:
        if c in _DIGITS:
            digit = _DIGITS[c]
        elif c in _SMALL:
            section += (1 if digit is None else digit) * _SMALL[c]
            digit = None
        elif c in _LARGE:
            section += digit or 0
            total += (section or 1) * _LARGE[c]
            section, digit = 0, None
        else:
            raise ValueError(f"not a kanji numeral: {s!r}")
    return total + section + (digit or 0)


def int_to_kanji(n: int) -> str:
    """109 -> 百九, 23 -> 二十三, 1000 -> 千 (statute style: no 一 before 十, 百, 千)."""
    if n < 0:
        raise ValueError("negative")
    if n == 0:
        return "〇"
    names = "〇一二三四五六七八九"
    out = []
    for unit, value in (("億", 100_000_000), ("万", 10_000)):
        if n >= value:
            out.append(_below_10000(n // value, names) + unit)
            n %= value
    if n:
        out.append(_below_10000(n, names))
    return "".join(out)


def _below_10000(n: int, names: str) -> str:
    s = ""
    for unit, value in (("千", 1000), ("百", 100), ("十", 10)):
        d, n = divmod(n, value)
        if d:
            s += ("" if d == 1 else names[d]) + unit
    return s + (names[n] if n else "")


@lru_cache(maxsize=8192)
def to_int(s: str) -> int:
    """Arabic, full-width or kanji digits (memoised: a statute writes the same few numbers over and over)."""
    t = unicodedata.normalize("NFKC", s).strip()
    return int(t) if t.isdigit() else kanji_to_int(t)


def article_label(number: int, suffix: int | None = None) -> str:
    """(23, 2) -> "23-2"; (109, None) -> "109"."""
    return f"{number}-{suffix}" if suffix else str(number)
