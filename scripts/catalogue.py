"""The Japanese catalogue's upkeep: extract every message marked in offline_eval/ (`_`, `N_`, `kept`, `ngettext`) and
merge them into offline_eval/locale/ja/LC_MESSAGES/offline_eval.po, a new message with an empty translation, a
message no longer in the code dropped. tests/test_i18n.py fails while any message has no translation.

    .venv/bin/python scripts/catalogue.py                      # update the .po, then translate its empty entries
    .venv/bin/python scripts/catalogue.py ja part.po other.po  # also take the translations of these .po files
"""

from __future__ import annotations

import sys
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "offline_eval"
KEYWORDS = {"_": None, "N_": None, "kept": None, "ngettext": (1, 2), "pgettext": ((1, "c"), 2)}


def extract() -> Catalog:
    """Every marked message in the package's Python, with where it is written."""
    template = Catalog(domain="offline_eval")
    for filename, lineno, message, _comments, context in extract_from_dir(
        str(PACKAGE), method_map=[("**.py", "python")], keywords=KEYWORDS, comment_tags=(), strip_comment_tags=True
    ):
        template.add(message, None, [(f"offline_eval/{filename}", lineno)], context=context)
    return template


def po(lang: str = "ja") -> Path:
    return PACKAGE / "locale" / lang / "LC_MESSAGES" / "offline_eval.po"


def read(lang: str = "ja") -> Catalog:
    with po(lang).open("rb") as f:
        return read_po(f, locale=lang)


def update(lang: str = "ja", parts: list[str] | None = None) -> int:
    catalog = read(lang)
    for part in parts or []:
        with open(part, "rb") as f:
            for message in read_po(f, locale=lang):
                if message.id and message.string:
                    catalog.delete(message.id)  # setting an id already there would keep its old translation
                    catalog[message.id] = message
    catalog.update(extract(), no_fuzzy_matching=True)
    catalog.obsolete.clear()
    with po(lang).open("wb") as f:
        write_po(f, catalog, width=120, omit_header=False, sort_output=False, include_lineno=False)
    missing = [m.id for m in catalog if m.id and not all(m.string if isinstance(m.string, tuple) else [m.string])]
    print(f"{po(lang).relative_to(ROOT)}: {len(catalog)} messages, {len(missing)} without a translation")
    return 0


if __name__ == "__main__":
    sys.exit(update(sys.argv[1] if len(sys.argv) > 1 else "ja", sys.argv[2:]))
