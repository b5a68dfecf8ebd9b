"""Plots a reader can read (issue 64, item 7): on the demo's runs, with their crowded points and long run names, no
two texts of any plot overlap (measured as matplotlib draws them), no text is under 8 points, and a bar without an
interval says why on the plot."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from conftest import ROOT

from offline_eval.report import plots
from offline_eval.results.summary import Summary
from offline_eval.tasks import read_summary
from offline_eval.tasks.kit import figures

FIXTURE = ROOT / "tests" / "fixtures" / "v3-demo" / "summary.json"


def drawn(summary: Summary, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    figs: dict[str, Any] = {}
    real = figures.save

    def keep(plt: Any, fig: Any, name: str, title: str, caption: str = "") -> figures.Plot:
        figs[name] = fig
        return real(plt, fig, name, title, caption)

    for module in (plots, figures):
        monkeypatch.setattr(module, "save", keep, raising=False)
    monkeypatch.setattr("offline_eval.tasks.jbeqa.report.save", keep)
    with figures.drawing():
        plots.all_plots(summary)
        plots.pareto(summary.runs)  # the first screen's
    return figs


def texts(fig: Any) -> list[tuple[str, Any, float]]:
    """Every text the saved figure draws, with its extent and size: as savefig drew it (the layout save() made, at its
    dpi), less the tick labels matplotlib keeps but does not draw (their ticks lie outside the axes' view), which
    overlap other texts or not depending on where the data puts the ticks."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    canvas = FigureCanvasAgg(fig)
    fig.set_dpi(90)
    canvas.draw()
    renderer = canvas.get_renderer()
    undrawn = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(axis.get_view_interval())
            slack = 1e-9 * (high - low)
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not low - slack <= tick.get_loc() <= high + slack:
                    undrawn.add(id(tick.label1))
    return [
        (t.get_text(), t.get_window_extent(renderer), t.get_fontsize())
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and t.figure is fig and id(t) not in undrawn
    ]


def unreadable(fig: Any) -> tuple[list[tuple[str, float]], list[tuple[str, str]]]:
    """(texts under 8 points, pairs of texts that overlap) in a saved figure."""
    found = texts(fig)
    small = [(s, size) for s, _, size in found if size < figures.LABEL_PT]
    overlaps = [
        (a, b)
        for (a, ea, _), (b, eb, _) in itertools.combinations(found, 2)
        if ea.overlaps(eb) and ea.width * ea.height and eb.width * eb.height
    ]
    return small, overlaps


def test_no_two_labels_of_any_plot_overlap_and_none_is_under_8_points(monkeypatch):
    figs = drawn(read_summary(FIXTURE), monkeypatch)
    assert {"pareto"} <= set(figs) and any(n.startswith("frontier_") for n in figs)
    assert any(n.startswith("quant_") for n in figs) and any(n.startswith("subjects_") for n in figs)
    for name, fig in figs.items():
        small, overlaps = unreadable(fig)
        assert not small, f"{name}: {small}"
        assert not overlaps, f"{name}: {overlaps[:3]}"


def test_every_run_of_a_frontier_has_its_number_in_the_key(monkeypatch):
    summary = read_summary(FIXTURE)
    figs = drawn(summary, monkeypatch)
    setting = "jbeqa.0shot.constrained"
    fig = figs[f"frontier_{setting}"]
    key = max((s for s, _, _ in texts(fig)), key=len)
    runs = sorted({r.run for r in summary.runs if r.setting == setting and plots.primary_score(r) is not None})
    assert key.splitlines() == [f"{n}  {run}" for n, run in enumerate(runs, 1)]


def test_a_bar_without_an_interval_says_why_on_the_plot(monkeypatch):
    summary = read_summary(FIXTURE)
    figs = drawn(summary, monkeypatch)
    checked = 0
    for name, fig in figs.items():
        if not name.startswith("quant_"):
            continue
        said = [s for s, _, _ in texts(fig)]
        key = max(said, key=len)
        shown = [
            r
            for r in summary.runs
            if f"quant_{r.setting}" == name and f" {r.model} {r.variant} ctx{r.max_model_len}\n" in f" {key}\n"
        ]
        assert len(shown) == len(key.splitlines()), name
        for r in shown:
            mv = r.metrics.metric(r.primary_metric or "mean")
            if plots.primary_score(r) is None:
                assert "no score" in said, name
            elif mv is not None and mv.ci_low is None and mv.note:
                assert mv.note in said, (name, mv.note)
                checked += 1
    assert checked  # the demo has runs whose interval was withheld (n too small)
