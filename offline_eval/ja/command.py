"""`offline-eval ja stats|diff|check`: the Japanese legal text tools, registered by the CLI."""

from __future__ import annotations

import argparse
import json
from typing import Any


def cmd_ja_stats(a: argparse.Namespace) -> int:
    from offline_eval.ja.show import load_tokenizer, parse, read_text, stats

    tok = load_tokenizer(a.tokenizer) if a.tokenizer else None
    s = stats(parse(read_text(a.file)), tok)
    if a.json:
        print(json.dumps(s, ensure_ascii=False, indent=2))
    else:
        for k, v in s.items():
            print(f"{k:20} {' '.join(v) if isinstance(v, list) else v}")
    return 0


def cmd_ja_diff(a: argparse.Namespace) -> int:
    from offline_eval.ja.align import changes
    from offline_eval.ja.diff import diff_texts
    from offline_eval.ja.show import format_changes, format_diff, parse, read_text, use_color

    ta, tb = read_text(a.a), read_text(a.b)
    d = diff_texts(ta, tb)
    da, db = parse(ta), parse(tb)
    if a.json:
        print(
            json.dumps(
                {
                    "stats": d.stats.to_dict(),
                    "articles": [
                        {"kind": c.kind, "a": c.a_label, "b": c.b_label, "key": c.key, "diff_chars": c.stats.diff_chars}
                        for c in changes(da, db)
                    ],
                    "ops": [list(o) for o in d.ops if o[0] != "equal"],
                },
                ensure_ascii=False,
                indent=2,
            )
        )
        return 0
    print(format_diff(d, use_color(a.color)))
    print("\narticles:")
    print("\n".join(format_changes(da, db)) or "  none changed")
    st = d.stats
    print(
        f"\n{st.diff_chars} chars differ (+{st.inserted_chars} -{st.deleted_chars} "
        f"~{st.replaced_chars_from}->{st.replaced_chars_to}); {st.diff_morphemes} morphemes"
    )
    return 0


def cmd_ja_check(a: argparse.Namespace) -> int:
    from offline_eval.ja.checks import check, introduced_defects
    from offline_eval.ja.show import format_findings, parse, read_text

    doc = parse(read_text(a.file))
    found = introduced_defects(parse(read_text(a.against)), doc) if a.against else check(doc)
    if a.json:
        print(json.dumps([f.to_dict() for f in found], ensure_ascii=False, indent=2))
    else:
        print(format_findings(found))
    return 1 if (found and a.strict) else 0


def add_command(sub: Any) -> None:
    """`offline-eval ja`, registered by the CLI."""
    j = sub.add_parser("ja", help="Japanese legal text tools: statistics, diffs, structure checks")
    jsub = j.add_subparsers(dest="ja_command", required=True)
    js = jsub.add_parser("stats", help="characters, morphemes, articles, paragraphs, items, references")
    js.add_argument("file")
    js.add_argument("--tokenizer", help="a local HF tokenizer folder: also count that model's tokens")
    js.add_argument("--json", action="store_true")
    js.set_defaults(func=cmd_ja_stats)
    jd = jsub.add_parser("diff", help="character/morpheme diff of two documents, with article alignment")
    jd.add_argument("a")
    jd.add_argument("b")
    jd.add_argument("--json", action="store_true")
    jd.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    jd.set_defaults(func=cmd_ja_diff)
    jc = jsub.add_parser("check", help="numbering, references, defined terms, heading formats")
    jc.add_argument("file")
    jc.add_argument("--against", help="the input document: report only defects the file introduced")
    jc.add_argument("--json", action="store_true")
    jc.add_argument("--strict", action="store_true", help="exit 1 when there are findings")
    jc.set_defaults(func=cmd_ja_check)
