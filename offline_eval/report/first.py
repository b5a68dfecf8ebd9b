"""The report's first screen: a verdict table per model (each run against its reference, with its cost) and a
leaderboard matrix per task (runs x settings, the primary metric with its CI, heat-coloured per column)."""

from __future__ import annotations

from offline_eval.metrics.bootstrap import MIN_CLUSTERS
from offline_eval.metrics.ranking import has_score
from offline_eval.metrics.values import RunMetrics
from offline_eval.results.calibration import CalibrationRow
from offline_eval.results.records import RunEntry
from offline_eval.results.summary import ModelVerdicts, Summary, Verdict
from offline_eval.runtime.i18n import N_, _
from offline_eval.tasks.kit.calibration import calibrated_text
from offline_eval.tasks.kit.sections import Metric, Table, ci_text, fmt, ranked, stored

from .tables import task_class

VERDICT_CLASS = {"non-inferior": "v-ni", "inferior": "v-inf", "inconclusive": "v-inc"}
# The verdict words as summary.json stores them, translated where they are shown: _(c.verdict).
VERDICT_WORDS = (N_("non-inferior"), N_("inferior"), N_("inconclusive"))


def _calibration_note(judged: list[CalibrationRow], metric: str) -> str:
    """What the cells of a judged task show: the colour and the order are the judges'."""
    if not judged:
        return ""
    if not any(c.number == metric for c in judged):
        names = ", ".join(sorted({c.number for c in judged}))
        return _(
            "Judged: {metric} has no calibrated form (the human labels calibrate {names}: see 'Calibration by human "
            "labels').",
            metric=metric,
            names=names,
        )
    return _(
        "Judged: a cell calibrated by human labels shows the PPI++ estimate of the human mean [95% CI] on its n "
        "labels, with the judges' value beside it; an uncalibrated cell is the judges' alone. The colour and the "
        "order are the judges'."
    )


def verdict_cell(c: Verdict, digits: int) -> str:
    """The difference [CI] and the verdict; without a CI that can be trusted, the verdict and the reason."""
    if c.estimate is None:
        why = stored(c.reason) if c.reason else _("{n} shared items", n=c.n)
        return _("inconclusive ({why})", why=why)
    est, lo, hi = (fmt(v, digits, sign=True) for v in (c.estimate, c.ci_low, c.ci_high))
    verdict = _(c.verdict)
    if c.ci_low is None or c.ci_high is None:
        text = _(
            "{est}, {verdict} ({why})", est=est, verdict=verdict, why=stored(c.reason) if c.reason else _("no interval")
        )
    else:
        text = _("{est} [{lo}, {hi}] {verdict}", est=est, lo=lo, hi=hi, verdict=verdict)
    if c.items_needed:
        text += _(" (~{n} items)", n=c.items_needed)
    if c.scale == "calibrated":
        text += _(" (calibrated scale)")
    elif c.scale == "judge":
        text += _(" (judges' scale: {note})", note=stored(c.scale_note)) if c.scale_note else _(" (judges' scale)")
    return text


def cost(runs: list[RunEntry]) -> list[str]:
    """Weights on disk, peak memory, items/s over every setting (engine start excluded), and the load time."""
    t = [r.throughput for r in runs]
    wall = sum(float(x.wall_s or 0.0) for x in t)
    items = sum(r.n_items for r in runs)
    peak = max((float(x.peak_rss_mb or 0.0) for x in t), default=0.0)
    weights = runs[0].weights_mb if runs else None
    return [
        "–" if weights is None else f"{weights:.0f}",
        f"{peak:.0f}",
        f"{items / wall:.1f}" if wall > 0 else "–",
        f"{sum(float(x.load_s or 0.0) for x in t):.1f}",
    ]


COST_HEADER = [N_("weights MB"), N_("peak memory MB"), N_("items/s"), N_("engine load s")]


def deploy_table(summary: Summary) -> Table | None:
    """The first screen's answer, a row per model: the cheapest variant (weights on disk, then peak memory) that is
    non-inferior to the model's reference on every setting with a verdict (else the reference itself), the setting
    that stops a cheaper one, its cost, and whether its judged numbers are on the human scale."""
    verdicts = {m.model: m for m in summary.noninferiority}
    rows = [_deploy_row([r for r in summary.runs if r.model == model], verdicts.get(model))
            for model in sorted({r.model for r in summary.runs})]  # fmt: skip
    if not rows:
        return None
    return Table(
        _("Which variant to deploy"),
        [_("model"), _("deploy"), _("why"), _("a cheaper variant stopped by"), *map(_, COST_HEADER[:3])]
        + [_("judged numbers")],
        rows,
        _(
            "Per model, the cheapest variant (weights on disk, then peak memory) that is non-inferior to the model's "
            "reference on every task setting with a verdict, else the reference; the first setting that stops the "
            "cheapest variant that is not. Judged numbers: whether the verdicts of a judged task are on the human "
            "scale (calibrated by your annotators' labels) or the judges' own. The verdict tables below give every "
            "difference and its interval."
        ),
    )


