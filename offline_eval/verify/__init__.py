"""`offline-eval verify DIR`: the auditor's check that a sweep's numbers follow from its primary sources.

The whole summary and every results file are made again by the sweep's own stages from the config file, the
data, the weights and store.sqlite (rebuild.py), and compared with summary.json and results/ whole (diff.py):
a field this check forgot cannot exist. What cannot be recomputed is listed as claimed, not checked (CLAIMED).
Beside that, every data and weights file is hashed again, and every scored answer is checked against the
constraint it was decoded under.

Exit 0: everything matches. Exit 1: one line per mismatch, naming where and both values. Exit 2: the folder is
not a readable sweep folder.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ..backends.fingerprint import file_sha256, forget_hashes
from ..constraints import from_dict, violation
from ..errors import InputError
from ..fileio import jsonl_text
from ..results import ItemRecord, Records, ResultsFolder, RunKey
from ..summary import FileDigest, Provenance, SettingProvenance, Summary
from ..tasks import make_task, task_names
from ..tasks.base import Task
from .diff import diff
from .rebuild import Rebuilt, rebuild

CLAIMED = (
    "timings (summary.timings) and each run's throughput: wall-clock, rates, token counts and peak memory",
    "the sweep's clock (started, ended), its command line and what ran it: offline-eval's version, the git "
    "revision, Python, the OS, the CPU, the GPUs and the engine libraries installed",
    "each load's engine version and a served model's identity (the store is read under them: no engine runs)",
    "what each load's engine start did (provenance.loads[].engine_start: vLLM compiled or reused its compile cache)",
    "why a failed run failed (that it failed is checked: the store lacks outputs it needed)",
)
OK = (
    "OK (summary.json and every results file rebuilt from the store, the data, the config and the weights match; "
    "every constrained answer keeps its constraint)"
)
# Lists written in the order things happened, where the order carries no meaning.
_ORDERLESS = frozenset({"provenance.loads", "provenance.settings", "failures"})
_MAX_LINES_PER_FILE = 20


def verify(out_dir: str | Path) -> list[str]:
    """The mismatches, one line each (empty: everything matches). A folder that is not a sweep's is InputError."""
    folder = ResultsFolder(Path(out_dir))
    if not folder.root.is_dir():
        raise InputError("not a folder", file=str(folder.root))
    summary = Summary.read(folder.summary)
    if summary.provenance is None:
        why = (
            f" (schema version {summary.migrated_from} recorded none: which config, data and weights made it is "
            "unknown); re-run the sweep into this folder with its config (its store serves every output, nothing "
            "is generated again), then verify that"
            if summary.migrated_from is not None
            else ""
        )
        raise InputError(f"summary.json has no provenance to check against{why}", file=str(folder.summary))
    forget_hashes()  # every file is read again, whatever this process hashed before
    problems = list(_files(summary.provenance))
    again = rebuild(folder, summary)
    problems += again.problems
    if again.summary is None:
        return problems
    if summary.migrated_from is None:
        problems += _report(folder, again)
    else:  # an older version rendered it: what it draws may differ without any number differing
        print(
            f"offline-eval: {folder.report_md.name}, {folder.report_html.name} and plots/ were rendered by an older "
            f"offline-eval: not compared (`offline-eval report {folder.root}` renders them again)",
            file=sys.stderr,
        )
    again.summary.timings = summary.timings  # claimed: wall-clock
    _recorded_since(summary, again.summary)
    problems += [
        f"summary.json: {line}"
        for line in diff(summary.model_dump(mode="json"), again.summary.model_dump(mode="json"), orderless=_ORDERLESS)
    ]
    problems += _results(folder, again.records)
    assert again.summary.provenance is not None
    problems += _constraints(again.records, again.summary.provenance.settings)
    return problems


def _files(prov: Provenance) -> Iterator[str]:
    for s in prov.settings:
        for f in s.data_files:
            if why := _changed(Path(f.path), f):
                yield f"setting {s.setting}: data file {f.path} {why}"
    for load in prov.loads:
        for f in load.files or []:
            root = Path(load.path)
            path = root if root.name == f.path and not root.is_dir() else root / f.path
            if why := _changed(path, f):
                yield f"load {load.run}: weights file {path} {why}"


def _changed(path: Path, f: FileDigest) -> str | None:
    if not path.is_file():
        return "is missing"
    size = path.stat().st_size
    digest = file_sha256(path)
    if digest != f.sha256:
        return f"changed: sha256 {f.sha256[:16]}… ({f.size} bytes) in the summary, {digest[:16]}… ({size} bytes) now"
    return None


def _results(folder: ResultsFolder, records: Records[ItemRecord]) -> list[str]:
    """Each results file against the records the rebuild made, byte for byte; a file no run makes is named."""
    out: list[str] = []
    expected = {folder.results_file(key).resolve(): key for key in records}
    top = folder.root / "results"
    found = sorted(p for p in top.rglob("*") if not p.is_dir() or p.suffix == ".jsonl") if top.is_dir() else []
    for p in found:
        if p.resolve() not in expected:
            out.append(f"{p}: a results file that no run of the rebuilt summary writes")
    for key in sorted(expected.values()):
        out += _results_file(folder.results_file(key), key, records[key])
    return out


