"""`offline-eval verify DIR`: the auditor's check that a sweep's numbers follow from its files.

- Every data file and weights file the provenance names is hashed again: changed or missing ones are listed.
- Every run's metrics (per-group metrics and CIs included) are recomputed from results/*.jsonl with the task's
  own code and options, and every verdict from the two runs' records, and compared with summary.json.
- Every parsed answer is checked against the constraint its setting was decoded under (the judges' answers
  against theirs).

Exit 0: everything matches. Exit 1: each mismatch is one line naming the run, the setting and the metric, with
both values. Exit 2: the folder is not a readable sweep folder.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .constraints import from_dict, violation
from .errors import InputError
from .fileio import json_safe
from .results import ItemRecord, ResultsFolder, RunEntry
from .summary import FileDigest, Provenance, SettingProvenance, Summary
from .tasks import get_task_class, make_task, task_names
from .tasks.base import Task


def verify(out_dir: str | Path) -> list[str]:
    """The mismatches, one line each (empty: everything matches). A folder that is not a sweep's is InputError."""
    folder = ResultsFolder(Path(out_dir))
    if not folder.root.is_dir():
        raise InputError("not a folder", file=str(folder.root))
    summary = Summary.read(folder.summary)
    if summary.provenance is None:
        raise InputError("summary.json has no provenance to check against", file=str(folder.summary))
    prov = summary.provenance
    problems = list(_files(prov))
    settings = {s.setting: s for s in prov.settings}
    tasks: dict[str, Task | None] = {}
    records: dict[tuple[str, str], list[ItemRecord] | None] = {}
    for run in summary.runs:
        task = _task(run, settings.get(run.setting), tasks, problems)
        if task is None:
            continue
        recs = folder.read_records(run.key, task.Record.from_json)
        records[(run.run, run.setting)] = recs
        if recs is None:
            problems.append(f"{run.run} / {run.setting}: its results file is missing or unreadable")
            continue
        problems += _metrics(run, task, recs)
        problems += _constraints(run, task, recs, settings[run.setting])
    problems += _verdicts(summary, tasks, records, {r.key: r for r in summary.runs})
    return problems


def _files(prov: Provenance) -> Iterator[str]:
    for s in prov.settings:
        for f in s.data_files:
            why = _changed(Path(f.path), f)
            if why:
                yield f"setting {s.setting}: data file {f.path} {why}"
    for load in prov.loads:
        for f in load.files or []:
            root = Path(load.path)
            path = root if root.name == f.path and not root.is_dir() else root / f.path
            why = _changed(path, f)
            if why:
                yield f"load {load.run}: weights file {path} {why}"


def _changed(path: Path, f: FileDigest) -> str | None:
    from .backends.fingerprint import file_sha256

    if not path.is_file():
        return "is missing"
    size = path.stat().st_size
    digest = file_sha256(path)
    if digest != f.sha256:
        return f"changed: sha256 {f.sha256[:16]}… ({f.size} bytes) in the summary, {digest[:16]}… ({size} bytes) now"
    return None


def _task(
    run: RunEntry, setting: SettingProvenance | None, tasks: dict[str, Task | None], problems: list[str]
) -> Task | None:
    """The run's task with the options the sweep used (from the provenance), made once per setting."""
    if run.setting in tasks:
        return tasks[run.setting]
    task: Task | None = None
    if run.task not in task_names():
        problems.append(f"{run.run} / {run.setting}: task {run.task!r} is not installed here: cannot recompute it")
    elif setting is None:
        problems.append(f"{run.run} / {run.setting}: the provenance has no entry for this setting")
    else:
        get_task_class(run.task)
        task = make_task(run.task, setting.task_options, source="summary.json provenance")
    tasks[run.setting] = task
    return task


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)


def _metrics(run: RunEntry, task: Task, recs: list[ItemRecord]) -> list[str]:
    got = json_safe(task.run_metrics(recs, run.options))  # NaN is null in summary.json too
    out = []
    for k in sorted(set(got) | set(run.metrics)):
        a, b = run.metrics.get(k), got.get(k)
        if k not in run.metrics or k not in got or not _same(a, b):
            out.append(f"{run.run} / {run.setting}: metric {k}: summary.json says {a!r}, the results files give {b!r}")
    if len(recs) != run.n_items:
        out.append(f"{run.run} / {run.setting}: n_items: summary.json says {run.n_items}, the results have {len(recs)}")
    return out


def _constraints(run: RunEntry, task: Task, recs: list[ItemRecord], setting: SettingProvenance) -> list[str]:
    out = []
    own = from_dict(setting.constraint) if setting.constraint else None
    judged = from_dict(setting.evaluation_constraint) if setting.evaluation_constraint else None
    for rec in recs:
        if own is not None and rec.parsed is not None and not rec.skipped and (why := violation(own, rec.output)):
            out.append(f"{run.run} / {run.setting}: record {rec.id}: the parsed answer breaks its constraint ({why})")
        for text in task.evaluation_answers(rec):
            if judged is not None and (why := violation(judged, text)):
                out.append(
                    f"{run.run} / {run.setting}: record {rec.id}: a scored evaluator answer breaks its constraint "
                    f"({why})"
                )
    return out


def _verdicts(
    summary: Summary,
    tasks: dict[str, Task | None],
    records: dict[tuple[str, str], list[ItemRecord] | None],
    runs: dict[Any, RunEntry],
) -> list[str]:
    from .analyses.verdicts import paired_verdict

    out = []
    for model in summary.noninferiority:
        for c in model.comparisons:
            task = tasks.get(c.setting)
            mine, ref = records.get((c.run, c.setting)), records.get((model.reference, c.setting))
            if task is None or mine is None or ref is None:
                continue
            again = paired_verdict(task, mine, ref, c.margin)
            for k in ("n", "estimate", "ci_low", "ci_high", "verdict", "p_noninferiority"):
                a, b = getattr(c, k), getattr(again, k)
                if not _same(a, b):
                    out.append(
                        f"{c.run} / {c.setting}: verdict against {model.reference}, {k}: summary.json says {a!r}, "
                        f"the results files give {b!r}"
                    )
    return out
