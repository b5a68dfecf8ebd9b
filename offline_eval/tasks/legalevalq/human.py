"""The human scores a LegalEval-Q sweep reads to calibrate the scorer (tasks.legalevalq.human_scores): the
annotation page's JSONL exports (each line names its output by `case` and `sample`, with the output's sha256 and the
page's `draw`), or hand-made CSV or JSONL rows naming the run in `model`; a `score` from 0 to 100. Errors name the
file, the record and the field."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from statistics import mean
from typing import Any

from offline_eval.results.records import sample_of
from offline_eval.runtime.errors import is_url
from offline_eval.tasks.kit import InputError, Records, RunEntry, case_id, note, read_table
from offline_eval.tasks.kit.annotation import output_sha256
from offline_eval.tasks.kit.calibration import HumanLabels, OutputLabels, drawn, read_draw

from .records import LegalEvalQRecord

FIELD = "tasks.legalevalq.human_scores"


def read_human_scores(paths: str | list[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in [paths] if isinstance(paths, str) else paths:
        rows += _read_file(path)
    return rows


def _read_file(path: str) -> list[dict[str, Any]]:
    if is_url(path):
        raise InputError("URLs are refused; give a local path", file=path, field=FIELD)
    p = Path(path)
    if not p.is_file():
        raise InputError("human scores file not found", file=path, field=FIELD)
    note(p)
    rows = []
    for where, r in read_table(p):
        by_case = r.get("case") not in (None, "")
        for f in ("item_id", "score", "annotator", "sample" if by_case else "model"):
            if r.get(f) in (None, ""):
                raise InputError("missing", file=path, record=where, field=f)
        try:
            score = float(r["score"])
        except (TypeError, ValueError):
            score = math.nan
        if not 0 <= score <= 100:
            raise InputError(f"'{r['score']}' is not a score from 0 to 100", file=path, record=where, field="score")
        draw = read_draw(r.get("draw"), path, where)
        rows.append(
            {
                "item_id": str(r["item_id"]).strip(),
                "case": str(r.get("case") or "").strip(),
                "sample": str(r.get("sample") or "").strip(),
                "model": str(r.get("model") or "").strip(),
                "score": score,
                "annotator": str(r["annotator"]).strip(),
                "output_sha256": str(r.get("output_sha256") or "").strip() or None,
                "draw": draw,
                "file": path,
                "where": where,
            }
        )
    if not rows:
        raise InputError("no human scores in the file", file=path, field=FIELD)
    return rows


def human_labels(
    paths: str | list[str] | None,
    human_sample: str | None,
    runs: Sequence[RunEntry],
    records: Records[LegalEvalQRecord],
) -> HumanLabels | None:
    """Each output's label: the mean of its annotators' scores (None: no files). Rows on an output that changed
    since (another sha256) are not used and are counted; rows naming no output of these runs are one note per
    kind."""
    if not paths:
        return None
    rows = read_human_scores(paths)
    outputs = {(e.run, e.setting, r.id): r for e in runs for r in records.get(e.key, []) if not sample_of(r)}
    by_name: dict[str, list[RunEntry]] = defaultdict(list)
    for e in runs:
        by_name[e.run].append(e)
        by_name[e.model].append(e)
    scores: dict[tuple[str, str, str], dict[str, float]] = defaultdict(dict)  # output -> annotator -> score
    firsts: dict[tuple[tuple[str, str, str], str], dict[str, Any]] = {}
    draws: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    out = HumanLabels(source=paths if isinstance(paths, str) else ", ".join(paths))
    unmatched: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for h in rows:
        if h["case"]:
            cand = [e for e in runs if case_id(h["sample"], e.run, e.setting, h["item_id"]) == h["case"]]
            field = "case"
        else:
            cand, field = by_name.get(h["model"], []), "model"
        if len(cand) != 1:
            why = "names no run of this sweep" if not cand else f"matches {len(cand)} runs; give the run name"
            unmatched[(why, field)].append(h)
            continue
        e = cand[0]
        key = (e.run, e.setting, h["item_id"])
        rec = outputs.get(key)
        if rec is None:
            unmatched[(f"{e.run} has no output for this item", "item_id")].append(h)
        elif h["output_sha256"] and h["output_sha256"] != output_sha256(rec.output):
            out.stale[(e.run, e.setting)] = out.stale.get((e.run, e.setting), 0) + 1
        else:
            first = firsts.setdefault((key, h["annotator"]), h)
            if first["score"] != h["score"]:
                raise InputError(
                    f"{h['annotator']} scored {h['item_id']} of {e.run} {h['score']:g} here and {first['score']:g} in "
                    f"{first['file']}, {first['where']}: give each annotator's export once (the later one)",
                    file=h["file"],
                    record=h["where"],
                    field="score",
                )
            scores[key][h["annotator"]] = h["score"]  # an annotator's score counts once, however often given
            draws[key].add(h["draw"])
    for key, by in scores.items():
        random, page = drawn(draws[key], human_sample)
        out.by_output[key] = OutputLabels({"score": mean(by.values())}, random=random, stratified=page)
    out.notes = [
        f"{len(hs)} row(s): {why} (first: {hs[0]['file']}, {hs[0]['where']}, field {field})"
        for (why, field), hs in sorted(unmatched.items())
    ] + [
        f"{n} row(s) on {run} not used: the output changed since it was labelled (its output_sha256 differs)"
        for (run, _), n in sorted(out.stale.items())
    ]
    return out
