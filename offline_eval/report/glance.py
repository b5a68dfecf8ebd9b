"""The report's opening lines: what a first-time reader should take from this sweep, measured from it."""

from __future__ import annotations

import re

from offline_eval.metrics.ranking import has_score
from offline_eval.metrics.values import N_SKIPPED
from offline_eval.results.summary import Summary, Verdict
from offline_eval.tasks.kit.sections import fmt, ranked

from .calibration import calibration_lines
from .tables import task_class


def _fmt(v: float) -> str:
    return fmt(v, 3 if abs(v) < 10 else 1)  # F1 0.512, AdjScore 57.8


def glance(summary: Summary) -> list[str]:
    runs = summary.runs
    lines: list[str] = []
    if runs:
        models = {r.model for r in runs}
        engines = sorted({r.backend for r in runs})
        lines.append(
            f"{len({r.run for r in runs})} runs of {len(models)} models on {', '.join(engines)}, "
            f"{len({r.setting for r in runs})} task settings."
        )
        lines.append(protocol_line(summary))
    for setting in sorted({r.setting for r in runs}):
        group = [r for r in runs if r.setting == setting]
        metric = group[0].primary_metric or "mean"
        by_run = {r.run: r for r in group}
        order = [by_run[run] for _, run in ranked(summary, setting) if run in by_run]  # the sweep's ranking
        scored = [(r, v) for r in order if (v := r.metrics.get(metric)) is not None and has_score(v)]
        if not scored:
            lines.append(f"{setting}: no run scored any item.")
            continue
        (best, high), (worst, low) = scored[0], scored[-1]
        if len(scored) > 1 and high == low:
            text = f"{setting}: all {len(scored)} runs score {metric} {_fmt(high)}"
        else:
            text = f"{setting}: best {best.run} ({metric} {_fmt(high)})"
            if len(scored) > 1:
                text += f", worst {worst.run} ({_fmt(low)})"
        note = task_class(group[0].task).report_parts.glance_note([r for r, _ in scored])
        lines.append(text + (f"; {note}" if note else "") + ".")
    lines += calibration_lines(summary)
    comps = [c for m in summary.noninferiority for c in m.comparisons]
    if comps:
        words = [c.verdict for c in comps]
        counts = ", ".join(
            f"{words.count(w)} {w}" for w in ("non-inferior", "inferior", "inconclusive") if words.count(w)
        )
        whom = "Against each model's reference run" + (
            " (an adapter's run: against its base)" if any(c.against for c in comps) else ""
        )
        lines.append(f"{whom}: {counts} ({len(comps)} run x setting comparisons; verdict tables below).")
    lines += adapter_lines(summary)
    lines += thinking_lines(summary)
    same = summary.consistency
    if same:
        shares = [c.identical for c in same if c.identical is not None]
        if shares:
            lo, hi = f"{100 * min(shares):.0f}", f"{100 * max(shares):.0f}"
            span = hi if lo == hi else f"{lo}-{hi}"
            lines.append(
                f"Same weights on different engines: {span}% identical answers over {len(shares)} "
                f"comparisons (table below)."
            )
    skipped = sum(int(N_SKIPPED.of(r.metrics) or 0) for r in runs)
    if skipped:
        lines.append(f"{skipped} item(s) did not fit a context length and were skipped (counted per run below).")
    fails = summary.failures
    if fails:
        lines.append(f"{len(fails)} run(s) failed: see 'Failed runs' at the end.")
    return lines


def protocol_line(summary: Summary) -> str:
    """Which protocol each task's numbers come from (tasks/kit/protocol.py), and where runs labelled paper depart from
    it (Task.departures: a mode of ours, a limit, shorter answers), each departure once per task."""
    by_task: dict[str, set[str]] = {}
    departs: dict[str, dict[str, None]] = {}
    for r in summary.runs:
        by_task.setdefault(r.task, set()).add(r.protocol)
        departs.setdefault(r.task, {}).update(dict.fromkeys(r.departures))
    named = "; ".join(
        f"{task} {' and '.join(sorted(p))}" + (f" (departing: {'; '.join(departs[task])})" if departs[task] else "")
        for task, p in sorted(by_task.items())
    )
    return (
        f"Protocol: {named}. paper: the papers' protocols as their authors' code and text give them; offline-eval: "
        "ours; docs/tasks/<task>.md lists the differences."
    )


def _difference(c: Verdict) -> str:
    if c.estimate is None:
        return f"{c.metric}: no estimate ({c.reason or f'{c.n} shared items'})"
    ci = "" if c.ci_low is None or c.ci_high is None else f" [{c.ci_low:+.3f}, {c.ci_high:+.3f}]"
    return f"{c.metric} {c.estimate:+.3f}{ci}"


def adapter_lines(summary: Summary) -> list[str]:
    """What each adapter gains over its base, and whether an adapter over an Int8/Int4 file keeps up with the same
    adapter on the model's own weights (non-inferiority)."""
    lines = []
    for m in summary.noninferiority:
        gains = [c for c in m.comparisons if c.against]
        for run in dict.fromkeys(c.run for c in gains):
            mine = [c for c in gains if c.run == run]
            each = "; ".join(f"{_difference(c)} on {c.setting}" for c in mine)
            lines.append(f"Adapter: {run} against its base {mine[0].against}: {each}.")
        for run in dict.fromkeys(c.run for c in m.adapter_transfer):
            mine = [c for c in m.adapter_transfer if c.run == run]
            each = "; ".join(f"{_difference(c)} {c.verdict} on {c.setting}" for c in mine)
            lines.append(f"Adapter on another base: {run} against the same adapter on {mine[0].against}: {each}.")
    return lines


def _base(variant: str) -> str:
    return re.sub(r"\.think\d+$", "", variant)


def thinking_lines(summary: Summary) -> list[str]:
    """Per model that thought at several budgets: the fewest thinking tokens at which each variant matches the
    reference (non-inferior on every setting), as a multiple of what the reference's own variant needs."""
    tokens: dict[str, list[float]] = {}
    variant_of: dict[str, str] = {}
    for r in summary.runs:
        if t := r.throughput.reasoning:
            tokens.setdefault(r.run, []).append(float(t.thinking_tokens_per_item))
            variant_of[r.run] = r.variant
    lines = []
    for m in summary.noninferiority:
        ref = m.reference
        if ref not in tokens:
            continue
        verdicts: dict[str, list[str]] = {}
        for v in m.comparisons:
            verdicts.setdefault(v.run, []).append(v.verdict)
        matching = {run for run, vs in verdicts.items() if vs and all(v == "non-inferior" for v in vs)} | {ref}
        cost = {run: sum(ts) / len(ts) for run, ts in tokens.items() if run in matching or run in verdicts}
        need: dict[str, float] = {}
        tried: dict[str, float] = {}
        for run, c in cost.items():
            base = _base(variant_of[run])
            tried[base] = max(tried.get(base, 0.0), c)
            if run in matching:
                need[base] = min(need.get(base, c), c)
        own = _base(variant_of[ref])
        if len(tried) < 2 or own not in need:
            continue
        for base in sorted(tried):
            if base == own:
                continue
            if base not in need:
                lines.append(
                    f"Thinking: {m.model} {base} matches {ref} at no budget tried (up to {tried[base]:.0f} "
                    f"thinking tokens per item)."
                )
            elif need[own] > 0:
                lines.append(
                    f"Thinking: {m.model} {base} needs {need[base] / need[own]:.1f}x the thinking tokens of "
                    f"{own} to match {ref} ({need[base]:.0f} against {need[own]:.0f} per item)."
                )
    return lines
