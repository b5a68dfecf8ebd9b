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
    """Surface forms. Whitespace between morphemes is kept as its own token, so "".join() == text."""
    out: list[str] = []
    for w in tagger()(text):
        if w.white_space:
            out.append(w.white_space)
        out.append(w.surface)
    return out if "".join(out) == text else _with_gaps(text, out)


def _with_gaps(text: str, toks: list[str]) -> list[str]:
    # MeCab drops characters it treats as spacing (e.g. newlines); put every skipped span back in place.
    out, pos = [], 0
    for t in toks:
        if not t.strip() and t not in text[pos:pos + len(t)]:
            continue
        j = text.find(t, pos)
        if j < 0:
            continue
        if j > pos:
            out.append(text[pos:j])
        out.append(t)
        pos = j + len(t)
    if pos < len(text):
        out.append(text[pos:])
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
