"""The language of what we write for a reader (the report, compare's page, the annotation page): English, or
Japanese from the gettext catalogue offline_eval/locale/ja/LC_MESSAGES/offline_eval.po.

A message is marked where it is written, `_("{n} runs of {models} models", n=..., models=...)`: the English is the
msgid, and a sentence built from pieces is one message with named fields, so a translation can reorder them. A
message kept in a constant is marked `N_(...)` and translated where it is shown, `_(constant)`. English is the
msgid itself, so the English output does not depend on the catalogue at all.

The catalogue is compiled to .mo with Babel at set-up (scripts/setup.sh, scripts/test_fast.sh:
`python -m offline_eval.runtime.i18n`); a missing or older .mo is compiled in memory from the .po instead."""

from __future__ import annotations

import contextlib
import functools
import gettext
import io
import os
import re
import sys
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from .errors import OfflineEvalError

LANGUAGES = ("en", "ja")
DEFAULT = "en"
DOMAIN = "offline_eval"
LOCALE_DIR = Path(__file__).resolve().parent.parent / "locale"

# The fonts a page asks for, the Japanese ones a reader's machine may have (macOS, Windows, Linux, matplotlib-fontja's)
# before the generic: a machine with none draws Japanese as boxes whatever the page says.
FONTS = 'system-ui,"Hiragino Sans","Hiragino Kaku Gothic ProN","Yu Gothic",Meiryo,"Noto Sans CJK JP","IPAexGothic",sans-serif'

_current: ContextVar[str] = ContextVar("offline_eval_language", default=DEFAULT)


class UnknownLanguage(OfflineEvalError, ValueError):
    """A language we have no catalogue for: one line and exit 2 from the CLI."""


def checked(lang: str | None) -> str:
    """`lang` as given on the command line or in a config, or the default; an unknown one raises, naming the known."""
    if lang is None:
        return DEFAULT
    if lang not in LANGUAGES:
        raise UnknownLanguage(f"unknown language {lang!r}: offline-eval writes {' or '.join(LANGUAGES)}")
    return lang


def add_option(parser: Any, what: str) -> None:
    """The `--lang` option of a command that writes for a reader (sweep, report, compare, annotate, annotate plan)."""
    parser.add_argument("--lang", metavar="|".join(LANGUAGES), help=f"the language of {what}: en (default) or ja")


def current() -> str:
    return _current.get()


@contextlib.contextmanager
def language(lang: str | None) -> Iterator[str]:
    """Write in `lang` within the block (the report, a page); the previous language after it."""
    token = _current.set(checked(lang))
    try:
        yield _current.get()
    finally:
        _current.reset(token)


def po_path(lang: str) -> Path:
    return LOCALE_DIR / lang / "LC_MESSAGES" / f"{DOMAIN}.po"


def compile_catalogue(lang: str) -> bytes:
    """The .mo bytes of a language's .po (Babel), failing on an entry whose fields differ from its msgid's."""
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    with po_path(lang).open("rb") as f:
        catalog = read_po(f, locale=lang)
    out = io.BytesIO()
    write_mo(out, catalog)
    return out.getvalue()


@functools.cache
def _translations(lang: str) -> gettext.NullTranslations:
    if lang == DEFAULT:
        return gettext.NullTranslations()
    po = po_path(lang)
    mo = po.with_suffix(".mo")
    if mo.exists() and mo.stat().st_mtime >= po.stat().st_mtime:
        with mo.open("rb") as f:
            return gettext.GNUTranslations(f)
    return gettext.GNUTranslations(io.BytesIO(compile_catalogue(lang)))


def _format(text: str, fields: dict[str, object]) -> str:
    return text.format(**fields) if fields else text


def _(message: str, /, **fields: object) -> str:
    """`message` in the current language, its named fields filled in ("" stays "": gettext's "" is the header)."""
    return _format(_translations(current()).gettext(message) if message else message, fields)


def pgettext(context: str, message: str, /) -> str:
    """`message` in the current language, as meant in `context` (one English word, two Japanese ones)."""
    return _translations(current()).pgettext(context, message)


def ngettext(singular: str, plural: str, n: int, /, **fields: object) -> str:
    """The singular or plural form for `n` (available to the message as {n}), in the current language."""
    return _format(_translations(current()).ngettext(singular, plural, n), {"n": n, **fields})


# Every message a file stores in English (kept()), which said() reads back: registered where it is written.
_KEPT: dict[str, None] = {}


def kept(message: str, /) -> str:
    """Marks a message that a file machines read stores in English (a reason, a departure from the paper, a label),
    and registers it, so that said() shows the stored text in the reader's language."""
    _KEPT[message] = None
    return message


@functools.cache
def _pattern(template: str) -> re.Pattern[str]:
    """The template as a regular expression whose named groups are its fields (each may be empty)."""
    parts = re.split(r"\{(\w+)(?::[^{}]*)?\}", template)
    return re.compile("".join(re.escape(p) if k % 2 == 0 else f"(?P<{p}>.*?)" for k, p in enumerate(parts)), re.DOTALL)


def _literal(template: str) -> int:
    return len(re.sub(r"\{[^{}]*\}", "", template))


@functools.cache
def _by_specificity(templates: tuple[str, ...]) -> list[str]:
    return sorted(templates, key=_literal, reverse=True)


def _one(text: str, templates: list[str]) -> tuple[str, str] | None:
    """(the template, the text in the current language): the most specific template that gives the text (the most
    literal words: "{run}: {departure}" is tried last), each field read back in turn (a departure inside
    "{run}: {departure}" is a template's too)."""
    for t in templates:
        if m := _pattern(t).fullmatch(text):
            if not m.groupdict():
                return t, _(t)
            translated = re.sub(r"\{(\w+):[^{}]*\}", r"{\1}", _translations(current()).gettext(t))  # formatted once
            return t, _format(translated, {k: said(v, templates) for k, v in m.groupdict().items()})
    return None


def said(text: str | None, templates: Iterable[str] | None = None) -> str:
    """A text stored in English in the current language: the template it was written from (`template.format(...)`;
    every kept() message, or `templates`), translated with the fields read back from it, so that English gives the
    text itself. Texts joined by "; " are read back each where each is a template's; a text no template gives (an
    engine's own error, data) stays as it is."""
    if not text:
        return text or ""
    known = _by_specificity(tuple(_KEPT if templates is None else templates))
    whole = _one(text, known)
    if whole is None or _literal(whole[0]) < _GENERIC:
        parts = [_one(p, known) for p in text.split("; ")]
        if len(parts) > 1 and all(p is not None for p in parts):
            return _("; ").join(p[1] for p in parts if p is not None)
    return text if whole is None else whole[1]


_GENERIC = 8  # a template with fewer literal characters ("{run}: {departure}") reads back a joined text last


def N_(message: str, /) -> str:
    """Marks a message for the catalogue without translating it here (a constant translated where it is shown)."""
    return message


def main() -> int:
    """Compile every catalogue to its .mo (set-up runs this)."""
    for lang in LANGUAGES:
        if lang != DEFAULT:
            mo = po_path(lang).with_suffix(".mo")
            tmp = mo.with_name(f".{mo.name}.{os.getpid()}")
            tmp.write_bytes(compile_catalogue(lang))
            tmp.replace(mo)  # whole: a reader beside the set-up never sees half a catalogue
    return 0


if __name__ == "__main__":
    sys.exit(main())
