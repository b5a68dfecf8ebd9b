"""`offline-eval compare OLD NEW`, registered by the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from offline_eval.runtime.errors import InputError
from offline_eval.runtime.i18n import _, add_option, checked, language

from .match import compare
from .output import text_table, write


def add_command(sub: Any) -> None:
    """`offline-eval compare`, registered by the CLI."""
    c = sub.add_parser("compare", help="two sweep folders item by item: regressed, non-inferior, improved?")
    c.add_argument("old", help="the earlier sweep's folder")
    c.add_argument("new", help="the later sweep's folder")
    c.add_argument(
        "--out", help="where comparison.json, flips.jsonl and compare.html go (default: compare-OLD-NEW beside NEW)"
    )
    c.add_argument("--map", action="append", default=[], metavar="OLD_RUN=NEW_RUN", help="pair runs of other names")
    c.add_argument("--margin", action="append", default=[], metavar="METRIC=X", help="instead of the metric's own")
    c.add_argument("--fail-on", choices=["inferior", "inconclusive"], help="exit 1 when a verdict is this or worse")
    c.add_argument("--json", action="store_true", help="print the typed comparison as JSON")
    c.add_argument(
        "--allow-changed-data", action="store_true", help="where a data file changed, compare the items that did not"
    )
    c.add_argument(
        "--allow-protocol-change",
        action="store_true",
        help="pair runs of a task under different protocols (paper, offline-eval): refused by default",
    )
    c.add_argument(
        "--no-verify",
        action="store_true",
        help="compare the folders as they are, without `offline-eval verify` first (said in every output)",
    )
    add_option(c, "compare.html and the lines printed")
    c.set_defaults(func=_command)


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    out = {}
    for v in values:
        k, sep, x = v.partition("=")
        if not sep or not k or not x:
            raise InputError(f"{v!r}: expected NAME=VALUE", field=flag)
        out[k] = x
    return out


def _out(a: Any) -> Path:
    """Where the comparison goes: --out, or compare-OLD-NEW beside NEW, named after the folders themselves (so
    `compare ../old .` is compare-old-NEWNAME); never inside either compared folder (verify would then find
    files no sweep wrote there), never a file."""
    old, new = Path(a.old).resolve(), Path(a.new).resolve()
    out = Path(a.out) if a.out else new.parent / f"compare-{old.name or 'root'}-{new.name or 'root'}"
    where = out.resolve()
    for role, folder in (("OLD", old), ("NEW", new)):
        if where.is_relative_to(folder):
            raise InputError(
                f"{out} is inside {role} ({folder}): give a folder outside both compared folders",
                field="--out",
            )
    if where.exists() and not where.is_dir():
        raise InputError(f"{out} is a file: give a folder (new or existing)", field="--out")
    return out


def _command(a: Any) -> int:
    lang = checked(a.lang)
    margins = {}
    for k, v in _pairs(a.margin, "--margin").items():
        try:
            margins[k] = float(v)
        except ValueError:
            raise InputError(f"{k}={v}: the margin must be a number", field="--margin") from None
    out = _out(a)
    c = compare(
        a.old,
        a.new,
        _pairs(a.map, "--map"),
        margins,
        allow_changed_data=a.allow_changed_data,
        allow_protocol_change=a.allow_protocol_change,
        verify=not a.no_verify,
    )
    try:
        page = write(c, out, lang)
    except OSError as e:
        raise InputError(f"{out}: cannot write there: {e.strerror or e}", field="--out") from None
    if a.json:
        print(c.model_dump_json(indent=2))
    else:
        with language(lang):
            wrote = _("wrote {page}", page=page)
            print(f"{text_table(c, lang)}\n{wrote}")
    return 1 if c.fails(a.fail_on) else 0
