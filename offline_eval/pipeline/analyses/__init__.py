"""What a sweep concludes across its runs, from their records: leaderboards, ablation families, non-inferiority
verdicts against each model's reference, the consistency of runs of the same weights, each task's own
cross-run report, and every judged number calibrated by the human labels. Each is a field of summary.json."""

from __future__ import annotations

from typing import Any

from offline_eval.models.spec import ModelSpec
from offline_eval.results.records import ItemRecord, Records, RunEntry
from offline_eval.tasks.base import Task

from . import ablations, calibration, consistency, leaderboards, verdicts


def analyse(
    models: list[ModelSpec],
    margins: dict[str, float],
    runs: list[RunEntry],
    records: Records[ItemRecord],
    tasks: dict[str, Task],
) -> dict[str, Any]:
    """summary.json's analysis fields. `runs`: every current run (this sweep's and those carried over);
    `records`: theirs; `tasks`: the tasks this sweep planned (only their runs are analysed)."""
    known = [r for r in runs if r.task in tasks]
    specs = {m.name: m for m in models}

    def declared(model: str, variant: str) -> str | None:
        m = specs.get(model)
        return m.declared_twin(variant) if m is not None and variant in m.variants else None

    calibrated, notes = calibration.build(known, records, tasks)
    return {
        "task_reports": task_reports(runs, records, tasks),
        "ablations": ablations.build(
            records,
            known,
            lambda task: tasks[task].item_score,
            lambda task: tasks[task].cluster,
            lambda task: tasks[task].noninferiority_metric().paired,
        ),
        "noninferiority": verdicts.build(models, margins, records, runs, tasks, calibrated=calibrated),
        "consistency": consistency.build(known, records, tasks, declared),
        "leaderboards": leaderboards.build(runs, calibrated),
        "calibration": calibrated,
        "calibration_notes": notes,
    }


def task_reports(runs: list[RunEntry], records: Records[ItemRecord], tasks: dict[str, Task]) -> dict[str, Any]:
    reports = {}
    for name, task in tasks.items():
        entries = [r for r in runs if r.task == name]
        mine = {r.key: records[r.key] for r in entries if r.key in records}
        rep = task.sweep_report(entries, mine) if entries else None
        if rep is not None:
            reports[name] = rep.to_json()
    return reports
