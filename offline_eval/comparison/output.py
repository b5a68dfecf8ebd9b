"""A comparison as files (comparison.json, flips.jsonl, compare.html with the report's item browser) and as the
terminal's lines. Model output is text: escaped in HTML, the browser's data inlined as JSON a script cannot end;
every string from the folders is isolated for bidirectional text (a right-to-left override in a run name, a path or
an answer reorders nothing outside its own cell)."""

from __future__ import annotations

import html
import json
from pathlib import Path

from offline_eval.metrics.noninferiority import NonInferiority
from offline_eval.report.browser import browser_html
from offline_eval.results.calibration import CalibrationRow
from offline_eval.results.records import ResultsFolder
from offline_eval.runtime.fileio import write_text_atomic
from offline_eval.tasks.kit.calibration import calibrated_text

from .model import Comparison, SettingComparison


def write(c: Comparison, out: str | Path) -> Path:
    """OUT/comparison.json (the typed comparison), OUT/flips.jsonl and OUT/compare.html; returns the page."""
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    write_text_atomic(d / "comparison.json", c.model_dump_json(indent=2) + "\n")
    write_text_atomic(d / "flips.jsonl", "".join(f.model_dump_json() + "\n" for f in c.flips))
    page = d / "compare.html"
    write_text_atomic(page, _html(c, d))
    return page


def _bdi(text: str) -> str:
    """A string from the folders (a run name, a path, a reason, an output) in HTML: escaped, and isolated for
    bidirectional text, so that a right-to-left override inside it ends with it."""
    return f"<bdi>{html.escape(text)}</bdi>"


def _isolated(text: str) -> str:
    """The same for a string the item browser writes as text (it joins some into one line, e.g. an item's id,
    setting and gold): wrapped in FIRST STRONG ISOLATE ... POP DIRECTIONAL ISOLATE."""
    return f"\u2068{text}\u2069"


def _verification(c: Comparison) -> str:
    if c.verified:
        return "verified: both folders' summaries and results match their rebuild from store, data, config and weights"
    return (
        "NOT VERIFIED (--no-verify): both folders were read as they are; a results file edited after its sweep "
        "would be compared as if the sweep had written it (offline-eval verify DIR checks one)"
    )


def _html(c: Comparison, d: Path) -> str:

    b, e = _bdi, html.escape
    rows = "".join(
        f"<tr><td>{b(s.setting)} <small>({b(_protocol(s))})</small></td><td>{b(s.old_run)}</td><td>{b(s.new_run)}</td><td>{b(s.metric)}</td>"
        f"<td>{_num(s.old_mean)}</td><td>{_num(s.new_mean)}</td><td>{_ci(s.statistics)}</td><td>{e(_tests(s.statistics))}</td>"
        f"<td>{b(s.verdict)}</td><td>{_count(s.right_to_wrong)}</td><td>{_count(s.wrong_to_right)}</td>"
        f"<td>{b(s.reason or ('engine or tool change' if s.engine_or_tool_change else ''))}</td></tr>"
        for s in c.settings
    )
    changes = "".join(
        f"<tr><td>{b(x.scope)}</td><td>{b(x.what)}</td><td>{b(x.old or '')}</td><td>{b(x.new or '')}</td></tr>"
        for x in c.changes
    )
    judged = "".join(
        f"<tr><td>{b(x.setting)}</td><td>{b(x.number)}</td><td>{b(x.old_run)}</td><td>{e(_judged(x.old))}</td>"
        f"<td>{b(x.new_run)}</td><td>{e(_judged(x.new))}</td></tr>"
        for x in c.calibration
    )
    if judged:
        judged = (
            "<h2>Judged numbers, calibrated by human labels where they exist</h2><table><thead><tr><th>setting</th>"
            "<th>number</th><th>old run</th><th>old</th><th>new run</th><th>new</th></tr></thead>"
            f"<tbody>{judged}</tbody></table>"
        )
    settings = sorted({f.setting for f in c.flips})
    i = _isolated
    data = {
        "runs": ["old", "new"],
        "weights": ["", ""],
        "settings": [i(x) for x in settings],
        "texts": [],
        "rows": [
            [
                i(f.id),
                settings.index(f.setting),
                f.direction,
                i(json.dumps(f.gold, ensure_ascii=False)),
                {
                    "0": [f.old_output, f.old_output, int(f.direction == "wrong->right") ^ 1, {"run": i(f.old_run)}],
                    "1": [f.new_output, f.new_output, int(f.direction == "wrong->right"), {"run": i(f.new_run)}],
                },
                None,
            ]
            for f in c.flips
        ],  # fmt: skip
    }
    browser = browser_html(data, ResultsFolder(d)) if c.flips else "<p>No item flipped.</p>"
    warn = "" if c.verified else ' style="color:#a00;font-weight:bold"'
    return (
        '<!doctype html><html lang="ja"><head><meta charset="utf-8"><title>offline-eval compare</title>'
        "<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}td,th{border:1px solid "
        "#ccc;padding:2px 6px;vertical-align:top}pre{white-space:pre-wrap}"
        # the item browser writes outputs as text into cells, pre blocks, summaries and options: each isolated
        "td,th,pre,h3,summary,option,b{unicode-bidi:isolate}</style></head><body>"
        f"<h1>Comparison</h1><p>old: {b(c.old)}<br>new: {b(c.new)}</p>"
        f'<p id="verification"{warn}>{e(_verification(c))}</p>'
        "<h2>Verdicts</h2><table><thead><tr><th>setting</th><th>old run</th><th>new run</th><th>metric</th>"
        "<th>old</th><th>new</th><th>new - old, 95% CI</th><th>tests of no difference</th><th>verdict</th><th>right→wrong</th>"
        f"<th>wrong→right</th><th>note</th></tr></thead><tbody>{rows}</tbody></table>{judged}"
        "<h2>What changed</h2><table><thead><tr><th>where</th><th>what</th><th>old</th><th>new</th></tr></thead>"
        f"<tbody>{changes}</tbody></table><h2>Flipped items</h2>{browser}</body></html>"
    )


