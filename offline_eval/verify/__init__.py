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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from offline_eval.inference.constraints import from_dict, violation
from offline_eval.modelfiles.fingerprint import file_sha256, forget_hashes
from offline_eval.pipeline.build import from_plan
from offline_eval.report import write_report
from offline_eval.report.write import REPORT_FORMAT, report_format, report_language
from offline_eval.results.records import ItemRecord, Records, ResultsFolder, RunKey
from offline_eval.results.summary import FileDigest, Provenance, SettingProvenance, Summary
from offline_eval.runtime.errors import InputError
from offline_eval.runtime.fileio import jsonl_text
from offline_eval.tasks import get_task_class, read_summary, recorded_task, task_names
from offline_eval.tasks.base import Task
from offline_eval.tasks.kit.protocol import unrecorded

from .diff import diff
from .rebuild import Rebuilt, rebuild

CLAIMED = (
    "timings (summary.timings) and each run's throughput: wall-clock, rates, token counts and peak memory",
    "the sweep's clock (started, ended), its command line (its --only, --tasks and --limit say which runs it "
    "planned) and what ran it: offline-eval's version, the git revision, Python, the OS, the CPU, the GPUs and the "
    "engine libraries installed",
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
    summary = read_summary(folder.summary)
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
    _claimed_order(summary, again.summary)
    drawn = report_format(folder.report_md) if folder.report_md.is_file() else REPORT_FORMAT
    if summary.migrated_from is None and drawn == REPORT_FORMAT:
        problems += _report(folder, again)
    else:  # an older version rendered it: what it draws may differ without any number differing
        print(
            f"offline-eval: {folder.report_md.name}, {folder.report_html.name} and plots/ were rendered by an older "
            f"offline-eval (report format {drawn}, this one draws {REPORT_FORMAT}): not compared "
            f"(`offline-eval report {folder.root}` renders them again)",
            file=sys.stderr,
        )
    again.summary.timings = summary.timings  # claimed: wall-clock
    if summary.migrated_from is not None:
        _recorded_since(summary, again.summary)
    _options_added_since(summary, again.summary)
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
    """One line per record that differs, naming the file, the line and the record; a line the rebuild has no record
    for (extra), a record the file has no line for (missing) and a line that is not UTF-8 or not JSON are lines
    too, never a crash."""
    want = jsonl_text(r.to_json() for r in recs)
    if path.is_dir():
        return [f"{path}: is a folder where the results file of {key} belongs"]
    if not path.is_file():
        return [f"{path}: missing (the rebuild makes {len(recs)} records for {key})"]
    try:
        got = path.read_bytes()
    except OSError as e:
        return [f"{path}: unreadable ({e.strerror or e})"]
    if got == want.encode("utf-8"):
        return []
    mine, theirs = _lines(got), want.encode("utf-8").split(b"\n")[:-1]
    out: list[str] = []
    for i, (a, b) in enumerate(zip(mine, theirs), 1):
        if a != b:
            out += _record_lines(path, i, recs[i - 1].id, a, b)
        if len(out) > _MAX_LINES_PER_FILE:
            return [*out[:_MAX_LINES_PER_FILE], f"{path}: … and more lines that differ"]
    n, m = len(mine), len(theirs)
    if n > m:
        extra = "a line" if n - m == 1 else f"{n - m} lines from here on"
        out.append(f"{path}: line {m + 1}: {extra} the rebuild does not make ({n} lines in the file, {m} records)")
    elif n < m:
        more = f" and {m - n - 1} more after it" if m - n > 1 else ""
        out.append(
            f"{path}: line {n + 1}: missing (the rebuild makes record {recs[n].id} there{more}; {n} lines in the "
            f"file, {m} records in the rebuild)"
        )
    if not out:  # the same records; only how the file ends differs
        out.append(f"{path}: line {n}: written otherwise (no line break at its end)")
    return out


def _lines(data: bytes) -> list[bytes]:
    """A JSON Lines file's lines, the line break ending the last one not counted as another (empty) line."""
    lines = data.split(b"\n")
    return lines[:-1] if lines and lines[-1] == b"" else lines


def _record_lines(path: Path, i: int, rid: str, line: bytes, wanted: bytes) -> list[str]:
    where = f"{path}: line {i} (record {rid})"
    try:
        parsed = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as e:
        return [f"{where}: not UTF-8 text ({e.reason} at byte {e.start})"]
    except json.JSONDecodeError as e:
        return [f"{where}: not a JSON record ({e.msg})"]
    except RecursionError:
        return [f"{where}: not a JSON record (nested too deep to read)"]
    lines = list(diff(parsed, json.loads(wanted), what="the rebuild from the store"))
    return [f"{where}: {x}" for x in lines or ["written otherwise (same values)"]]


def _report(folder: ResultsFolder, again: Rebuilt) -> list[str]:
    """report.md, report.html and plots/ rendered again from the rebuilt summary, as the sweep rendered them (with
    the prompts and diffs of its plan) or as `offline-eval report` does (from the summary alone)."""

    assert again.summary is not None and again.plan is not None
    made = _rendered(folder)
    if not made:
        return [f"{folder.report_md}: missing (the sweep writes a report)"]
    differ: list[str] = []
    for inputs in (from_plan(again.plan.tasks, again.records), None):
        with tempfile.TemporaryDirectory() as tmp:
            for key, recs in again.records.items():  # the item browser reads the results files
                ResultsFolder(Path(tmp)).write_records(key, recs)
            write_report(tmp, again.summary, inputs, report_language(folder.report_md))
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
            tasks[key.setting] = recorded_task(s.task, s.task_options, source="summary.json provenance")
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


def _claimed_order(claimed: Summary, rebuilt: Summary) -> None:
    """The lists whose order is that of events (_ORDERLESS: a folder several sweeps wrote lists the last sweep's
    loads first) put in the order summary.json has them, as the report shows them; the comparison ignores it."""

    def ordered(mine: list[Any], theirs: list[Any], name: Callable[[Any], str]) -> list[Any]:
        place = {name(x): i for i, x in enumerate(theirs)}
        return sorted(mine, key=lambda x: place.get(name(x), len(place)))

    rebuilt.failures = ordered(rebuilt.failures, claimed.failures, lambda f: f.run)
    if claimed.provenance is not None and rebuilt.provenance is not None:
        a, b = rebuilt.provenance, claimed.provenance
        a.loads = ordered(a.loads, b.loads, lambda x: f"{x.role} {x.run}")
        a.settings = ordered(a.settings, b.settings, lambda x: x.setting)


def _options_added_since(claimed: Summary, rebuilt: Summary) -> None:
    """A task option the folder's settings do not name (one added to offline-eval since it was swept, such as
    `protocol`) is not a mismatch where the rebuild gives it the value the sweep ran (its default, or what the
    option declares runs before it existed ran: `protocol`'s is offline-eval), as the rebuild of every output from
    the store under it shows. Set to anything else, it is compared as usual."""

    assert claimed.provenance is not None and rebuilt.provenance is not None
    had = {(s.task, s.setting): s.task_options for s in claimed.provenance.settings}
    for s in rebuilt.provenance.settings:
        old = had.get((s.task, s.setting))
        if old is None or s.task not in task_names():
            continue
        fields = get_task_class(s.task).Options.model_fields
        for key in [k for k in s.task_options if k not in old and k in fields]:
            if json.loads(json.dumps(unrecorded(fields[key]), default=str)) == s.task_options[key]:
                del s.task_options[key]


def _recorded_since(claimed: Summary, rebuilt: Summary) -> None:
    """What a migrated folder (an older schema version, read forward) was made without is not a mismatch: the
    rebuild leaves it out too (each setting's item digests, recorded since schema version 4). Only there: in a
    folder of the current schema a null where the schema promises a value is a mismatch like any other, since
    every schema-4 sweep records them (what `compare --allow-changed-data` relies on)."""
    assert claimed.provenance is not None and rebuilt.provenance is not None
    if claimed.migrated_from is not None and claimed.migrated_from < 5:  # made before calibration (schema 5)
        rebuilt.calibration, rebuilt.calibration_notes = [], {}
        for m in rebuilt.noninferiority:
            for c in [*m.comparisons, *m.adapter_transfer]:
                c.scale = c.scale_note = None
        for rows in rebuilt.leaderboards.values():
            for row in rows:
                (row.model_extra or {}).pop("calibration", None)
    had = {(s.task, s.setting): s.item_digests for s in claimed.provenance.settings}
    for s in rebuilt.provenance.settings:
        if (s.task, s.setting) in had and had[(s.task, s.setting)] is None:
            s.item_digests = None
