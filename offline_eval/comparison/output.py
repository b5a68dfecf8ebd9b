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
from offline_eval.runtime.i18n import FONTS, N_, _, current, language
from offline_eval.tasks.kit.calibration import calibrated_text
from offline_eval.tasks.kit.sections import stored

from . import words
from .model import Comparison, SettingComparison

N_SETTING, N_OLD_RUN, N_NEW_RUN, N_OLD, N_NEW = N_("setting"), N_("old run"), N_("new run"), N_("old"), N_("new")
N_NUMBER = N_("number")
# The page's headings and fixed words, translated where the page is written.
_WORDS = {
    "title": N_("offline-eval compare"),
    "comparison": N_("Comparison"),
    "verdicts": N_("Verdicts"),
    "judged": N_("Judged numbers, calibrated by human labels where they exist"),
    "changed": N_("What changed"),
    "flipped": N_("Flipped items"),
    "none_flipped": N_("No item flipped."),
    "engine": N_("engine or tool change"),
}


def write(c: Comparison, out: str | Path, lang: str | None = None) -> Path:
    """OUT/comparison.json (the typed comparison), OUT/flips.jsonl and OUT/compare.html; returns the page. The
    page is in `lang` (None: English); comparison.json and flips.jsonl are the same in every language."""
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    write_text_atomic(d / "comparison.json", c.model_dump_json(indent=2) + "\n")
    write_text_atomic(d / "flips.jsonl", "".join(f.model_dump_json() + "\n" for f in c.flips))
    page = d / "compare.html"
    with language(lang):
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
        return _(
            "verified: both folders' summaries and results match their rebuild from store, data, config and weights"
        )
    return _(
        "NOT VERIFIED (--no-verify): both folders were read as they are; a results file edited after its sweep "
        "would be compared as if the sweep had written it (offline-eval verify DIR checks one)"
    )


