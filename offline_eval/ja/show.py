"""What the `offline-eval ja` commands print: statistics, a readable diff, findings."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from offline_eval.runtime.errors import InputError, is_url

from .align import changes
from .checks import Finding
from .contract import Document, parse
from .diff import TextDiff, merged_ops
from .normalize import char_count
from .references import counts, scan
from .tokenize import model_token_count, morpheme_count

_RED, _GREEN, _DIM, _RESET = "\x1b[31m", "\x1b[32m", "\x1b[2m", "\x1b[0m"


def read_text(path: str) -> str:
    if is_url(path):
        raise InputError("URLs are refused; give a local path", file=path)
    p = Path(path)
    if not p.is_file():
        raise InputError("file not found", file=path)
    data = p.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InputError("not UTF-8 text", file=path, record=f"line {line}") from None


def load_tokenizer(path: str) -> Any:
    """A local HF tokenizer folder; a URL or hub name is refused (nothing is downloaded)."""
    if is_url(path):
        raise InputError("URLs are refused; give a local tokenizer folder", field="--tokenizer", file=path)
    if not Path(path).is_dir():
        raise InputError("not a local tokenizer folder", field="--tokenizer", file=path)
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot load a tokenizer: {str(e).splitlines()[0]}", field="--tokenizer", file=path) from None


def stats(doc: Document, tokenizer: Any | None = None) -> dict[str, Any]:
    refs = scan(doc)
    n = counts(refs)
    out: dict[str, Any] = {
        "chars": char_count(doc.source),
        "morphemes": morpheme_count(doc.source),
        "lines": doc.source.count("\n") + 1,
        "articles": len(doc.articles),
        "paragraphs": sum(len(a.paragraphs) for a in doc.articles),
        "items": sum(len(p.items) for a in doc.articles for p in a.paragraphs),
        "sub_items": sum(_descendants(it) for a in doc.articles for p in a.paragraphs for it in p.items),
        "references": len(refs),
        "internal_references": n["internal"],
        "external_references": n["external"],
        "dangling_references": n["dangling"],
        "external_laws": _laws(refs),
        "article_labels": doc.labels(),
    }
    if tokenizer is not None:
        out["model_tokens"] = model_token_count(doc.source, tokenizer)
    return out


def _laws(refs: list[Any]) -> list[str]:
    """The other laws referred to, in order of first mention, with how often: ["民法 (2)", ...]."""
    seen: dict[str, int] = {}
    for r in refs:
        if r.law is not None:
            name = r.law or "(unnamed, by law number)"
            seen[name] = seen.get(name, 0) + 1
    return [f"{k} ({v})" for k, v in seen.items()]


def _descendants(it: Any) -> int:
    return sum(1 + _descendants(c) for c in it.children)


def use_color(mode: str) -> bool:
    if mode == "always":
        return True
    if mode == "never":
        return False
    return sys.stdout.isatty() and os.environ.get("NO_COLOR") is None and os.environ.get("TERM") != "dumb"


def format_diff(d: TextDiff, color: bool, context: int = 1) -> str:
    """Changed lines with their neighbours; deletions [-like this-] and insertions {+like this+} when there
    is no colour, red and green when there is."""

    def dele(s: str) -> str:
        return f"{_RED}{s}{_RESET}" if color else f"[-{s}-]"

    def ins(s: str) -> str:
        return f"{_GREEN}{s}{_RESET}" if color else f"{{+{s}+}}"

    merged = "".join(
        d.a[a1:a2]
        if t == "equal"
        else (dele(d.a[a1:a2]) if t in ("delete", "replace") else "")
        + (ins(d.b[b1:b2]) if t in ("insert", "replace") else "")
        for t, a1, a2, b1, b2 in merged_ops(d.ops)
    )
    lines = merged.split("\n")
    changed = [i for i, line in enumerate(lines) if ("\x1b[" in line) or "[-" in line or "{+" in line]
    keep = sorted({j for i in changed for j in range(max(0, i - context), min(len(lines), i + context + 1))})
    out, prev = [], -2
    for i in keep:
        if i != prev + 1:
            out.append(f"{_DIM}@@ line {i + 1}{_RESET}" if color else f"@@ line {i + 1}")
        out.append(lines[i])
        prev = i
    return "\n".join(out)


def format_changes(a: Document, b: Document) -> list[str]:
    out = []
    for c in changes(a, b):
        if c.kind == "renumbered":
            out.append(f"  renumbered  第{c.a_label}条 -> 第{c.b_label}条 (content unchanged)")
        elif c.kind == "changed":
            label = f"第{c.a_label}条" + ("" if c.a_label == c.b_label else f" -> 第{c.b_label}条")
            out.append(f"  changed     {label}  ({c.stats.diff_chars} chars)")
        elif c.kind == "deleted":
            out.append(f"  deleted     第{c.a_label}条")
        else:
            out.append(f"  inserted    第{c.b_label}条 (after input 第{c.b_label_anchor}条)")
    return out


def format_findings(findings: list[Finding]) -> str:
    if not findings:
        return "no findings"
    return "\n".join(f"{f.location}: {f.kind}: {f.message}" + (f" ({f.span})" if f.span else "") for f in findings)


__all__ = [
    "format_changes",
    "format_diff",
    "format_findings",
    "load_tokenizer",
    "parse",
    "read_text",
    "stats",
    "use_color",
]
