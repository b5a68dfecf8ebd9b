"""Render report.md and report.html for an output folder: a first screen that answers the ablation question
(verdicts, leaderboard matrices, one trade-off plot), then every detail one click away (a table of contents and
collapsible sections)."""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path

from offline_eval.results.records import ResultsFolder
from offline_eval.results.summary import Summary
from offline_eval.runtime.fileio import dumps, write_text_atomic
from offline_eval.runtime.i18n import FONTS, _, checked, language
from offline_eval.tasks import read_summary
from offline_eval.tasks.kit.figures import drawing
from offline_eval.tasks.kit.sections import Table, stored

from .browser import browser_data, browser_html
from .caveats import Caveat, cautions, protocol_note, protocols
from .first import deploy_table, leaderboard_matrices, verdict_tables
from .glance import glance
from .inputs import ItemInputs
from .plots import Plot, all_plots, pareto
from .tables import detail_sections


def _md(t: Table, level: str = "##") -> str:
    esc = [[c.replace("|", "\\|") for c in row] for row in t.rows]
    lines = [f"{level} {t.title}", "", "| " + " | ".join(t.header) + " |", "|" + "---|" * len(t.header)]
    lines += ["| " + " | ".join(r) + " |" for r in esc]
    if t.note:
        lines += ["", t.note]
    return "\n".join(lines) + "\n"


def _td(t: Table, i: int, j: int, c: str) -> str:
    cls = t.classes[i][j] if t.classes and t.classes[i][j] else ""
    style = t.styles[i][j] if t.styles and t.styles[i][j] else ""
    attrs = (f' class="{html.escape(cls)}"' if cls else "") + (f' style="{html.escape(style)}"' if style else "")
    return f"<td{attrs}>{html.escape(c)}</td>"


def _html(t: Table, level: str = "h2") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.header)
    body = "".join("<tr>" + "".join(_td(t, i, j, c) for j, c in enumerate(r)) + "</tr>" for i, r in enumerate(t.rows))
    note = f"<p>{html.escape(t.note)}</p>" if t.note else ""
    return (
        f'<{level}>{html.escape(t.title)}</{level}><table class="sortable"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>{note}"
    )


def _figure(p: Plot) -> str:
    # Embedded, so the single file opens offline anywhere.
    return (
        f'<figure><img alt="{html.escape(p.title)}" src="data:image/png;base64,'
        f'{base64.b64encode(p.png).decode()}"><figcaption><b>{html.escape(p.title)}.</b> '
        f"{html.escape(p.caption)}</figcaption></figure>"
    )


def _md_caveat(c: Caveat) -> str:
    return f"- {c.line}\n" + "".join(f"  - {d}\n" for d in c.details)


def _html_caveat(c: Caveat, kind: str) -> str:
    """One line; its details a click away."""
    if not c.details:
        return f'<p class="{kind}">{html.escape(c.line)}</p>'
    items = "".join(f"<li><bdi>{html.escape(d)}</bdi></li>" for d in c.details)  # they hold data: isolated
    return f'<details class="{kind}"><summary>{html.escape(c.line)}</summary><ul>{items}</ul></details>'


def _md_figure(p: Plot) -> str:
    return f"![{p.title}](plots/{p.name}.png)\n\n*{p.title}.* {p.caption}\n"


_CSS = (
    f"body{{font-family:{FONTS}"
    ";margin:2em;max-width:90em}table{border-collapse:collapse;"
    "margin-bottom:1em}figure{display:inline-block;margin:0 1em 1em 0;max-width:48em}img{max-width:100%}"
    "th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left}th{background:#f3f3f3;cursor:pointer}"
    "th.asc::after{content:' \\25B2'}th.desc::after{content:' \\25BC'}"
    "td.v-ni{background:#d9f2d9}td.v-inf{background:#f8d0cc}td.v-inc{background:#fdf0c2}td.v-ref{color:#555}"
    "details{margin:.5em 0;border-left:3px solid #ddd;padding-left:1em}summary{font-size:1.2em;cursor:pointer}"
    ".first{border-bottom:2px solid #888;margin-bottom:1em}details.prompt summary{font-size:1em}"
    ".first details.caution,.first details.protocol{border-left-color:#e0b000;margin:.2em 0}"
    ".first details.caution summary,.first details.protocol summary,.first p.protocol{font-size:1em;white-space:nowrap;"
    "overflow:hidden;text-overflow:ellipsis;margin:.2em 0}"
    "ins{background:#c8efc8;text-decoration:none}del{background:#f8d0cc}.elided{color:#888}"
    "td,th,li,pre,summary,figcaption,h3,b,bdi{unicode-bidi:isolate}"
)

