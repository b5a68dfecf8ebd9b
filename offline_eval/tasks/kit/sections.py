"""What a task's part of the report is made of: the metrics it declares, tables, and the helpers that fill them
(one number format, CIs that say why they are missing, the sweep's rankings, breakdowns). The report renders
them; tasks build them, so nothing here imports a task or the report."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from offline_eval.metrics import calibration, noninferiority, stats  # noqa: F401 (their kept() reasons)
from offline_eval.metrics.bootstrap import MIN_CLUSTERS, Bootstrapped
from offline_eval.metrics.ranking import has_score
from offline_eval.metrics.values import MetricValue, Number, RunMetrics
from offline_eval.results import stored as _stored  # noqa: F401 (the sweep's kept() texts)
from offline_eval.runtime.i18n import N_, _, kept, said

if TYPE_CHECKING:  # the report hands its typed summary down; nothing here builds one
    from offline_eval.results.records import RunEntry
    from offline_eval.results.summary import Summary


@dataclass(frozen=True)
class Metric:
    """One number a task reports per run: the report's leaderboard columns come from these."""

    name: str
    label: str
    higher_is_better: bool = True
    # How its clustered interval is drawn from the scored items (None: it has none): every task's runs get it
    # from metrics.declared.with_intervals, and the leaderboard prints it.
    ci: Bootstrapped | None = None
    digits: int = 3
    margin: float | None = None  # default non-inferiority margin, in the metric's units (models.yaml `margin`)
    bounds: tuple[float, float] | None = None  # the metric's range: a margin must lie inside (0, its width)
    # What an item's score is where this metric is the paired one (verdicts, ablations, compare): right or wrong
    # (McNemar, Tango's interval, flips) or graded (Wilcoxon, the bootstrap), whatever values a run happens to give.
    paired: Literal["binary", "graded"] = "graded"

    def of(self, m: RunMetrics, default: Number = None) -> Number:
        """This metric's value in a run's metrics."""
        return m.get(self.name, default)


@dataclass
class Table:
    title: str
    header: list[str]
    rows: list[list[str]]
    note: str = ""
    classes: list[list[str]] | None = None  # per cell: a CSS class of report.html (e.g. a verdict's colour)
    styles: list[list[str]] | None = None  # per cell: inline CSS (e.g. a heat colour)


@dataclass(frozen=True)
class BrowserView:
    """The report's item browser on one record: `group` (a filter, e.g. the subject), `correct` (True, False, or
    None where answers are graded, not right or wrong), `extra` ({label: text} shown with the answer) and
    `focused` (the run got the item's shorter fallback prompt, overflow policy 'focus')."""

    group: str | None = None
    correct: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    focused: bool = False


