"""Render report.md and report.html for an output folder."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..fileio import write_text_atomic
from ..results import ResultsFolder
from .glance import glance
from .plots import all_plots
from .tables import Table, build_tables


def _md(t: Table) -> str:
    esc = [[c.replace("|", "\\|") for c in row] for row in t.rows]
    lines = [f"## {t.title}", "", "| " + " | ".join(t.header) + " |", "|" + "---|" * len(t.header)]
    lines += ["| " + " | ".join(r) + " |" for r in esc]
    if t.note:
        lines += ["", t.note]
    return "\n".join(lines) + "\n"


def _html(t: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in t.rows)
    note = f"<p>{html.escape(t.note)}</p>" if t.note else ""
    return f"<h2>{html.escape(t.title)}</h2><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}"


_CSS = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse;"
        "margin-bottom:1em}figure{display:inline-block;margin:0 1em 1em 0}img{max-width:100%}th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left}th{background:#f3f3f3}")


_RUN_FIELDS: dict[str, type | tuple[type, ...]] = {
    "run": str, "setting": str, "task": str, "model": str, "metrics": dict, "throughput": dict}


def _check_summary(summary: object, path: Path) -> None:
    """The structure the report reads, checked first, so a damaged file is one line naming the field."""
    if not isinstance(summary, dict) or not isinstance(summary.get("runs"), list):
        raise InputError("not an offline-eval summary (expected an object with a `runs` list)", file=str(path),
                         field="runs")
    for i, r in enumerate(summary["runs"]):
        if not isinstance(r, dict):
            raise InputError("expected an object", file=str(path), record=i, field=f"runs.{i}")
        for key, kind in _RUN_FIELDS.items():
            if not isinstance(r.get(key), kind):
                what = "missing" if key not in r else f"expected {getattr(kind, '__name__', kind)}"
                raise InputError(f"{what}; re-run the sweep to rewrite summary.json", file=str(path), record=i,
                                 field=f"runs.{i}.{key}")
    for key in ("failures", "ablations"):
        if not isinstance(summary.get(key, []), list):
            raise InputError("expected a list", file=str(path), field=key)
    for i, f in enumerate(summary.get("failures") or []):
        if not isinstance(f, dict) or not isinstance(f.get("run"), str) or not isinstance(f.get("reason"), str):
            raise InputError("expected {run, reason}", file=str(path), record=i, field=f"failures.{i}")


def write_report(out_dir: str | Path, summary: dict[str, Any] | None = None) -> Path:
    """report.md, report.html and plots/ for a sweep's summary (read from OUT/summary.json when not given:
    `offline-eval report DIR`)."""
    folder = ResultsFolder(Path(out_dir))
    out, p = folder.root, folder.summary
    if summary is None:
        if not p.exists():
            raise InputError("no summary.json here; run a sweep into this folder first", file=str(out))
        try:
            summary = json.loads(p.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise InputError(f"unreadable summary.json ({e})", file=str(p)) from None
        _check_summary(summary, p)
    assert summary is not None
    tables = build_tables(summary)
    failures = summary.get("failures") or []
    plots = all_plots(summary)
    folder.plots.mkdir(exist_ok=True)
    for plot in plots:
        (folder.plots / f"{plot.name}.png").write_bytes(plot.png)
    first = glance(summary)
    md = "# offline-eval report\n\n"
    if first:
        md += "## At a glance\n\n" + "\n".join(f"- {line}" for line in first) + "\n\n"
    md += "\n".join(_md(t) for t in tables)
    if plots:
        md += "\n## Plots\n\n" + "\n".join(f"![{p.title}](plots/{p.name}.png)" for p in plots) + "\n"
    if failures:
        md += "\n## Failed runs\n\n" + "\n".join(f"- {f['run']}: {f['reason']}" for f in failures) + "\n"
    write_text_atomic(folder.report_md, md)
    body = ("<h2>At a glance</h2><ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in first) + "</ul>"
            if first else "") + "".join(_html(t) for t in tables)
    if plots:
        # Embedded, so the single file opens offline anywhere.
        body += "<h2>Plots</h2>" + "".join(
            f'<figure><img alt="{html.escape(p.title)}" src="data:image/png;base64,'
            f'{base64.b64encode(p.png).decode()}"><figcaption>{html.escape(p.title)}</figcaption></figure>'
            for p in plots)
    if failures:
        body += "<h2>Failed runs</h2><ul>" + "".join(f"<li>{html.escape(f['run'] + ': ' + f['reason'])}</li>" for f in failures) + "</ul>"
    write_text_atomic(folder.report_html, f"<!doctype html><html lang=\"ja\"><head><meta charset=\"utf-8\">"
                                           f"<title>offline-eval report</title><style>{_CSS}</style></head>"
                                           f"<body><h1>offline-eval report</h1>{body}</body></html>\n")
    return folder.report_md
