"""Plots as values (a PNG and its caption) and the matplotlib helpers a task's own plots use; the report embeds
them. Matplotlib is imported only when a plot is drawn, and draws offscreen (Agg)."""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from typing import Any


@dataclass
class Plot:
    name: str  # file name without extension
    title: str
    png: bytes
    caption: str = ""  # what to read from it


def fig_module():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    japanese_font()
    return plt


def japanese_font() -> bool:
    """Whether plots can draw Japanese: matplotlib-fontja (the `report` extra) sets a bundled font."""
    try:
        import matplotlib_fontja  # noqa: F401
    except ImportError:
        return False
    return True


def save(plt, fig, name: str, title: str, caption: str = "") -> Plot:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig.tight_layout()
        fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return Plot(name, title, buf.getvalue(), caption)


def pareto_front(pts: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point beats on both: smaller x and larger y."""
    front, best = [], float("-inf")
    for x, y in sorted(pts, key=lambda p: (p[0], -p[1])):
        if y > best:
            front.append((x, y))
            best = y
    return front


def primary_score(r: dict[str, Any]) -> float | None:
    v = r["metrics"].get(r.get("primary_metric") or "mean")
    return float(v) if isinstance(v, (int, float)) else None


def safe_name(s: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in s)
