"""Report plots (matplotlib, Agg): trade-off frontier, quantization bars, score vs context, per subject. Their
words (titles, captions, axis titles, legends, the notes on bars) are the current language's (runtime.i18n); run
names, settings, tasks and metric codes are drawn as they are."""

from __future__ import annotations

import itertools
import re

from offline_eval.results.records import RunEntry
from offline_eval.results.summary import Summary
from offline_eval.runtime.i18n import _
from offline_eval.tasks.kit.figures import (
    LABEL_PT,
    Plot,
    draw_key,
    fig_module,
    interval_or_why,
    mark_points,
    numbered,
    pareto_front,
    primary_score,
    safe_name,
    save,
)

from .tables import task_class


def pareto(runs: list[RunEntry]) -> Plot | None:
    """The first screen's plot: per task (its own axes), each run's mean primary metric over the task's settings
    against its peak memory."""

    tasks = []
    for task in sorted({r.task for r in runs}):
        group = [r for r in runs if r.task == task]
        settings = {r.setting for r in group}
        pts = []
        for run in sorted({r.run for r in group}):
            mine = [r for r in group if r.run == run]
            scores = [s for r in mine if (s := primary_score(r)) is not None]
            if len(scores) == len(settings):  # a run missing a setting would not compare fairly
                peak = max(float(r.throughput.peak_rss_mb or 0.0) for r in mine)
                pts.append((peak, sum(scores) / len(scores), run))
        if len(pts) >= 2:
            tasks.append((task, pts))
    if not tasks:
        return None
    plt = fig_module()
    numbers = numbered(p[2] for _, pts in tasks for p in pts)  # a run has one number in every panel
    fig, axes = plt.subplots(len(tasks), 1, figsize=(8.5, 3.4 * len(tasks)), squeeze=False)
    for ax, (task, pts) in zip(axes[:, 0], tasks):
        mark_points(ax, pts, numbers, "#4477aa")
        front = pareto_front([(p[0], p[1]) for p in pts])
        ax.plot([p[0] for p in front], [p[1] for p in front], "--", color="#cc3311", label=_("Pareto front"))
        metric = task_class(task).primary_metric
        ax.set_xlabel(_("peak memory (MB)"), fontsize=LABEL_PT + 1)
        ax.set_ylabel(_("{metric}, mean over settings", metric=metric), fontsize=LABEL_PT + 1)
        ax.set_title(task, fontsize=LABEL_PT + 2)
        ax.tick_params(labelsize=LABEL_PT)
        ax.legend(fontsize=LABEL_PT)
    draw_key(axes[0, 0], numbers)
    return save(
        plt,
        fig,
        "pareto",
        _("Score against memory"),
        _(
            "One panel per task, each on its own scale. A point is a run: its primary metric averaged over the "
            "task's settings against its peak memory. Up and left is better; the dashed line joins the runs no "
            "other run beats on both."
        ),
    )


def frontier(runs: list[RunEntry]) -> list[Plot]:
    """Score against weights size per task setting; the Pareto front (smaller and better) is joined."""
    plt = fig_module()
    out = []
    for setting, group in itertools.groupby(sorted(runs, key=lambda r: r.setting), key=lambda r: r.setting):
        pts = [(float(r.weights_mb or 0.0), float(s), r.run) for r in group if (s := primary_score(r)) is not None]
        if len(pts) < 2:
            continue
        fig, ax = plt.subplots(figsize=(8.5, 3.6))
        numbers = numbered(p[2] for p in pts)
        mark_points(ax, pts, numbers, "#4477aa")
        draw_key(ax, numbers)
        front = pareto_front([(x, y) for x, y, _ in pts])
        ax.plot(
            [p[0] for p in front],
            [p[1] for p in front],
            "s--",
            color="#cc3311",
            mfc="none",
            ms=10,
            label=_("Pareto front"),
        )
        ax.set_xlabel(_("weights on disk (MB)"), fontsize=LABEL_PT + 1)
        ax.set_ylabel(runs[0].primary_metric or _("score"), fontsize=LABEL_PT + 1)
        ax.set_title(_("Trade-off: {setting}", setting=setting), fontsize=LABEL_PT + 2)
        ax.tick_params(labelsize=LABEL_PT)
        ax.legend(fontsize=LABEL_PT)
        out.append(
            save(
                plt,
                fig,
                f"frontier_{safe_name(setting)}",
                _("Trade-off frontier, {setting}", setting=setting),
                _(
                    "Score against weights on disk for one setting: up and left is better; the joined "
                    "squares are the runs no smaller run beats."
                ),
            )
        )
    return out