def fmt(v: Any, digits: int = 3, sign: bool = False) -> str:
    """A number as every table prints it: floats to `digits` places (with a sign where asked), "–" for none or an
    undefined one (NaN, an infinity: summary.json holds them as null)."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}"
    return str(v)


# Why a CI is withheld, as metrics.bootstrap stores it (MetricValue.note): translated where shown.
# The reasons an interval is withheld (MetricValue.note), as summary.json stores them.
N_TOO_SMALL, NO_SPREAD = kept("n too small"), kept("no spread")
NOT_RANDOM = kept(
    "the labels were not drawn at random: export them from `offline-eval annotate`'s seeded draw, or give "
    "human_sample: random in the task's options if they were (docs/calibration.md)"
)


def stored(text: str | None) -> str:
    """A text summary.json holds in English (a reason, a departure), in the current language: read back into the
    kept() message it was written from; itself where no message of ours wrote it (data, an engine's error).
    Importing the metrics that write reasons registers their messages."""
    return said(text)


def sentences(*parts: str) -> str:
    """Whole sentences of one note, spaced as the language spaces them (English: one space; Japanese: none after
    。); an empty part is left out."""
    out = ""
    for p in parts:
        if p:
            out = _("{sentence} {next}", sentence=out, next=p) if out else p
    return out


def ci_text(mv: MetricValue | None, digits: int = 3) -> str:
    """A metric with its 95% CI, "v [lo, hi]"; where the CI was withheld, why: "n too small" (fewer clusters than
    a bootstrap needs) or "no spread" (every resample gave the same value), never a point interval [v, v]."""
    if mv is None:
        return fmt(None, digits)
    if not mv.has_interval or not has_score(mv.value):
        return fmt(mv.value, digits)
    if mv.ci_low is None or mv.ci_high is None:
        n = mv.n_clusters
        why = _(mv.note or (NO_SPREAD if isinstance(n, int) and n >= MIN_CLUSTERS else N_TOO_SMALL))
        value = fmt(mv.value, digits)
        if isinstance(n, int):
            return _("{value} ({why}: {n} clusters)", value=value, why=why, n=n)
        return _("{value} ({why})", value=value, why=why)
    return f"{fmt(mv.value, digits)} [{fmt(mv.ci_low, digits)}, {fmt(mv.ci_high, digits)}]"


VIOLATIONS = "constraint_violations"  # answers that broke their constraint (scored as parse failures)


def ranked(summary: Summary, setting: str) -> list[tuple[int | None, str]]:
    """(rank, run) in the order of the summary's leaderboard for one setting, where the sweep ranked the runs
    once (best first, which way is better being the task's): runs with the same value share a rank; a run with
    no score has none."""
    out: list[tuple[int | None, str]] = []
    rows = summary.leaderboards.get(setting) or []
    for i, row in enumerate(rows):
        if not has_score(row.value):
            out.append((None, row.run))
        elif i and rows[i - 1].value == row.value and out[-1][0] is not None:
            out.append((out[-1][0], row.run))
        else:
            out.append((i + 1, row.run))
    return out


def leaderboard(name: str, metrics: tuple[Metric, ...], note: str, runs: list[RunEntry], summary: Summary) -> Table:
    """A task's runs per setting, in the summary's ranking by the primary metric (the first declared), one column
    per declared metric (CIs where declared)."""
    if any(VIOLATIONS in r.metrics for r in runs):  # every task's runs carry it: next to its parse failures
        at = next((i + 1 for i, x in enumerate(metrics) if "failures" in x.name), len(metrics))
        metrics = (*metrics[:at], Metric(VIOLATIONS, N_("constraint violations"), False), *metrics[at:])
    primary = metrics[0]
    by_key = {(r.run, r.setting): r for r in runs}
    rows = []
    for setting in sorted({r.setting for r in runs}):
        for rank, run in ranked(summary, setting):
            r = by_key.get((run, setting))
            if r is None:
                continue
            m = r.metrics
            scored = has_score(m.get(primary.name))
            cells = [
                (ci_text(m.metric(x.name), x.digits) if x.ci else fmt(m.get(x.name), x.digits))
                if scored or not x.ci
                else _("no items")
                for x in metrics
            ]
            rows.append([str(rank) if rank is not None else "–", r.run, r.setting, *cells])
    header = [
        "#",
        _("run"),
        _("setting"),
        *[_("{metric} [95% CI]", metric=_(x.label)) if x.ci else _(x.label) for x in metrics],
    ]
    return Table(
        _("{task}: every metric per run", task=name),
        header,
        rows,
        sentences(_("Ranked within each setting by {metric}.", metric=_(primary.label)), _(note) if note else ""),
    )


def breakdown(runs: list[RunEntry], axis: str, metric: str, title: str, clusters: str) -> Table | None:
    """One column per group of one breakdown of the runs' metrics (per subject, per year...); `clusters`: what
    the task's clusters are, for the note."""
    typed = [(r, r.metrics.groups(axis, metric)) for r in runs]
    keys = sorted({g for _, got in typed for g in got})
    if not keys:
        return None
    rows = [[r.run, r.setting, *[ci_text(got.get(k)) for k in keys]] for r, got in typed]
    note = _(
        "[95% CI]: a bootstrap that resamples clusters within the group ({clusters}); "
        "'n too small' where the group has fewer than {min_clusters} clusters.",
        clusters=clusters,
        min_clusters=MIN_CLUSTERS,
    )
    return Table(title, [_("run"), _("setting"), *keys], rows, note)