def _deploy_row(runs: list[RunEntry], m: ModelVerdicts | None) -> list[str]:
    by_run = {name: [r for r in runs if r.run == name] for name in sorted({r.run for r in runs})}
    comps = [c for c in m.comparisons if not c.against and c.run in by_run] if m else []
    if m is None or m.reference not in by_run or not comps:
        name = m.reference if m and m.reference in by_run else next(iter(by_run))
        why = _("no other variant to compare") if len(by_run) == 1 else _("no verdict against a reference")
        return [f"{runs[0].model} ({runs[0].backend})", _label(by_run[name]), why, "–", *cost(by_run[name])[:3], "–"]
    settings = sorted({c.setting for c in comps})
    candidates = sorted({c.run for c in comps} & set(by_run), key=lambda n: _price(by_run[n]))
    stops = {n: _stop([c for c in comps if c.run == n], settings) for n in candidates}
    ref = _price(by_run[m.reference])
    passing = [n for n in candidates if stops[n] is None and _price(by_run[n]) < ref]
    chosen = passing[0] if passing else m.reference
    cheaper = [n for n in candidates if _price(by_run[n]) < _price(by_run[chosen]) and stops[n] is not None]
    why = (
        _("non-inferior to the reference on all {n} settings", n=len(settings))
        if passing
        else _("the reference: no cheaper variant is non-inferior on every setting")
    )
    stopped = (
        _("{variant}: {setting}", variant=_label(by_run[cheaper[0]]), setting=stops[cheaper[0]]) if cheaper else "–"
    )
    # the verdicts that chose it: the chosen variant's, or, for the reference, every verdict against it
    scales = {c.scale for c in comps if (c.run == chosen or not passing) and c.scale}
    judged = _("uncalibrated (judges' scale)") if "judge" in scales else _("calibrated") if scales else "–"
    return [f"{m.model} ({m.backend})", _label(by_run[chosen]), why, stopped, *cost(by_run[chosen])[:3], judged]


def _price(entries: list[RunEntry]) -> tuple[float, float]:
    """What a variant costs to run: its weights on disk, then its peak memory over the settings."""
    return float(entries[0].weights_mb or 0.0), max(float(r.throughput.peak_rss_mb or 0.0) for r in entries)


def _stop(mine: list[Verdict], settings: list[str]) -> str | None:
    """The first setting on which a variant is not shown non-inferior (None: it is on every one)."""
    by = {c.setting: c for c in mine}
    for s in settings:
        if s not in by:
            return _("{setting} (no verdict)", setting=s)
        if by[s].verdict != "non-inferior":
            return _("{setting} ({verdict})", setting=s, verdict=_(by[s].verdict))
    return None


def _label(entries: list[RunEntry]) -> str:
    return f"{entries[0].variant} ctx{entries[0].max_model_len}"


def verdict_tables(summary: Summary) -> list[Table]:
    runs = summary.runs
    out = []
    for model in summary.noninferiority:
        comps = model.comparisons
        if not comps:
            continue
        settings = sorted({c.setting for c in comps})
        task_of = {c.setting: c.task for c in comps}
        metrics = {s: task_class(task_of[s]).noninferiority_metric() for s in settings}
        mine = [r for r in runs if r.model == model.model]
        names = [model.reference] + sorted(
            {c.run for c in comps} - {model.reference},
            key=lambda n: next(((c.variant, c.max_model_len) for c in comps if c.run == n), ("", 0)),
        )
        rows, classes = [], []
        for name in names:
            entries = [r for r in mine if r.run == name]
            label = f"{entries[0].variant} ctx{entries[0].max_model_len}" if entries else name
            cells, cls = [], []
            for s in settings:
                m = metrics[s]
                if name == model.reference:
                    ref = next((r for r in entries if r.setting == s), None)
                    v = ref.metrics.get(m.name) if ref else None
                    score = f"{_(m.label)} {v:.{m.digits}f}" if has_score(v) else ""
                    cells.append(_("reference: {score}", score=score) if score else _("reference"))
                    cls.append("v-ref")
                    continue
                c = next((c for c in comps if c.run == name and c.setting == s), None)
                vs = _(" (vs {run})", run=c.against) if c and c.against else ""
                cells.append(verdict_cell(c, m.digits) + vs if c else "–")
                cls.append(VERDICT_CLASS.get(c.verdict, "") if c else "")
            rows.append([label, *cells, *cost(entries)])
            classes.append(["", *cls, *[""] * len(COST_HEADER)])
        margins = "; ".join(
            sorted({f"{_(m.label)} ±{next(c.margin for c in comps if c.setting == s)}" for s, m in metrics.items()})
        )
        missing = model.reference_missing
        note = _(
            "Each cell: the difference from the reference {reference} on the items both scored "
            "(positive = better) [95% CI] and the verdict against the margin ({margins}): "
            "non-inferior when the CI's lower bound is above -margin, inferior when its upper bound is below, "
            "otherwise inconclusive, with the items a CI of the observed spread would need. The CIs are "
            "clustered (the items of one cluster move together; each task's clusters are under 'Clusters and "
            "design effects'): for right/wrong answers, "
            "Tango's score interval for paired proportions, widened by the design effect; for graded scores, "
            "a bootstrap that resamples clusters, which gives no verdict with fewer than "
            "{min_clusters} clusters or a zero-width interval. Cost: peak "
            "resident memory over the settings; items/s over every setting, the engine start counted apart.",
            reference=model.reference,
            margins=margins,
            min_clusters=MIN_CLUSTERS,
        )
        if missing:
            note += _(
                " The reference has no results for {settings}: those settings have no verdict.",
                settings=", ".join(missing),
            )
        out.append(
            Table(
                _("Verdicts: {model} ({engine})", model=model.model, engine=model.backend),
                [_("run"), *settings, *map(_, COST_HEADER)],
                rows,
                note,
                classes=classes,
            )
        )
    return out


