"""Per task setting, the runs ranked once by the task's primary metric, honouring which way is better (best
first; no score last). The report's every ranking reads these."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from offline_eval.metrics.ranking import has_score
from offline_eval.results.calibration import CalibrationRow
from offline_eval.results.records import RunEntry
from offline_eval.results.summary import LeaderboardRow
from offline_eval.tasks import get_task_class, task_names
from offline_eval.tasks.base import Task


def build(runs: list[RunEntry], calibration: Sequence[CalibrationRow] = ()) -> dict[str, list[LeaderboardRow]]:
    """`calibration`: where a run's headline judged number is the ranked metric and human labels calibrate it, its
    row carries the calibrated estimate beside the judges' value (the ranking stays the judges')."""
    headline = {(c.run, c.setting, c.number): c for c in calibration if c.headline}
    out: dict[str, list[LeaderboardRow]] = {}
    for setting in sorted({r.setting for r in runs}):
        group = [r for r in runs if r.setting == setting]
        metric = group[0].primary_metric or "mean"
        task = get_task_class(group[0].task) if group[0].task in task_names() else Task
        declared = next((m for m in task.metrics if m.name == metric), None)
        rows = []
        for r in rank_runs(group, metric, declared.higher_is_better if declared else True):
            value = r.metrics.get(metric)
            row: dict[str, Any] = {"run": r.run, "metric": metric, "value": value}
            if value is None or not has_score(value):
                row["value"], row["note"] = None, "no items"
            else:
                row.update(task.report_parts.leaderboard_row(value))
            if (c := headline.get((r.run, setting, metric))) is not None and c.calibrated:
                row["calibration"] = _calibrated(c)
            rows.append(LeaderboardRow.model_validate(row))
        out[setting] = rows
    return out


def rank_runs(runs: Sequence[RunEntry], metric: str, higher_is_better: bool = True) -> list[RunEntry]:
    """Run entries best first by `metric`; runs without a score last; ties by run and setting."""
    sign = 1 if higher_is_better else -1

    def key(r: RunEntry) -> tuple[Any, ...]:
        v: Any = r.metrics.get(metric)
        return (0, -sign * v, r.run, r.setting) if has_score(v) else (1, 0, r.run, r.setting)

    return sorted(runs, key=key)


def _calibrated(c: CalibrationRow) -> dict[str, Any]:
    """The leaderboard's view of a calibrated row: the PPI++ estimate [CI] of the human mean on n labels."""
    assert c.ppi_pp is not None
    return {**c.ppi_pp.model_dump(), "n": c.n, "reason": c.reason}
