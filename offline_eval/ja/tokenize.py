"""fugashi + unidic-lite morphemes with one tagger per process, and token counts for any model tokenizer.

MeCab is fed bounded pieces: a line of a few megabytes crashes it (SIGSEGV). Longer texts are cut after the
last 。 or line break before PIECE characters, else after a 、 or space, else at PIECE itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

_TAGGER: Any = None
_LOCK = threading.Lock()


def tagger() -> Any:
    """The process-wide fugashi Tagger (built once: about 0.1 s)."""
    global _TAGGER
    if _TAGGER is None:
        with _LOCK:
            if _TAGGER is None:
                import fugashi

                _TAGGER = fugashi.Tagger()
    return _TAGGER


PIECE = 100_000


def pieces(text: str, size: int = PIECE) -> Iterator[tuple[int, str]]:
    """(offset, piece) covering `text` in order, each at most `size` characters."""
    i, n = 0, len(text)
    while n - i > size:
        stop = i + size
        cut = max(text.rfind("。", i, stop), text.rfind("\n", i, stop))
        if cut <= i:
            cut = max(text.rfind("、", i, stop), text.rfind(" ", i, stop), text.rfind("\u3000", i, stop))
        j = cut + 1 if cut > i else stop
        yield i, text[i:j]
        i = j
    yield i, text[i:]


def morphemes(text: str) -> list[str]:
    """Surface forms, as fugashi gives them (whitespace between morphemes is not a token)."""
    tg = tagger()
    if len(text) <= PIECE:
        return [w.surface for w in tg(text)]
    out: list[str] = []
    for _, piece in pieces(text):
        out += [w.surface for w in tg(piece)]
    return out


def morpheme_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of each morpheme in `text`."""
    out = []
    tg = tagger()
    for base, piece in pieces(text):
        pos = 0
        for w in tg(piece):
            pos += len(w.white_space)
            # MeCab skips some spacing characters (e.g. newlines) without reporting them as white_space.
            while piece[pos : pos + len(w.surface)] != w.surface and pos < len(piece):
                pos += 1
            out.append((base + pos, base + pos + len(w.surface)))
            pos += len(w.surface)
    return out


def morpheme_count(text: str) -> int:
    """Morphemes, not counting whitespace."""
    tg = tagger()
    return sum(len(tg(piece)) for _, piece in pieces(text))


def model_token_count(text: str, tokenizer: Any | Callable[[str], list[int]]) -> int:
    """Tokens under a model's tokenizer: an HF tokenizer, a llama_cpp.Llama, or any text -> ids callable."""
    if hasattr(tokenizer, "encode") and not hasattr(tokenizer, "tokenize_bytes"):
        try:
            return len(tokenizer.encode(text, add_special_tokens=False))
        except TypeError:
            pass
    if hasattr(tokenizer, "tokenize") and hasattr(tokenizer, "n_vocab"):
        return len(tokenizer.tokenize(text.encode("utf-8"), add_bos=False, special=False))
    return len(tokenizer(text))
