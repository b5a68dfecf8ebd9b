"""Judge-human agreement across a sweep: the paper's Tables 5 (kappa), 6 (scores), 7 (Spearman), 8 (MAE).

Human scores come as CSV or JSONL rows {item_id, model, criterion, score, annotator} (optional `task`, needed
only when item ids repeat across sub-tasks). `model` is a run name (`name.backend.variant.ctxN`) or a model
name with one run; an export of `offline-eval annotate` gives instead the output's `case` id and its `sample`,
from which the run is found (annotation.case_id). Several annotators of one output are averaged on the [0, 1]
scale, as in the paper; one annotator's name in two files is refused (two people who typed the same name).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from statistics import mean
from typing import Any

import numpy as np

from offline_eval.metrics.agreement import cohen_kappa, krippendorff_alpha, mae, spearman
from offline_eval.results.records import sample_of
from offline_eval.tasks.kit import N_SKIPPED, Bootstrapped, Criterion, InputError, Records, RunEntry, case_id
from offline_eval.tasks.kit.annotation import output_sha256
from offline_eval.tasks.kit.calibration import HumanLabels, OutputLabels, drawn

from .. import rubric
from ..metrics import CHECKS, N_FOCUSED, N_FULL, SCORE
from ..record import LegalRikaiRecord
from ..rubric import SUBTASKS
from ..sweepreport import (
    Agreement,
    AlphaCell,
    BiasCell,
    Checks,
    Inputs,
    JudgeAgreement,
    KappaCell,
    LegalRikaiReport,
    MaeCell,
    RhoCell,
    ScoreRow,
    Setting,
)
from .scores import criteria_scales, read_human_scores


def _nan_none(v: float) -> float | None:
    return None if v is None or math.isnan(v) else round(v, 4)


@dataclass
class Matched:
    """The rows matched to outputs: (sub-task, run, item id, criterion) -> {annotator: raw score}; each output's
    draws (the `draw` its rows carry: "random" from the page's seeded draw, "" where none is recorded); labels not
    used because their output changed since (by sub-task and run); and a line per kind of row that matched no
    output: `notes` as the agreement tables have always counted them, `lines` naming the first such row's file,
    record and field."""

    cells: dict[tuple[str, str, str, str], dict[str, int]]
    draws: dict[tuple[str, str, str], set[str]]
    stale: dict[tuple[str, str], int]
    notes: list[str]
    lines: list[str]


def _match(rows: list[dict[str, Any]], runs: Sequence[RunEntry], records: Records[LegalRikaiRecord]) -> Matched:
    ids: dict[str, set[str]] = defaultdict(set)  # item id -> the sub-tasks that have it
    for recs in records.values():
        for r in recs:
            ids[r.id].add(r.subtask)
    present = {(s, i) for i, subs in ids.items() for s in subs}
    # annotators saw an item's first answer (its first sample, where it has several)
    by_output = {(r.subtask, key.run, r.id): r for key, recs in records.items() for r in recs if not sample_of(r)}
    runs_of: dict[tuple[str, str], set[str]] = defaultdict(set)  # (sub-task, model or run name) -> runs
    settings: dict[str, list[RunEntry]] = defaultdict(list)  # sub-task -> its runs
    for e in runs:
        of = Setting.of(e).subtask
        runs_of[(of, e.run)].add(e.run)
        runs_of[(of, e.model)].add(e.run)
        settings[of].append(e)
    out: dict[tuple[str, str, str, str], dict[str, int]] = defaultdict(dict)
    draws: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    stale: dict[tuple[str, str], int] = defaultdict(int)
    unmatched: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)  # (why, field) -> its rows
    for h in rows:
        subs = (
            {h["task"]}
            if h["task"]
            else {s for s in ids.get(h["item_id"], ()) if h["criterion"] in [c.code for c in rubric.criteria(s)]}
        )
        if len(subs) > 1:
            raise InputError(
                f"item id '{h['item_id']}' is in several sub-tasks ({', '.join(sorted(subs))}); add a 'task' column",
                record=h["where"],
                field="task",
            )
        sub = next(iter(subs), None)
        if h["case"]:  # the page's export: the run whose case id this is, in the sample the row names
            cand = {
                e.run
                for e in settings.get(sub or "", ())
                if case_id(h["sample"], e.run, e.setting, h["item_id"]) == h["case"]
            }
        else:
            cand = runs_of.get((sub, h["model"]), set()) if sub else set()
        if sub is None or (sub, h["item_id"]) not in present:
            unmatched[("item not in this sweep", "item_id")].append(h)
        elif h["case"] and not cand:
            unmatched[("case id of no run of this sweep", "case")].append(h)
        elif len(cand) != 1:
            why = (
                "model matches no run"
                if not cand
                else f"model '{h['model']}' matches {len(cand)} runs; give the run name"
            )
            unmatched[(why, "model")].append(h)
        else:
            run = next(iter(cand))
            rec = by_output.get((sub, run, h["item_id"]))
            if rec is not None and h["output_sha256"] and h["output_sha256"] != output_sha256(rec.output):
                stale[(sub, run)] += 1  # another output than this sweep's: made again since, or another sweep's
            else:
                out[(sub, run, h["item_id"], h["criterion"])][h["annotator"]] = h["score"]
                draws[(sub, run, h["item_id"])].add(h.get("draw") or "")
    changed = [
        f"{n} row(s) on {rubric.NAMES.get(sub, sub)} of {run} not used: the output changed since it was labelled "
        "(its output_sha256 differs)"
        for (sub, run), n in sorted(stale.items())
    ]
    return Matched(
        out,
        draws,
        dict(stale),
        [f"{len(hs)} row(s): {why}" for (why, _), hs in sorted(unmatched.items())] + changed,
        [
            f"{len(hs)} row(s): {why} (first: {hs[0]['file']}, {hs[0]['where']}, field {field})"
            for (why, field), hs in sorted(unmatched.items())
        ]
        + changed,
    )


def _kappa(cells: list[dict[str, int]]) -> tuple[float | None, int]:
    """Cohen's kappa between two annotators over the outputs both scored; with more, the mean over pairs."""
    names = sorted({a for c in cells for a in c})
    values = []
    n = 0
    for a, b in combinations(names, 2):
        both = [c for c in cells if a in c and b in c]
        if both:
            values.append(cohen_kappa([c[a] for c in both], [c[b] for c in both]))
            n = max(n, len(both))
    if not values:
        return None, 0
    return (math.nan if any(math.isnan(v) for v in values) else mean(values)), n


def judge_agreement(
    records: Records[LegalRikaiRecord], judges: list[str], n_resamples: int = 1000, seed: int = 0
) -> JudgeAgreement | None:
    """Among the judges of this sweep (None with fewer than two)."""
    if len(judges) < 2:
        return None
    outputs = [r for recs in records.values() for r in recs if not r.skipped]
    out = JudgeAgreement(alpha={}, bias={})
    for sub in [s for s in SUBTASKS if any(r.subtask == s for r in outputs)]:
        mine = [r for r in outputs if r.subtask == sub]
        out.alpha[sub], out.bias[sub] = {}, {j: {} for j in judges}
        for c in rubric.criteria(sub):
            raw = np.full((len(judges), len(mine)), np.nan)
            for u, r in enumerate(mine):
                for i, j in enumerate(judges):
                    got = (r.judges.get(j) or {}).get("scores")
                    if got is not None and c.code in got:
                        raw[i, u] = got[c.code]
            rated = np.sum(~np.isnan(raw), axis=0) >= 2
            alpha = krippendorff_alpha(raw, list(range(c.lo, c.hi + 1)))
            out.alpha[sub][c.code] = AlphaCell(
                alpha=_nan_none(alpha) if alpha is not None else None, n=int(rated.sum())
            )
            norm = (raw[:, rated] - c.lo) / (c.hi - c.lo)
            consensus = np.nanmean(norm, axis=0)
            labels = [r.source_item for r, keep in zip(mine, rated) if keep]
            for i, j in enumerate(judges):
                has = ~np.isnan(norm[i])
                diff = norm[i][has] - consensus[has]
                out.bias[sub][j][c.code] = _bias(
                    diff.tolist(), [x for x, h in zip(labels, has) if h], n_resamples, seed
                )
    return out


def _shown(paths: str | list[str]) -> str:
    return paths if isinstance(paths, str) else ", ".join(paths)


def sweep_report(
    runs: Sequence[RunEntry],
    records: Records[LegalRikaiRecord],
    human_path: str | list[str] | None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> LegalRikaiReport:
    subtask = {e.key: Setting.of(e).subtask for e in runs}
    subs = [s for s in SUBTASKS if s in subtask.values()]
    judges = sorted({j for recs in records.values() for r in recs for j in r.judges})
    scores = []
    for e in sorted(runs, key=lambda e: (SUBTASKS.index(subtask[e.key]), e.run)):
        m = e.metrics
        sub = subtask[e.key]
        crits = [c.code for c in rubric.criteria(sub)]
        scores.append(
            ScoreRow(
                subtask=sub,
                run=e.run,
                Avg={c: m.get(c) for c in crits},  # each criterion's Avg, declared by the rubric (metrics.CRITERIA)
                score=SCORE.of(m),
                judges={j: {c: m.judges[j].criteria.get(c) for c in crits} for j in judges if j in m.judges},
                judge_failures={j: m.judges[j].failures for j in judges if j in m.judges},
                inputs=Inputs(
                    full=int(N_FULL.of(m) or 0), focused=int(N_FOCUSED.of(m) or 0), skipped=int(N_SKIPPED.of(m) or 0)
                ),
                checks=Checks(**{k.name: k.of(m) for k in CHECKS if k.name in Checks.model_fields}),
            )
        )
    human = (
        agreement(read_human_scores(human_path), runs, records, judges, _shown(human_path), n_resamples, seed)
        if human_path
        else None
    )
    return LegalRikaiReport(
        subtasks=subs,
        criteria={s: [c.code for c in rubric.criteria(s)] for s in subs},
        judges=judges,
        scores=scores,
        human=human,
        judge_agreement=judge_agreement(records, judges, n_resamples, seed),
    )


def agreement(
    rows: list[dict[str, Any]],
    runs: Sequence[RunEntry],
    records: Records[LegalRikaiRecord],
    judges: list[str],
    path: str,
    n_resamples: int = 1000,
    seed: int = 0,
) -> Agreement:
    matched = _match(rows, runs, records)
    cells, notes = matched.cells, matched.notes
    by_output: dict[tuple[str, str, str], LegalRikaiRecord] = {}
    for key, recs in records.items():
        run = key.run
        for r in recs:
            if not sample_of(r):
                by_output[(r.subtask, run, r.id)] = r
    crit = criteria_scales()
    res = Agreement(
        file=path,
        rows=len(rows),
        matched_outputs=len({k[:3] for k in cells}),
        unmatched=notes,
        human_scores={},
        kappa={},
        spearman={},
        mae={},
        alpha={},
        bias={},
    )
    for sub in sorted({k[0] for k in cells}, key=SUBTASKS.index):
        res.human_scores[sub], res.kappa[sub], res.alpha[sub] = {}, {}, {}
        res.spearman[sub] = {j: {} for j in [*judges, "Avg"]}
        res.mae[sub] = {j: {} for j in [*judges, "Avg"]}
        res.bias[sub] = {j: {} for j in [*judges, "Avg"]}
        for c in rubric.criteria(sub):
            mine = {k: v for k, v in cells.items() if k[0] == sub and k[3] == c.code}
            kappa, n = _kappa(list(mine.values()))
            res.kappa[sub][c.code] = KappaCell(kappa=_nan_none(kappa) if kappa is not None else None, n=n)
            res.alpha[sub][c.code] = _annotator_alpha(list(mine.values()), c)
            human = {k[1:3]: mean(crit[c.code].normalise(s) for s in v.values()) for k, v in mine.items()}
            for run in sorted({k[0] for k in human}):
                vals = [v for k, v in human.items() if k[0] == run]
                res.human_scores[sub].setdefault(run, {})[c.code] = round(mean(vals), 4)
            for j in [*judges, "Avg"]:
                pairs, items = [], []
                for (run, item), hv in sorted(human.items()):
                    rec = by_output.get((sub, run, item))
                    if rec is None:
                        continue
                    if j == "Avg":
                        jv = rec.scores.get(c.code)
                    else:
                        js = rec.judges.get(j, {}).get("scores")
                        jv = c.normalise(js[c.code]) if js else None
                    if jv is not None:
                        pairs.append((jv, hv))
                        items.append(f"{sub}/{item}")
                res.bias[sub][j][c.code] = _bias([a - b for a, b in pairs], items, n_resamples, seed)
                rho, p = spearman([a for a, _ in pairs], [b for _, b in pairs]) if pairs else (math.nan, math.nan)
                res.spearman[sub][j][c.code] = RhoCell(rho=_nan_none(rho), p=_nan_none(p), n=len(pairs))
                res.mae[sub][j][c.code] = mae_cell(pairs, c)
    return res


def mae_cell(pairs: list[tuple[float, float]], c: Criterion) -> MaeCell:
    """The MAE of (judge, annotators' mean) pairs given on [0, 1], on both scales: `mae` on [0, 1], and
    `mae_points` on the criterion's own points, as the paper's Table 8 reports it (each value mapped back by
    lo + v x (hi - lo): a 3-point criterion's MAE in points is twice its MAE on [0, 1], a 2-point one's the same)."""

    def points(v: float) -> float:
        return c.lo + v * (c.hi - c.lo)

    judge, human = [a for a, _ in pairs], [b for _, b in pairs]
    return MaeCell(
        mae=_nan_none(mae(judge, human)),
        mae_points=_nan_none(mae([points(v) for v in judge], [points(v) for v in human])),
        n=len(pairs),
    )


def _annotator_alpha(cells: list[dict[str, int]], c: Criterion) -> AlphaCell:
    """Krippendorff's alpha (ordinal) between the annotators, over the outputs two or more of them scored."""
    names = sorted({a for cell in cells for a in cell})
    rated = [cell for cell in cells if len(cell) >= 2]
    if len(names) < 2 or not rated:
        return AlphaCell(alpha=None, n=len(rated))
    raw = np.array([[cell.get(a, np.nan) for cell in rated] for a in names], dtype=float)
    alpha = krippendorff_alpha(raw, list(range(c.lo, c.hi + 1)))
    return AlphaCell(alpha=_nan_none(alpha) if alpha is not None else None, n=len(rated))


def _bias(diffs: list[float], items: list[str], n_resamples: int, seed: int) -> BiasCell:
    """The mean of a judge's score minus a reference's on [0, 1] (positive: the judge is more lenient), with a 95%
    CI that resamples the source items `items` label (withheld under 20 of them)."""
    if not diffs:
        return BiasCell(bias=None, n=0)
    bias, n = round(float(np.mean(diffs)), 4), len(diffs)
    if not n_resamples:
        return BiasCell(bias=bias, n=n)
    iv, n_clusters = _BIAS.interval(diffs, items, n_resamples, seed)
    return BiasCell(
        bias=bias,
        n=n,
        ci_low=_nan_none(iv.low) if iv.low is not None else None,
        ci_high=_nan_none(iv.high) if iv.high is not None else None,
        n_clusters=n_clusters,
    )


_BIAS = Bootstrapped.mean(float)  # a judge's score minus the reference's, per criterion and item


def human_labels(
    paths: str | list[str] | None,
    human_sample: str | None,
    runs: Sequence[RunEntry],
    records: Records[LegalRikaiRecord],
) -> HumanLabels | None:
    """The labels of the human_scores files matched to the runs' outputs, each criterion the annotators' mean on
    [0, 1] (None: no files). An output's labels are random where every row on it comes from the page's seeded draw,
    or where the options say `human_sample: random`; a row from a draw of picked outputs (--items) never is."""
    if not paths:
        return None
    matched = _match(read_human_scores(paths), runs, records)
    scales = criteria_scales()
    values: dict[tuple[str, str, str], dict[str, float]] = defaultdict(dict)
    for (sub, run, item, code), by in matched.cells.items():
        values[(sub, run, item)][code] = mean(scales[code].normalise(v) for v in by.values())
    out = HumanLabels(source=_shown(paths), notes=matched.lines)
    for (sub, run, item), got in values.items():
        random, page = drawn(matched.draws[(sub, run, item)], human_sample)
        out.by_output[(run, f"legalrikai.{sub}", item)] = OutputLabels(got, random=random, stratified=page)
    for (sub, run), n in matched.stale.items():
        out.stale[(run, f"legalrikai.{sub}")] = n
    return out
