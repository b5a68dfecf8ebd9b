"""The human scores a LegalRikai sweep reads (tasks.legalrikai.human_scores): CSV or JSONL rows, one file per
annotator or one for all, each row checked (a known criterion, an integer on its scale) with errors naming the
file, the row and the field. A row names its output by `model` (a run or model name) or, exported by the
annotation page, by `case` and `sample`; the page's CSV cells were escaped against spreadsheet formulas, which
datafiles.read_table undoes."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from offline_eval.runtime.errors import is_url
from offline_eval.tasks.kit import Criterion, InputError, note, read_table
from offline_eval.tasks.kit.calibration import read_draw

from .. import rubric
from ..rubric import SUBTASKS

FIELDS = ("item_id", "model", "criterion", "score", "annotator")  # `model`, or `case` and `sample`


def criteria_scales() -> dict[str, Criterion]:
    return {c.code: c for s in SUBTASKS for c in rubric.criteria(s)}


def read_human_scores(paths: str | list[str]) -> list[dict[str, Any]]:
    """Every file's rows (one file per annotator, or one for all); the same score given twice with two values
    is an error naming both places."""
    rows: list[dict[str, Any]] = []
    seen: dict[tuple[str, ...], dict[str, Any]] = {}
    named: dict[str, dict[str, Any]] = {}  # annotator -> their first row
    given: dict[Path, str] = {}
    for path in [paths] if isinstance(paths, str) else paths:
        if (twice := given.get(Path(path).resolve())) is not None:
            raise InputError(
                f"given twice (also as {twice}): every row would count twice",
                file=path,
                field="tasks.legalrikai.human_scores",
            )
        given[Path(path).resolve()] = path
        for r in _read_file(path):
            other = named.setdefault(r["annotator"], r)
            if other["file"] != r["file"]:
                raise InputError(
                    f"annotator '{r['annotator']}' is in {other['file']} ({other['where']}) and in this file: give "
                    "each annotator a name of their own (edit the annotator column of one file), or, one person's "
                    "two exports of one sample, only the later",
                    file=path,
                    record=r["where"],
                    field="annotator",
                )
            key = (r["annotator"], str(r["task"]), r["item_id"], r["model"] or r["case"], r["criterion"])
            first = seen.setdefault(key, r)
            if first is not r and first["score"] != r["score"]:
                raise InputError(
                    f"{r['annotator']} scored {r['criterion']} of {r['item_id']} ({r['model'] or r['case']}) "
                    f"{r['score']} here and {first['score']} in {first['file']}, {first['where']}",
                    file=path,
                    record=r["where"],
                    field="score",
                )
            rows.append(r)
    return rows


def _read_file(path: str) -> list[dict[str, Any]]:
    """Rows with a valid criterion and an integer score on its scale; errors name the file, row and field. An
    export of `offline-eval annotate` also carries its sample id and the sha256 of each output it scores."""
    if is_url(path):
        raise InputError("URLs are refused; give a local path", file=path)
    p = Path(path)
    if not p.is_file():
        raise InputError("human scores file not found", file=path, field="tasks.legalrikai.human_scores")
    note(p)
    raw = read_table(p)
    scales = criteria_scales()
    rows = []
    samples: dict[str, str] = {}  # sample id -> where it first appears
    for where, r in raw:
        by_case = r.get("case") not in (None, "")
        for f in FIELDS:
            if r.get(f) in (None, "") and not (f == "model" and by_case):
                raise InputError("missing", file=path, record=where, field=f)
        if by_case and r.get("sample") in (None, ""):
            raise InputError(
                "missing (a row that names its output by case id needs it)", file=path, record=where, field="sample"
            )
        c = scales.get(str(r["criterion"]).strip())
        if c is None:
            raise InputError(
                f"unknown criterion '{r['criterion']}'; expected one of {', '.join(scales)}",
                file=path,
                record=where,
                field="criterion",
            )
        try:
            score = float(r["score"])
        except (TypeError, ValueError):
            score = math.nan
        if not score.is_integer() or not c.lo <= score <= c.hi:
            raise InputError(
                f"'{r['score']}' is not an integer from {c.lo} to {c.hi} ({c.code}'s scale)",
                file=path,
                record=where,
                field="score",
            )
        task = str(r.get("task") or "").strip().lower() or None
        if task is not None and task not in SUBTASKS:
            raise InputError(
                f"unknown task '{r['task']}'; expected one of {', '.join(SUBTASKS)}",
                file=path,
                record=where,
                field="task",
            )
        rows.append(
            {
                "item_id": str(r["item_id"]).strip(),
                "model": str(r.get("model") or "").strip(),
                "case": str(r.get("case") or "").strip(),
                "sample": str(r.get("sample") or "").strip(),
                "criterion": c.code,
                "score": int(score),
                "annotator": str(r["annotator"]).strip(),
                "task": task,
                "where": where,
                "file": path,
                "output_sha256": str(r.get("output_sha256") or "").strip() or None,
                "draw": read_draw(r.get("draw"), path, where),
            }
        )
        sample = str(r.get("sample") or "").strip()
        if sample:
            samples.setdefault(sample, where)
            if len(samples) > 1:
                first = next(iter(samples))
                raise InputError(
                    f"rows of two annotation samples in one file ({first} from {samples[first]}, {sample} here): "
                    "give each sample's export as its own file",
                    file=path,
                    record=where,
                    field="sample",
                )
    if not rows:
        raise InputError("no human scores in the file", file=path)
    return rows