# Click a header to sort its table (numbers by value, text otherwise; again to reverse).
_SORT_JS = """
document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('th').forEach(function (th, col) {
    th.addEventListener('click', function () {
      var body = table.tBodies[0], asc = !th.classList.contains('asc');
      table.querySelectorAll('th').forEach(function (h) { h.classList.remove('asc', 'desc'); });
      th.classList.add(asc ? 'asc' : 'desc');
      var num = function (s) { var m = s.match(/^[-+]?\\d+(\\.\\d+)?/); return m ? parseFloat(m[0]) : NaN; };
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[col].textContent.trim(), y = b.cells[col].textContent.trim();
        var nx = num(x), ny = num(y), c;
        if (!isNaN(nx) && !isNaN(ny)) { c = nx - ny; } else if (!isNaN(nx)) { c = -1; }
        else if (!isNaN(ny)) { c = 1; } else { c = x.localeCompare(y); }
        return asc ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


def write_report(
    out_dir: str | Path, summary: Summary | None = None, inputs: ItemInputs | None = None, lang: str | None = None
) -> Path:
    """report.md, report.html and plots/ for a sweep's summary (read from OUT/summary.json when not given:
    `offline-eval report DIR`); `inputs`, from the sweep, adds the prompts and diffs to the item browser. `lang`:
    the language the report is written in (English by default; `ja`); its numbers are the same in every language."""
    lang = checked(lang)
    folder = ResultsFolder(Path(out_dir))
    summary = read_summary(folder.summary) if summary is None else as_written(summary)
    with language(lang):
        _write(folder, summary, inputs, lang)
    return folder.report_md


def as_written(summary: Summary) -> Summary:
    """The summary as summary.json holds it, and so as `offline-eval report` reads it: an undefined value (NaN,
    an infinity) is null there, so the sweep, `offline-eval report` and verify render it alike ("–")."""
    again = Summary.model_validate(json.loads(dumps(summary.to_json())))
    again._folder, again._generation, again._read_from = summary._folder, summary._generation, summary._read_from
    return again


def _anchor(i: int) -> str:
    return f"d{i}"


# What the report draws, as a number: raised whenever a change of the code draws the same summary otherwise (a
# plot's layout, a table's wording). verify compares a report with its own rendering only where the report says it
# was drawn in this format; one drawn in another (an earlier offline-eval) is said to be, not called changed.
REPORT_FORMAT = 3


def _format_line(lang: str) -> str:
    """The report's last line: its format, and its language where it is not English (an English report's line is
    as it was before reports had a language)."""
    return f"<!-- offline-eval report format {REPORT_FORMAT}{'' if lang == 'en' else ' ' + lang} -->"


def _format_of(report_md: Path) -> tuple[int, str]:
    try:
        text = report_md.read_text("utf-8", errors="replace")
    except OSError:
        return 1, "en"
    found = re.search(r"<!-- offline-eval report format (\d+)(?: ([a-z]{2}))? -->\s*$", text)
    return (int(found.group(1)), found.group(2) or "en") if found else (1, "en")


def report_format(report_md: Path) -> int:
    """The format a report.md was drawn in (1: before the format was written)."""
    return _format_of(report_md)[0]


def report_language(report_md: Path) -> str:
    """The language a report.md was written in (`en` where its last line names none)."""
    return _format_of(report_md)[1]


def _first_md(deploy: Table | None, warned: list[Caveat], protocol: list[Caveat], first: list[str]) -> str:
    """The first screen's answer, then what to know before trusting it, in the order report.html shows them."""
    md = _md(deploy) + "\n" if deploy else ""
    cautions_title, protocol_title, glance_title = _("Cautions"), _("Protocol"), _("At a glance")
    if warned:
        md += f"## {cautions_title}\n\n" + "".join(_md_caveat(c) for c in warned) + "\n"
    if protocol:
        md += f"## {protocol_title}\n\n" + "".join(_md_caveat(c) for c in protocol) + f"\n{protocol_note()}\n\n"
    if first:
        md += f"## {glance_title}\n\n" + "\n".join(f"- {line}" for line in first) + "\n\n"
    return md


