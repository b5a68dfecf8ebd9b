"""fugashi + unidic-lite morphemes with one tagger per process, and token counts for any model tokenizer."""

from __future__ import annotations

import threading
from typing import Any, Callable

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


def morphemes(text: str) -> list[str]:
    """Surface forms, as fugashi gives them (whitespace between morphemes is not a token)."""
    return [w.surface for w in tagger()(text)]


def morpheme_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of each morpheme in `text`."""
    out, pos = [], 0
    for w in tagger()(text):
        pos += len(w.white_space)
        # MeCab skips some spacing characters (e.g. newlines) without reporting them as white_space.
        while text[pos:pos + len(w.surface)] != w.surface and pos < len(text):
            pos += 1
        out.append((pos, pos + len(w.surface)))
        pos += len(w.surface)
    return out


def morpheme_count(text: str) -> int:
    """Morphemes, not counting whitespace."""
    return sum(1 for _ in tagger()(text))


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
