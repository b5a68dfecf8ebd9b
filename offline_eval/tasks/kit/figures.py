"""Plots as values (a PNG and its caption) and the matplotlib helpers a task's own plots use; the report embeds
them. Matplotlib is imported only when a plot is drawn. Figures are drawn without pyplot (no backend switched, no
figure kept in pyplot's registry) and inside `drawing()`, so the caller's matplotlib settings stay as they were."""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from offline_eval.runtime.i18n import N_, _

if TYPE_CHECKING:
    from offline_eval.metrics.values import MetricValue
    from offline_eval.results.records import RunEntry


@dataclass
class Plot:
    name: str  # file name without extension
    title: str
    png: bytes
    caption: str = ""  # what to read from it


class _Figures:
    """pyplot's subplots and close, on matplotlib.figure.Figure alone."""

    def subplots(self, nrows: int = 1, ncols: int = 1, *, figsize: Any = None, **kw: Any) -> Any:
        from matplotlib.figure import Figure

        fig = Figure(figsize=figsize)
        return fig, fig.subplots(nrows, ncols, **kw)

    def close(self, fig: Any) -> None:
        pass  # nothing holds the figure but its caller


def fig_module() -> _Figures:
    return _Figures()


_FONT = "IPAexGothic"  # what matplotlib-fontja registers


def japanese_font() -> bool:
    """Whether plots can draw Japanese: matplotlib-fontja (the `report` extra) registers a bundled font. Its
    import also sets the process's font family: that is undone (drawing() sets it for our plots alone)."""
    import matplotlib

    try:
        with matplotlib.rc_context():
            import matplotlib_fontja  # noqa: F401
    except ImportError:
        return False
    return True


@contextmanager
def drawing() -> Iterator[None]:
    """Our plots' matplotlib settings (the Japanese font), restored on exit whatever the plots did."""
    import matplotlib

    with matplotlib.rc_context():
        if japanese_font():
            matplotlib.rcParams["font.family"] = _FONT
        yield


def save(plt: _Figures, fig: Any, name: str, title: str, caption: str = "") -> Plot:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig.tight_layout()
        fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return Plot(name, title, buf.getvalue(), caption)


LABEL_PT = 8  # the smallest type a plot draws


def interval_or_why(ax: Any, x: float, mv: MetricValue | None) -> None:
    """On a bar at x: its 95% CI, or, where it has none, why, written up the bar ("n too small", "no spread",
    "no score"), as the tables say it."""
    y = float(mv.value) if mv is not None and mv.value is not None else None
    if mv is not None and y is not None and mv.ci_low is not None and mv.ci_high is not None:
        ax.errorbar(x, y, yerr=[[y - mv.ci_low], [mv.ci_high - y]], color="black", capsize=3)
        return
    # the interval's stored note ("n too small", "no spread") is marked where the tables write it
    why = _("no score") if y is None else _((mv.note if mv is not None else None) or N_("no CI"))
    ax.text(x, 0.02, why, rotation=90, ha="center", va="bottom", fontsize=LABEL_PT, transform=ax.get_xaxis_transform())


def numbered(labels: Iterable[str]) -> dict[str, int]:
    """Each name its number, 1.. in sorted order: the markers a plot draws and the key beside it."""
    return {name: n for n, name in enumerate(sorted(set(labels)), 1)}


def mark_points(ax: Any, pts: Sequence[tuple[float, float, str]], numbers: dict[str, int], color: str) -> None:
    """Each point a marker holding its number (the key names it), never a name drawn at the point: names of close
    points would sit on one another. Points at one place share a marker, their numbers joined."""
    at: dict[tuple[float, float], list[int]] = {}
    for x, y, name in pts:
        at.setdefault((x, y), []).append(numbers[name])
    for (x, y), ns in at.items():
        text = ",".join(str(n) for n in sorted(ns))
        ax.scatter([x], [y], s=120 + 60 * len(text), color=color, zorder=3)
        ax.scatter([x], [y], marker=f"${text}$", s=40 * len(text), color="white", zorder=4)


def draw_key(ax: Any, numbers: dict[str, int]) -> None:
    """The numbers' names, one per line, beside the axes (right of them, top-aligned)."""
    lines = [f"{n}  {name}" for name, n in sorted(numbers.items(), key=lambda kv: kv[1])]
    ax.text(1.03, 1.0, "\n".join(lines), transform=ax.transAxes, va="top", ha="left", fontsize=LABEL_PT)


def pareto_front(pts: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point beats on both: smaller x and larger y."""
    front, best = [], float("-inf")
    for x, y in sorted(pts, key=lambda p: (p[0], -p[1])):
        if y > best:
            front.append((x, y))
            best = y
    return front


def primary_score(r: RunEntry) -> float | None:
    v = r.metrics.get(r.primary_metric or "mean")
    return float(v) if isinstance(v, (int, float)) else None


def safe_name(s: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in s)
