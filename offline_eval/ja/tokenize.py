"""fugashi + unidic-lite morphemes with one tagger per process, and token counts for any model tokenizer.

MeCab is fed bounded pieces: a line of a few megabytes crashes it (SIGSEGV). Longer texts are cut after the
last 。 or line break before PIECE characters, else after a 、 or space, else at PIECE itself. A long run of
one character class that MeCab groups into unknown words (brackets and other symbols, Latin letters, digits,
katakana: 「（「（…, ）」）」…) is not given to MeCab at all: MeCab reads such a run to its end from each of its
characters, which is quadratic in the run's length (a 20k-character 「（ nesting took 4 s); each of its
characters is a morpheme, as MeCab makes them past its grouping limit.
"""

from __future__ import annotations

import array
import os
import re
import struct
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
RUN = 128  # a run of one grouped character class this long or longer is not given to MeCab
_RUNS: tuple[re.Pattern[str], list[re.Pattern[str]]] | None = None


def _grouped_classes(tg: Any) -> list[str]:
    """Regex character classes, one per MeCab character category, of the characters that MeCab groups into
    unknown words (char.def: GROUP 1, and INVOKE 1 or no dictionary word of their own), from the dictionary's
    char.bin. Characters outside the BMP count with the DEFAULT category."""
    path = os.path.join(os.path.dirname(tg.dictionary_info[0]["filename"]), "char.bin")
    try:
        with open(path, "rb") as f:
            data = f.read()
        (n,) = struct.unpack_from("<I", data, 0)
        names = [data[4 + 32 * k : 36 + 32 * k].split(b"\0")[0].decode() for k in range(n)]
        info = array.array("I")
        info.frombytes(data[4 + 32 * n : 4 + 32 * n + 4 * 0xFFFF])
    except (OSError, struct.error, UnicodeDecodeError, ValueError):
        # No char.bin: the symbol, Latin, digit and katakana blocks of the usual char.def.
        return [
            r"!-/:-@\[-`{-~\u3000-\u303f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65",
            r"A-Za-z\uff21-\uff3a\uff41-\uff5a",
            r"0-9\uff10-\uff19",
            r"\u30a1-\u30ff\u31f0-\u31ff\uff66-\uff9f",
        ]
    members: dict[int, list[int]] = {}
    for code, v in enumerate(info):
        category, group, invoke = (v >> 18) & 0xFF, (v >> 30) & 1, v >> 31
        if not group or names[category] == "SPACE" or 0xD800 <= code < 0xE000:
            continue
        if invoke or names[category] == "DEFAULT" or tg(chr(code))[0].is_unk:
            members.setdefault(category, []).append(code)
    if "DEFAULT" in names:
        members.setdefault(names.index("DEFAULT"), []).append(0x10000)
    out = []
    for category, codes in members.items():
        ranges: list[list[int]] = []
        for c in codes:
            if ranges and c == ranges[-1][1] + 1:
                ranges[-1][1] = c
            else:
                ranges.append([c, c])
        if names[category] == "DEFAULT":
            ranges[-1][1] = 0x10FFFF
        out.append("".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges))
    return out


def _runs() -> tuple[re.Pattern[str], list[re.Pattern[str]]]:
    """Stretches of RUN or more grouped characters of any classes, and each class's runs of RUN or more. A run of
    one class lies inside a stretch, which is rare in real text: the classes are looked for there only. Each
    pattern is one character set repeated, which the regex engine skips through in C (an alternation of the
    classes, tried at every character, took as long as MeCab's own tokenizing)."""
    global _RUNS
    if _RUNS is None:
        tg = tagger()
        with _LOCK:
            if _RUNS is None:
                classes = _grouped_classes(tg)
                _RUNS = (
                    re.compile(f"[{''.join(classes)}]{{{RUN},}}"),
                    [re.compile(f"[{c}]{{{RUN},}}") for c in classes],
                )
    return _RUNS


def _run_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each run of RUN or more characters of one grouped class, in order. The classes are
    disjoint (one MeCab category each) and a stretch ends at a character of none, so each run found in a
    stretch is a whole run of the text."""
    stretch, classes = _runs()
    out: list[tuple[int, int]] = []
    for s in stretch.finditer(text):
        a, b = s.span()
        out += sorted(m.span() for c in classes for m in c.finditer(text, a, b))
    return out


def chunks(text: str) -> Iterator[tuple[int, str, bool]]:
    """(offset, piece, whole) covering `text` in order, as it is tokenized: `pieces` for MeCab, and each run of
    RUN or more characters of one grouped class as one piece (whole=True) whose characters are a morpheme
    each, which is what MeCab makes of such a run (one unknown word per character, past its grouping limit),
    without reading the run to its end from each of them. A run's morphemes so do not depend on where it
    starts, and an edit in it changes only its own."""
    pos = 0
    for a, b in _run_spans(text):
        for off, piece in pieces(text[pos:a]):
            yield pos + off, piece, False
        yield a, text[a:b], True
        pos = b
    for off, piece in pieces(text[pos:] if pos else text):
        yield pos + off, piece, False


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
    out: list[str] = []
    for _, piece, whole in chunks(text):
        out += list(piece) if whole else [w.surface for w in tg(piece)]
    return out


def morpheme_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of each morpheme in `text`."""
    out = []
    tg = tagger()
    for base, piece, whole in chunks(text):
        if whole:
            out += [(base + k, base + k + 1) for k in range(len(piece))]
            continue
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
    return sum(len(piece) if whole else len(tg(piece)) for _, piece, whole in chunks(text))


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