def _heat(values: list[float | None], higher_is_better: bool) -> list[str]:
    scored = [v for v in values if v is not None]
    if not scored:
        return ["" for _v in values]
    lo, hi = min(scored), max(scored)
    out = []
    for v in values:
        if v is None or hi == lo:
            out.append("")
            continue
        share = (v - lo) / (hi - lo)
        share = share if higher_is_better else 1 - share
        out.append(f"background:hsl(140,55%,{int(96 - 30 * share)}%)")
    return out


def leaderboard_matrix(task: str, runs: list[RunEntry], summary: Summary) -> Table:
    """Rows = runs (best mean rank first), columns = the task's settings, cells = the primary metric [CI]."""
    cls = task_class(task)
    primary = (
        cls.metrics[0]
        if cls.metrics and cls.metrics[0].name == cls.primary_metric
        else Metric(runs[0].primary_metric or cls.primary_metric, cls.primary_metric)
    )
    settings = sorted({r.setting for r in runs})
    names = sorted({r.run for r in runs})
    cell: dict[tuple[str, str], RunMetrics] = {(r.run, r.setting): r.metrics for r in runs}
    values = {(n, s): _scored(cell.get((n, s)), primary.name) for n in names for s in settings}
    # Mean rank over the settings a run has, each setting ranked once by the sweep: the order a reader scans,
    # each column keeping its own scale.
    rank: dict[str, list[int]] = {n: [] for n in names}
    for s in settings:
        for r, n in ranked(summary, s):
            if r is not None and n in rank:
                rank[n].append(r)
    names.sort(key=lambda n: (sum(rank[n]) / len(rank[n]) if rank[n] else float("inf"), n))
    heat = {s: _heat([values[(n, s)] for n in names], primary.higher_is_better) for s in settings}
    judged = [c for c in summary.calibration if c.task == task and c.headline]
    calibrated = {(c.run, c.setting): c for c in judged if c.number == primary.name}
    rows, styles = [], []
    for i, n in enumerate(names):
        cells = []
        for s in settings:
            m = cell.get((n, s))
            v = values[(n, s)]
            if m is None:
                cells.append("")
            elif v is None:
                cells.append(_("no items"))
            elif (n, s) in calibrated:
                c = calibrated[(n, s)]
                text = ci_text(m.metric(primary.name), primary.digits)
                cells.append(calibrated_text(c, v, primary.digits) if c.calibrated else _("{ci} uncalibrated", ci=text))
            else:
                cells.append(ci_text(m.metric(primary.name), primary.digits))
        rows.append([n, *cells])
        styles.append(["", *[heat[s][i] for s in settings]])
    how = (
        _("{metric} per setting [95% CI]", metric=_(primary.label))
        if primary.ci
        else _("{metric} per setting", metric=_(primary.label))
    )
    how = _(
        "{how}; the colour compares runs within a column only (darker = better). Rows by mean rank over the settings.",
        how=how,
    )
    return Table(
        _("Leaderboard: {task}", task=task),
        [_("run"), *settings],
        rows,
        f"{how} {_(cls.leaderboard_note)} {_calibration_note(judged, primary.name)}".strip(),
        styles=styles,
    )


def leaderboard_matrices(summary: Summary) -> list[Table]:
    runs = summary.runs
    return [leaderboard_matrix(t, [r for r in runs if r.task == t], summary) for t in sorted({r.task for r in runs})]


def _scored(m: RunMetrics | None, name: str) -> float | int | None:
    v = m.get(name) if m is not None else None
    return v if has_score(v) else None