def _first_html(deploy: Table | None, warned: list[Caveat], protocol: list[Caveat], first: list[str]) -> str:
    body = _html(deploy) if deploy else ""
    cautions_title, protocol_title, glance_title = (
        html.escape(x) for x in (_("Cautions"), _("Protocol"), _("At a glance"))
    )
    if warned:
        body += f"<h2>{cautions_title}</h2>" + "".join(_html_caveat(c, "caution") for c in warned)
    if protocol:
        body += (
            f"<h2>{protocol_title}</h2>"
            + "".join(_html_caveat(c, "protocol") for c in protocol)
            + f"<p>{html.escape(protocol_note())}</p>"
        )
    if first:
        items = "".join(f"<li>{html.escape(x)}</li>" for x in first)
        body += f"<h2>{glance_title}</h2><ul>{items}</ul>"
    return body


def _write(folder: ResultsFolder, summary: Summary, inputs: ItemInputs | None, lang: str) -> None:
    sections = detail_sections(summary)
    failures = summary.failures
    deploy = deploy_table(summary)
    top = verdict_tables(summary) + leaderboard_matrices(summary)
    with drawing():
        front = pareto(summary.runs)
        plots = all_plots(summary)
    folder.plots.mkdir(exist_ok=True)
    for plot in ([front] if front else []) + plots:
        (folder.plots / f"{plot.name}.png").write_bytes(plot.png)
    first, warned, protocol = glance(summary), cautions(summary), protocols(summary)
    items = browser_data(folder, summary, inputs)
    toc = [("browser", _("Item browser"))] if items else []
    toc += [(_anchor(i), title) for i, (title, _tables) in enumerate(sections)]
    if plots:
        toc.append(("plots", _("Plots")))
    if failures:
        toc.append(("failed", _("Failed runs")))
    title, details, plots_title, failed_title = _("offline-eval report"), _("Details"), _("Plots"), _("Failed runs")

    md = f"# {title}\n\n" + _first_md(deploy, warned, protocol, first) + "\n".join(_md(t) for t in top)
    if front:
        md += "\n" + _md_figure(front)
    md += f"\n## {details}\n\n" + "\n".join(f"- [{t}](#{a})" for a, t in toc if a != "browser") + "\n"
    if items:
        md += "\n" + _("Every item's answers, side by side across runs: the item browser of report.html.") + "\n"
    for i, (heading, tables) in enumerate(sections):
        md += f'\n<a id="{_anchor(i)}"></a>\n\n## {heading}\n\n' + "\n".join(_md(t, "###") for t in tables)
    if plots:
        md += f'\n<a id="plots"></a>\n\n## {plots_title}\n\n' + "\n".join(_md_figure(p) for p in plots)
    if failures:
        md += (
            f'\n<a id="failed"></a>\n\n## {failed_title}\n\n'
            + "\n".join(f"- {f.run}: {stored(f.reason)}" for f in failures)
            + "\n"
        )
    write_text_atomic(folder.report_md, md + "\n" + _format_line(lang) + "\n")

    body = '<div class="first" id="first">' + _first_html(deploy, warned, protocol, first)
    body += "".join(_html(t) for t in top) + (_figure(front) if front else "") + "</div>"
    body += (
        f'<h2>{html.escape(details)}</h2><ul id="toc">'
        + "".join(f'<li><a href="#{a}">{html.escape(t)}</a></li>' for a, t in toc)
        + "</ul>"
    )
    if items:
        body += browser_html(items, folder)
    for i, (heading, tables) in enumerate(sections):
        body += (
            f'<details id="{_anchor(i)}"><summary>{html.escape(heading)}</summary>'
            + "".join(_html(t, "h3") for t in tables)
            + "</details>"
        )
    if plots:
        body += (
            f'<details id="plots"><summary>{html.escape(plots_title)}</summary>'
            + "".join(_figure(p) for p in plots)
            + "</details>"
        )
    if failures:
        body += (
            f'<h2 id="failed">{html.escape(failed_title)}</h2><ul>'
            + "".join(
                f"<li><bdi>{html.escape(f.run)}</bdi>: <bdi>{html.escape(stored(f.reason))}</bdi></li>"
                for f in failures
            )
            + "</ul>"
        )
    write_text_atomic(
        folder.report_html,
        f'<!doctype html><html lang="{lang}"><head><meta charset="utf-8">'
        f'<meta name="offline-eval-report-format" content="{REPORT_FORMAT}">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head>"
        f"<body><h1>{html.escape(title)}</h1>{body}"
        f"<script>{_SORT_JS}</script></body></html>\n",
    )
