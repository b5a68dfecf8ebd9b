"""The report's opening lines: what a first-time reader should take from this sweep, measured from it."""

from __future__ import annotations

import re

from offline_eval.metrics.ranking import has_score
from offline_eval.results.summary import Summary, Verdict
from offline_eval.runtime.i18n import _
from offline_eval.tasks.kit.sections import fmt, ranked, stored

from .calibration import calibration_lines


def _fmt(v: float) -> str:
    return fmt(v, 3 if abs(v) < 10 else 1)  # F1 0.512, AdjScore 57.8


def glance(summary: Summary) -> list[str]:
    runs = summary.runs
    lines: list[str] = []
    if runs:
        models = {r.model for r in runs}
        engines = sorted({r.backend for r in runs})
        lines.append(
            _(
                "{runs} runs of {models} models on {engines}, {settings} task settings.",
                runs=len({r.run for r in runs}),
                models=len(models),
                engines=", ".join(engines),
                settings=len({r.setting for r in runs}),
            )
        )
    for setting in sorted({r.setting for r in runs}):
        group = [r for r in runs if r.setting == setting]
        metric = group[0].primary_metric or "mean"
        by_run = {r.run: r for r in group}
        order = [by_run[run] for _, run in ranked(summary, setting) if run in by_run]  # the sweep's ranking
        scored = [(r, v) for r in order if (v := r.metrics.get(metric)) is not None and has_score(v)]
        if not scored:
            continue  # a caution (caveats.py)
        (best, high), (worst, low) = scored[0], scored[-1]
        if len(scored) > 1 and high == low:
            text = _(
                "{setting}: all {n} runs score {metric} {value}",
                setting=setting,
                n=len(scored),
                metric=metric,
                value=_fmt(high),
            )
        elif len(scored) > 1:
            text = _(
                "{setting}: best {best} ({metric} {high}), worst {worst} ({low})",
                setting=setting,
                best=best.run,
                metric=metric,
                high=_fmt(high),
                worst=worst.run,
                low=_fmt(low),
            )
        else:
            text = _("{setting}: best {best} ({metric} {high})", setting=setting, best=best.run, metric=metric,
                     high=_fmt(high))  # fmt: skip
        lines.append(_("{line}.", line=text))
    lines += calibration_lines(summary)
    comps = [c for m in summary.noninferiority for c in m.comparisons]
    if comps:
        words = [c.verdict for c in comps]
        counts = ", ".join(
            _("{n} {verdict}", n=words.count(w), verdict=_(w))
            for w in ("non-inferior", "inferior", "inconclusive")
            if words.count(w)
        )
        if any(c.against for c in comps):
            text = _(
                "Against each model's reference run (an adapter's run: against its base): {counts} ({n} run x "
                "setting comparisons; verdict tables below).",
                counts=counts,
                n=len(comps),
            )
        else:
            text = _(
                "Against each model's reference run: {counts} ({n} run x setting comparisons; verdict tables below).",
                counts=counts,
                n=len(comps),
            )
        lines.append(text)
    lines += adapter_lines(summary)
    lines += thinking_lines(summary)
    same = summary.consistency
    if same:
        shares = [c.identical for c in same if c.identical is not None]
        if shares:
            lo, hi = f"{100 * min(shares):.0f}", f"{100 * max(shares):.0f}"
            span = hi if lo == hi else f"{lo}-{hi}"
            lines.append(
                _(
                    "Same weights on different engines: {span}% identical answers over {n} comparisons (table below).",
                    span=span,
                    n=len(shares),
                )
            )
    return lines


def _difference(c: Verdict) -> str:
    if c.estimate is None:
        why = stored(c.reason) if c.reason else _("{n} shared items", n=c.n)
        return _("{metric}: no estimate ({why})", metric=c.metric, why=why)
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
            each = "; ".join(_("{difference} on {setting}", difference=_difference(c), setting=c.setting) for c in mine)
            lines.append(_("Adapter: {run} against its base {base}: {each}.", run=run, base=mine[0].against, each=each))
        for run in dict.fromkeys(c.run for c in m.adapter_transfer):
            mine = [c for c in m.adapter_transfer if c.run == run]
            each = "; ".join(
                _("{difference} {verdict} on {setting}", difference=_difference(c), verdict=_(c.verdict),
                  setting=c.setting)
                for c in mine
            )  # fmt: skip
            lines.append(
                _(
                    "Adapter on another base: {run} against the same adapter on {base}: {each}.",
                    run=run,
                    base=mine[0].against,
                    each=each,
                )
            )
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
                    _(
                        "Thinking: {model} {variant} matches {reference} at no budget tried (up to {tried:.0f} "
                        "thinking tokens per item).",
                        model=m.model,
                        variant=base,
                        reference=ref,
                        tried=tried[base],
                    )
                )
            elif need[own] > 0:
                lines.append(
                    _(
                        "Thinking: {model} {variant} needs {ratio:.1f}x the thinking tokens of {own} to match "
                        "{reference} ({need:.0f} against {own_need:.0f} per item).",
                        model=m.model,
                        variant=base,
                        ratio=need[base] / need[own],
                        own=own,
                        reference=ref,
                        need=need[base],
                        own_need=need[own],
                    )
                )
    return lines