def _html(c: Comparison, d: Path) -> str:

    b, e = _bdi, html.escape
    w = {k: _(v) for k, v in _WORDS.items()}
    rows = "".join(
        f"<tr><td>{b(s.setting)} <small>({b(_protocol(s))})</small></td><td>{b(s.old_run)}</td><td>{b(s.new_run)}</td><td>{b(s.metric)}</td>"
        f"<td>{_num(s.old_mean)}</td><td>{_num(s.new_mean)}</td><td>{_ci(s.statistics)}</td><td>{e(_tests(s.statistics))}</td>"
        f"<td>{b(_(s.verdict))}</td><td>{_count(s.right_to_wrong)}</td><td>{_count(s.wrong_to_right)}</td>"
        f"<td>{b(stored(s.reason) or (w['engine'] if s.engine_or_tool_change else ''))}</td></tr>"
        for s in c.settings
    )
    changes = "".join(
        f"<tr><td>{b(words.scope(x.scope))}</td><td>{b(words.what(x.what))}</td><td>{b(words.value(x.old or ''))}</td>"
        f"<td>{b(words.value(x.new or ''))}</td></tr>"
        for x in c.changes
    )
    judged = "".join(
        f"<tr><td>{b(x.setting)}</td><td>{b(x.number)}</td><td>{b(x.old_run)}</td><td>{e(_judged(x.old))}</td>"
        f"<td>{b(x.new_run)}</td><td>{e(_judged(x.new))}</td></tr>"
        for x in c.calibration
    )
    if judged:
        judged = (
            f"<h2>{e(w['judged'])}</h2><table><thead><tr>"
            f"{_headers(N_SETTING, N_NUMBER, N_OLD_RUN, N_OLD, N_NEW_RUN, N_NEW)}</tr></thead>"
            f"<tbody>{judged}</tbody></table>"
        )
    settings = sorted({f.setting for f in c.flips})
    i = _isolated
    data = {
        "runs": [_(N_OLD), _(N_NEW)],
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
    browser = browser_html(data, ResultsFolder(d)) if c.flips else f"<p>{e(w['none_flipped'])}</p>"
    warn = "" if c.verified else ' style="color:#a00;font-weight:bold"'
    verdicts = _headers(
        N_SETTING, N_OLD_RUN, N_NEW_RUN, N_("metric"), N_OLD, N_NEW, N_("new - old, 95% CI"),
        N_("tests of no difference"), N_("verdict"), N_("right→wrong"), N_("wrong→right"), N_("note"),
    )  # fmt: skip
    where = _headers(N_("where"), N_("what"), N_OLD, N_NEW)
    return (
        f'<!doctype html><html lang="{current()}"><head><meta charset="utf-8"><title>{e(w["title"])}</title>'
        f"<style>body{{font-family:{FONTS};margin:1.5em}}"
        "table{border-collapse:collapse}td,th{border:1px solid "
        "#ccc;padding:2px 6px;vertical-align:top}pre{white-space:pre-wrap}"
        # the item browser writes outputs as text into cells, pre blocks, summaries and options: each isolated
        "td,th,pre,h3,summary,option,b{unicode-bidi:isolate}</style></head><body>"
        f"<h1>{e(w['comparison'])}</h1><p>{e(_(N_OLD))}: {b(c.old)}<br>{e(_(N_NEW))}: {b(c.new)}</p>"
        f'<p id="verification"{warn}>{e(_verification(c))}</p>'
        f"<h2>{e(w['verdicts'])}</h2><table><thead><tr>{verdicts}</tr></thead><tbody>{rows}</tbody></table>{judged}"
        f"<h2>{e(w['changed'])}</h2><table><thead><tr>{where}</tr></thead><tbody>{changes}</tbody></table>"
        f"<h2>{e(w['flipped'])}</h2>{browser}</body></html>"
    )


def _headers(*names: str) -> str:
    """A table's header cells, each translated."""
    return "".join(f"<th>{html.escape(_(n))}</th>" for n in names)


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
    if s.bootstrap_p is not None:
        return _(
            "{test} p {p:.3g}, cluster bootstrap p {bootstrap_p:.3g}",
            test=s.paired_test,
            p=s.paired_p,
            bootstrap_p=s.bootstrap_p,
        )
    return f"{s.paired_test} p {s.paired_p:.3g}"


def _protocol(s: SettingComparison) -> str:
    return s.new_protocol if s.old_protocol == s.new_protocol else f"{s.old_protocol} → {s.new_protocol}"


def text_table(c: Comparison, lang: str | None = None) -> str:
    """What the terminal shows, in `lang` (None: English): a line per setting, then what changed."""
    with language(lang):
        lines = [_verification(c), *(_line(s) for s in c.settings)]
        lines += [_("only in old: {run} (--map OLD_RUN=NEW_RUN pairs it)", run=r) for r in c.unmatched_old]
        lines += [_("only in new: {run}", run=r) for r in c.unmatched_new]
        if c.calibration:
            lines.append(_("judged numbers, calibrated by human labels where they exist (docs/calibration.md):"))
            lines += [
                f"  {x.setting} {x.number}: {x.old_run} {_judged(x.old)} -> {x.new_run} {_judged(x.new)}"
                for x in c.calibration
            ]
        if c.changes:
            lines.append(_("what changed:"))
            lines += [
                f"  {words.scope(x.scope)}: {words.what(x.what)}: {_value(x.old)} -> {_value(x.new)}" for x in c.changes
            ]
        return "\n".join(lines)


def _value(v: str | None) -> str:
    return str(v) if v is None else words.value(v)


def _line(s: SettingComparison) -> str:
    """A setting's line: its verdict, then each clause that applies (each a message of its own)."""
    protocol = s.new_protocol if s.old_protocol == s.new_protocol else f"{s.old_protocol} -> {s.new_protocol}"
    line = _(
        "{setting} ({protocol} protocol)  {old_run} -> {new_run}: {verdict}",
        setting=s.setting, protocol=protocol, old_run=s.old_run, new_run=s.new_run, verdict=_(s.verdict),
    )  # fmt: skip
    if s.n_items:
        means = {"metric": s.metric, "old": _num(s.old_mean), "new": _num(s.new_mean)}
        if (delta := _ci(s.statistics)) and s.margin is not None:
            line += _(", {metric} {old} -> {new} ({delta}, margin {margin:g})", delta=delta, margin=s.margin, **means)
        else:
            line += _(", {metric} {old} -> {new}", **means)
        if s.right_to_wrong is not None:
            line += _(
                ", {right_to_wrong} right->wrong, {wrong_to_right} wrong->right",
                right_to_wrong=s.right_to_wrong,
                wrong_to_right=s.wrong_to_right,
            )
    if s.n_left_out:
        line += _(", {n} changed items left out", n=s.n_left_out)
    if t := _tests(s.statistics):
        line += _("; {clause}", clause=t)
    note = stored(s.reason) or (
        _("engine or tool change: same inputs, other answers") if s.engine_or_tool_change else ""
    )
    if note:
        line += _("; {clause}", clause=note)
    return line