def _results_file(path: Path, key: RunKey, recs: list[ItemRecord]) -> list[str]:
    want = jsonl_text(r.to_json() for r in recs)
    if path.is_dir():
        return [f"{path}: is a folder where the results file of {key} belongs"]
    if not path.is_file():
        return [f"{path}: missing (the rebuild makes {len(recs)} records for {key})"]
    got = path.read_bytes()
    if got == want.encode("utf-8"):
        return []
    try:
        text = got.decode("utf-8")
    except UnicodeDecodeError as e:
        return [f"{path}: not UTF-8 text ({e})"]
    mine, theirs = text.split("\n"), want.split("\n")
    out = []
    if len(mine) != len(theirs):
        out.append(f"{path}: {len(mine) - 1} lines in the file, {len(theirs) - 1} records in the rebuild")
    for i, (a, b) in enumerate(zip(mine, theirs), 1):
        if a == b:
            continue
        rid = recs[i - 1].id if i - 1 < len(recs) else "?"
        try:
            parsed = json.loads(a)
        except json.JSONDecodeError as e:
            out.append(f"{path}: line {i} (record {rid}): not a JSON record ({e.msg})")
            continue
        lines = list(diff(parsed, json.loads(b), what="the rebuild from the store"))
        out += [f"{path}: line {i} (record {rid}): {x}" for x in lines or ["written otherwise (same values)"]]
        if len(out) > _MAX_LINES_PER_FILE:
            return [*out[:_MAX_LINES_PER_FILE], f"{path}: … and more lines that differ"]
    return out


def _report(folder: ResultsFolder, again: Rebuilt) -> list[str]:
    """report.md, report.html and plots/ rendered again from the rebuilt summary, as the sweep rendered them (with
    the prompts and diffs of its plan) or as `offline-eval report` does (from the summary alone)."""
    from ..report import write_report
    from ..report.inputs import from_plan

    assert again.summary is not None and again.plan is not None
    made = _rendered(folder)
    if not made:
        return [f"{folder.report_md}: missing (the sweep writes a report)"]
    differ: list[str] = []
    for inputs in (from_plan(again.plan.tasks, again.records), None):
        with tempfile.TemporaryDirectory() as tmp:
            for key, recs in again.records.items():  # the item browser reads the results files
                ResultsFolder(Path(tmp)).write_records(key, recs)
            write_report(tmp, again.summary, inputs)
            want = _rendered(ResultsFolder(Path(tmp)))
        differ = sorted(n for n in set(made) | set(want) if made.get(n) != want.get(n))
        if not differ:
            return []
    return [f"{folder.root / n}: differs from the report rendered from the rebuilt summary" for n in differ]


def _rendered(folder: ResultsFolder) -> dict[str, bytes]:
    files = [folder.report_md, folder.report_html, *sorted(folder.plots.glob("*"))]
    return {str(p.relative_to(folder.root)): p.read_bytes() for p in files if p.is_file()}


def _constraints(records: Records[ItemRecord], settings: list[SettingProvenance]) -> list[str]:
    """Every scored answer against the constraint its setting was decoded under (the judges' against theirs): the
    store may hold an answer no engine could have given under it."""
    out = []
    by_name = {s.setting: s for s in settings}
    tasks: dict[str, Task] = {}
    for key, recs in sorted(records.items()):
        s = by_name.get(key.setting)
        if s is None or s.task not in task_names():
            continue
        if key.setting not in tasks:
            tasks[key.setting] = make_task(s.task, s.task_options, source="summary.json provenance")
        stage = tasks[key.setting].evaluation()
        own = from_dict(s.constraint) if s.constraint else None
        judged = from_dict(s.evaluation_constraint) if s.evaluation_constraint else None
        for rec in recs:
            if own is not None and rec.parsed is not None and not rec.skipped and (why := violation(own, rec.output)):
                out.append(f"{key}: record {rec.id}: the parsed answer breaks its constraint ({why})")
            for text in stage.answers(rec) if stage else []:
                if judged is not None and (why := violation(judged, text)):
                    out.append(f"{key}: record {rec.id}: a scored evaluator answer breaks its constraint ({why})")
    return out


def _recorded_since(claimed: Summary, rebuilt: Summary) -> None:
    """What a folder made before a field was recorded lacks is not a mismatch: the rebuild leaves it out too
    (each setting's item digests, recorded since schema version 4's tool)."""
    assert claimed.provenance is not None and rebuilt.provenance is not None
    had = {(s.task, s.setting): s.item_digests for s in claimed.provenance.settings}
    for s in rebuilt.provenance.settings:
        if (s.task, s.setting) in had and had[(s.task, s.setting)] is None:
            s.item_digests = None