def _judged(row: CalibrationRow | None) -> str:
    if row is None:
        return "–"
    digits = 1 if row.scale[1] > 1 else 3
    return calibrated_text(row, row.judge_mean, digits)


def _count(v: int | None) -> str:
    return "" if v is None else str(v)


def _num(v: float | None) -> str:
    return "" if v is None else f"{v:.3f}"


def _ci(s: NonInferiority | None) -> str:
    if s is None or s.estimate is None:
        return ""
    ci = f" [{s.ci_low:+.3f}, {s.ci_high:+.3f}]" if s.ci_low is not None and s.ci_high is not None else ""
    return f"{s.estimate:+.3f}{ci}"


def _tests(s: NonInferiority | None) -> str:
    """The two-sided tests of no difference: McNemar's exact (0/1) or Wilcoxon's, and the cluster bootstrap's."""
    if s is None or s.paired_p is None:
        return ""
    boot = f", cluster bootstrap p {s.bootstrap_p:.3g}" if s.bootstrap_p is not None else ""
    return f"{s.paired_test} p {s.paired_p:.3g}{boot}"


def _protocol(s: SettingComparison) -> str:
    return s.new_protocol if s.old_protocol == s.new_protocol else f"{s.old_protocol} → {s.new_protocol}"


def text_table(c: Comparison) -> str:
    """What the terminal shows: a line per setting, then what changed."""
    lines = [_verification(c)]
    for s in c.settings:
        delta = _ci(s.statistics)
        note = s.reason or ("engine or tool change: same inputs, other answers" if s.engine_or_tool_change else "")
        protocol = s.new_protocol if s.old_protocol == s.new_protocol else f"{s.old_protocol} -> {s.new_protocol}"
        lines.append(
            f"{s.setting} ({protocol} protocol)  {s.old_run} -> {s.new_run}: {s.verdict}"
            + (
                f", {s.metric} {_num(s.old_mean)} -> {_num(s.new_mean)}"
                + (f" ({delta}, margin {s.margin:g})" if delta and s.margin is not None else "")
                if s.n_items
                else ""
            )
            + (
                f", {s.right_to_wrong} right->wrong, {s.wrong_to_right} wrong->right"
                if s.n_items and s.right_to_wrong is not None
                else ""
            )
            + (f", {s.n_left_out} changed items left out" if s.n_left_out else "")
            + (f"; {t}" if (t := _tests(s.statistics)) else "")
            + (f"; {note}" if note else "")
        )
    for r in c.unmatched_old:
        lines.append(f"only in old: {r} (--map OLD_RUN=NEW_RUN pairs it)")
    for r in c.unmatched_new:
        lines.append(f"only in new: {r}")
    if c.calibration:
        lines.append("judged numbers, calibrated by human labels where they exist (docs/calibration.md):")
        lines += [
            f"  {x.setting} {x.number}: {x.old_run} {_judged(x.old)} -> {x.new_run} {_judged(x.new)}"
            for x in c.calibration
        ]
    if c.changes:
        lines.append("what changed:")
        lines += [f"  {x.scope}: {x.what}: {x.old} -> {x.new}" for x in c.changes]
    return "\n".join(lines)