def quantization_bars(runs: list[RunEntry]) -> list[Plot]:
    plt = fig_module()
    out = []
    key = lambda r: (r.setting, r.model, r.backend, r.max_model_len)  # noqa: E731
    for setting, by_setting in itertools.groupby(sorted(runs, key=key), key=lambda r: r.setting):
        groups = [list(g) for _, g in itertools.groupby(by_setting, key=key)]
        groups = [g for g in groups if len(g) > 1]
        if not groups:
            continue
        fig, ax = plt.subplots(figsize=(8.5, 3.6))
        x = 0.0
        ticks: list[float] = []
        names: dict[str, int] = {}
        metric = groups[0][0].primary_metric or "mean"
        for g in groups:
            for r in g:
                mv = r.metrics.metric(metric)
                ax.bar(x, primary_score(r) or 0.0, color="#66ccee", edgecolor="#224455")
                interval_or_why(ax, x, mv if primary_score(r) is not None else None)
                ticks.append(x)
                names[f"{r.model} {r.variant} ctx{r.max_model_len}"] = len(names) + 1
                x += 1
            x += 0.6
        ax.set_xticks(ticks, [str(n) for n in names.values()], fontsize=LABEL_PT)
        ax.tick_params(labelsize=LABEL_PT)
        draw_key(ax, names)
        ax.set_ylabel(_("{metric} (95% CI)", metric=metric), fontsize=LABEL_PT + 1)
        ax.set_title(_("Quantization: {setting}", setting=setting), fontsize=LABEL_PT + 2)
        out.append(
            save(
                plt,
                fig,
                f"quant_{safe_name(setting)}",
                _("Quantization variants, {setting}", setting=setting),
                _(
                    "Each model's variants side by side at one context length (the key names each number), with "
                    "95% CIs where the task has them, and on the bar why not where it has none (n too small: fewer "
                    "clusters than a bootstrap needs): overlapping bars are not evidence of a difference (see the "
                    "verdicts)."
                ),
            )
        )
    return out


def context_lines(runs: list[RunEntry]) -> list[Plot]:
    """Score against context length: one plot per metric, so no axis mixes scales."""
    plt = fig_module()
    key = lambda r: (r.model, r.backend, r.variant, r.setting)  # noqa: E731
    by_metric: dict[str, list[tuple[tuple[str, str, str, str], list[RunEntry]]]] = {}
    for k, grouped in itertools.groupby(sorted(runs, key=key), key=key):
        g = sorted(grouped, key=lambda r: r.max_model_len)
        if len(g) > 1:
            by_metric.setdefault(g[0].primary_metric or "score", []).append((k, g))
    out = []
    for metric, lines in sorted(by_metric.items()):
        fig, ax = plt.subplots(figsize=(8.5, 3.6))
        for (model, _backend, variant, setting), g in lines:
            ax.plot(
                [r.max_model_len for r in g],
                [primary_score(r) or 0.0 for r in g],
                marker="o",
                label=f"{model} {variant} {setting}",
            )
        ax.set_xscale("log", base=2)
        ax.set_xlabel(_("context length (tokens)"))
        ax.set_ylabel(metric)
        ax.legend(fontsize=LABEL_PT, loc="upper left", bbox_to_anchor=(1.02, 1.0))
        ax.tick_params(labelsize=LABEL_PT)
        ax.set_title(_("{metric} vs context length", metric=metric), fontsize=LABEL_PT + 2)
        out.append(
            save(
                plt,
                fig,
                f"context_{safe_name(metric)}",
                _("{metric} vs context length", metric=metric),
                _(
                    "One line per model variant and setting: a rising line means the longer context helps "
                    "{metric}; a flat one that it does not (items that did not fit count as skipped).",
                    metric=metric,
                ),
            )
        )
    return out


def thinking_curves(runs: list[RunEntry]) -> list[Plot]:
    """Per task: each reasoning run's primary metric (mean over the task's settings) against its thinking tokens
    per item, a line per model variant through its budgets, and the Pareto front (fewer tokens, higher score)."""

    plt = fig_module()
    out = []
    for task in sorted({r.task for r in runs}):
        group = [r for r in runs if r.task == task and r.throughput.reasoning]
        settings = {r.setting for r in runs if r.task == task}
        lines: dict[str, list[tuple[float, float]]] = {}
        for run in sorted({r.run for r in group}):
            mine = [r for r in group if r.run == run]
            scores = [s for r in mine if (s := primary_score(r)) is not None]
            if len(scores) != len(settings):
                continue
            thought = [t.thinking_tokens_per_item for r in mine if (t := r.throughput.reasoning)]
            tokens = sum(thought) / len(mine)
            label = f"{mine[0].model} {re.sub(r'[.]think[0-9]+$', '', mine[0].variant)}"
            lines.setdefault(label, []).append((tokens, sum(scores) / len(scores)))
        pts = [p for ps in lines.values() for p in ps]
        if len(pts) < 2:
            continue
        fig, ax = plt.subplots(figsize=(8.5, 3.6))
        for label, ps in sorted(lines.items()):
            ps.sort()
            ax.plot([p[0] for p in ps], [p[1] for p in ps], marker="o", label=label)
        front = pareto_front(pts)
        ax.plot([p[0] for p in front], [p[1] for p in front], "--", color="#cc3311", label=_("Pareto front"))
        ax.set_xlabel(_("thinking tokens per item (mean)"))
        ax.set_ylabel(_("{metric}, mean over settings", metric=task_class(task).primary_metric))
        ax.set_title(_("{task}: score against thinking", task=task), fontsize=LABEL_PT + 2)
        ax.legend(fontsize=LABEL_PT, loc="upper left", bbox_to_anchor=(1.02, 1.0))
        ax.tick_params(labelsize=LABEL_PT)
        out.append(
            save(
                plt,
                fig,
                f"thinking_{safe_name(task)}",
                _("{task}: score against thinking tokens", task=task),
                _(
                    "A line per model variant through its thinking budgets: how much the score rises with "
                    "thinking. The dashed line joins the runs no other run beats with fewer thinking tokens and a "
                    "higher score."
                ),
            )
        )
    return out


def all_plots(summary: Summary) -> list[Plot]:
    """The plots every sweep gets, then each task's own."""

    runs = summary.runs
    out = frontier(runs) + quantization_bars(runs) + context_lines(runs) + thinking_curves(runs)
    for name in sorted({r.task for r in runs}):
        out += task_class(name).report_parts.plots([r for r in runs if r.task == name])
    return out
