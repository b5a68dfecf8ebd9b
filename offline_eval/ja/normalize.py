"""NFKC-based normalisation that keeps legal punctuation, and character counts."""

from __future__ import annotations

import unicodedata

# NFKC would turn these into ASCII; in legal Japanese they are the document's own punctuation.
_KEEP = set("（）「」『』【】〔〕［］｛｝〈〉《》：；！？，．　～〜・、。")


def normalize(text: str) -> str:
    """NFKC, except that legal punctuation (full-width brackets, colon, ideographic space, ...) is kept.

    Full-width digits and Latin letters become ASCII, so 第１２条 and 第12条 read alike; half-width katakana
    becomes full-width. Line breaks are kept as they are.
    """
    out = []
    run_start = 0
    for i, ch in enumerate(text):
        if ch in _KEEP:
            if run_start < i:
                out.append(unicodedata.normalize("NFKC", text[run_start:i]))
            out.append(ch)
            run_start = i + 1
    if run_start < len(text):
        out.append(unicodedata.normalize("NFKC", text[run_start:]))
    return "".join(out)


def char_count(text: str) -> int:
    """Code points after NFC (a decomposed が counts once)."""
    return len(unicodedata.normalize("NFC", text))
