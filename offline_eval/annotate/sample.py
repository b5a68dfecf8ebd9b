"""The outputs of a finished sweep that a task offers for annotation, and a sample of them: stratified over the
task's strata (e.g. LegalRikai's sub-tasks) and the runs, seeded, or the item/run pairs the user lists. Each
case carries the prompt its candidate was given, rebuilt from the data the sweep read (its provenance), which must
not have changed since (`changed_data`)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

from offline_eval.modelfiles.fingerprint import file_sha256
from offline_eval.pipeline.config import load_config
from offline_eval.results.records import ResultsFolder, sample_of
from offline_eval.results.summary import Summary
from offline_eval.runtime.errors import InputError
from offline_eval.runtime.i18n import N_, _
from offline_eval.tasks import get_task_class, make_task, read_summary, recorded_task, task_classes
from offline_eval.tasks.base import Task
from offline_eval.tasks.kit.annotation import Case, Form
from offline_eval.tasks.kit.datafiles import read_table, read_text, unescape_cell


def read_sweep(out_dir: str) -> Summary:
    folder = Path(out_dir)
    if not folder.is_dir():
        raise InputError("no such folder", file=out_dir)
    if not (folder / "summary.json").is_file():
        raise InputError("no summary.json: not the output folder of a finished sweep (run a sweep first)", file=out_dir)
    return read_summary(folder / "summary.json")


def changed_data(summary: Summary, task_name: str, source: str, allow: bool) -> list[str]:
    """The task's data files that differ from the digests the sweep recorded (summary.json's provenance): refused,
    since the page would show today's documents beside outputs made from the old ones; with `allow`, the warnings
    the page shows. Files the page is not built from (LegalRikai's human_scores, LegalEval-Q's scorer: a task's
    path options other than `data`) may change: a second round of annotation often follows a first."""
    prov = summary.provenance
    seen: dict[str, str] = {}
    warned: dict[str, str] = {}  # the page's warning for each changed file, in the current language
    for s in prov.settings if prov else []:
        if s.task != task_name:
            continue
        others = _other_inputs(s.task_options, get_task_class(task_name).path_options)
        for f in s.data_files:
            p = Path(f.path)
            if f.path in seen or any(p == o or o in p.parents for o in others):
                continue
            seen[f.path] = ""
            if not p.is_file():
                seen[f.path] = "is missing"
                warned[f.path] = _(_MISSING, path=f.path)
                continue
            size = p.stat().st_size
            digest = file_sha256(p) if size == f.size else ""
            if digest != f.sha256:
                seen[f.path] = (
                    f"changed since the sweep (sha256 {f.sha256[:12]}…, {f.size} bytes, in its summary.json; "
                    + (f"{digest[:12]}… now)" if digest else f"{size} bytes now)")
                )
                was = {"path": f.path, "sha256": f.sha256[:12], "size": f.size}
                warned[f.path] = _(_CHANGED, now=digest[:12], **was) if digest else _(_RESIZED, now_size=size, **was)
    changed = {k: v for k, v in seen.items() if v}
    if changed and not allow:
        path, why = next(iter(changed.items()))
        more = f" (and {len(changed) - 1} more data file(s))" if len(changed) > 1 else ""
        raise InputError(
            f"{why}{more}: the page would show the data as it is now beside outputs made from it as it was; run the "
            "sweep again, or give --allow-changed-data to annotate anyway (the page then says so)",
            file=path,
            field="data_files",
        )
    return [warned[path] for path in changed]


# The page's warning for a data file that changed since the sweep (--allow-changed-data), one sentence each.
_MISSING = N_(
    "The data changed since the sweep: {path} is missing. This page shows the documents, gold answers and prompts "
    "as the data is now, beside outputs made from it as it was (--allow-changed-data)."
)
_CHANGED = N_(
    "The data changed since the sweep: {path} changed since the sweep (sha256 {sha256}…, {size} bytes, in its "
    "summary.json; {now}… now). This page shows the documents, gold answers and prompts as the data is now, beside "
    "outputs made from it as it was (--allow-changed-data)."
)
_RESIZED = N_(
    "The data changed since the sweep: {path} changed since the sweep (sha256 {sha256}…, {size} bytes, in its "
    "summary.json; {now_size} bytes now). This page shows the documents, gold answers and prompts as the data is "
    "now, beside outputs made from it as it was (--allow-changed-data)."
)


def _other_inputs(options: dict[str, Any], keys: tuple[str, ...]) -> list[Path]:
    values = [options.get(k) for k in keys if k != "data"]
    return [Path(str(x)).resolve() for v in values for x in (v if isinstance(v, list) else [v]) if x]


def offered(summary: Summary, task_name: str, source: str, config: str | None = None) -> tuple[Task, list[Case]]:
    """Every output of the task's runs in this sweep that the task offers for annotation, with its prompt. The
    task's options are those its provenance recorded, or, for a folder that recorded none (schema version 2),
    those of the sweep's `config`."""
    annotatable = [c.name for c in task_classes() if c.annotation_form is not None]
    if task_name not in annotatable:
        raise InputError(
            f"'{task_name}' offers nothing to annotate; tasks that do: {', '.join(annotatable)}", field="--task"
        )
    cls = get_task_class(task_name)
    entries = [r for r in summary.runs if r.task == task_name]
    if not entries:
        raise InputError(f"the sweep has no {task_name} runs (it ran: {_ran(summary)})", file=source)
    prov = summary.provenance
    settings = {s.setting: s for s in (prov.settings if prov else []) if s.task == task_name}
    missing = sorted({r.setting for r in entries} - set(settings))
    if missing and config is None:
        raise InputError(
            f"summary.json has no provenance for {', '.join(missing)}: which data made the prompts is unknown; give "
            "the sweep's config with --config, or run the sweep again (its store serves every output)",
            file=source,
        )
    folder = ResultsFolder(Path(source))
    if missing:
        assert config is not None
        options = load_config(config).tasks.get(task_name)
        if options is None:
            raise InputError(f"the config has no task '{task_name}'", file=config, field="tasks")
        task = make_task(task_name, options, config)
    else:
        task = recorded_task(task_name, next(iter(settings.values())).task_options, source)
    loaded = task.load()
    cases: list[Case] = []
    for entry in sorted(entries, key=lambda r: r.key):
        records = folder.read_records(entry.key, cls.Record.from_json) or []
        chosen = list(task.setting_items(loaded, entry.options))
        phase = task.build(chosen, entry.options)
        # The setting's own items by id (an id may repeat across LegalRikai's sub-tasks), and one request per item,
        # in the items' order (as the item browser reads them).
        items = {it.id: it for it in chosen}
        prompts = dict(zip(items, zip(phase.requests, phase.fallbacks or [None] * len(phase.requests))))
        for rec in records:
            if sample_of(rec):  # an item answered k times is annotated on its first answer
                continue
            item = items.get(str(rec.id))
            case = task.annotation_case(entry, item, rec) if item is not None else None
            if case is None:
                continue
            request, fallback = prompts.get(str(rec.id), (None, None))
            if cls.report_parts.browser_view(rec).focused and fallback is not None:
                request = fallback
            if request is not None:
                case.prompt = [(role, text) for role, text in request.messages or (("prompt", request.prompt or ""),)]
            cases.append(case)
    if not cases:
        raise InputError(
            f"the sweep's {task_name} runs have no outputs to annotate (every input was skipped)", file=source
        )
    return task, cases


def _ran(summary: Summary) -> str:
    return ", ".join(sorted({r.task for r in summary.runs})) or "nothing"


def sample(cases: list[Case], n: int, seed: int, runs: list[str] | None, picks: str | None) -> list[Case]:
    """n cases, as even as the strata allow: each (stratum, run) group shuffled with the seed, then taken in turn,
    each round crossing every stratum with a different run;
    or the cases `picks` lists (a CSV or text file of run,item_id lines)."""
    if runs:
        unknown = sorted(set(runs) - {c.run for c in cases})
        if unknown:
            have = ", ".join(sorted({c.run for c in cases}))
            raise InputError(
                f"no outputs of {', '.join(unknown)} to annotate (runs with outputs: {have})", field="--runs"
            )
        cases = [c for c in cases if c.run in runs]
    if picks is not None:
        return _picked(cases, picks)
    if n < 1:
        raise InputError(f"{n}: give at least 1 output to annotate", field="--sample")
    if n > len(cases):
        raise InputError(f"{n}: the sweep has {len(cases)} outputs to annotate; ask for at most that", field="--sample")
    rng = random.Random(seed)
    groups: dict[tuple[str, str], list[Case]] = defaultdict(list)
    for c in cases:
        groups[(c.stratum, c.run)].append(c)
    for g in groups.values():
        g.sort(key=lambda c: c.item_id)
        rng.shuffle(g)
    strata = sorted({s for s, _ in groups})
    run_names = sorted({r for _, r in groups})
    rng.shuffle(strata)
    rng.shuffle(run_names)
    # Round j pairs the i-th stratum with run i + j: the first picks cross strata and runs alike (a Latin square).
    order = [
        groups[(st, run_names[(i + j) % len(run_names)])]
        for j in range(len(run_names))
        for i, st in enumerate(strata)
        if (st, run_names[(i + j) % len(run_names)]) in groups
    ]
    out: list[Case] = []
    while len(out) < n:
        for g in order:
            if g and len(out) < n:
                out.append(g.pop(0))
    return out


def _picked(cases: list[Case], path: str) -> list[Case]:
    p = Path(path)
    if not p.is_file():
        raise InputError("no such file", file=path, field="--items")
    by = {(c.run, c.item_id): c for c in cases}
    out = []
    rows = list(csv.reader(io.StringIO(read_text(p), newline="")))
    for i, row in enumerate(rows, 1):
        cells = [unescape_cell(x).strip() for x in row]
        if not any(cells) or (i == 1 and cells[:2] == ["run", "item_id"]):
            continue
        if len(cells) != 2:
            raise InputError("expected two fields: run,item_id", file=path, record=f"line {i}")
        c = by.get((cells[0], cells[1]))
        if c is None:
            raise InputError(
                f"run {cells[0]} has no output to annotate for item {cells[1]}", file=path, record=f"line {i}"
            )
        if c not in out:
            out.append(c)
    if not out:
        raise InputError("lists no run,item_id pair", file=path, field="--items")
    return out


def sample_id(task: str, cases: list[Case]) -> str:
    """The same outputs sampled give the same id, whatever their order; another sweep's outputs another."""
    keys = sorted(f"{c.key}\t{c.output_sha256}" for c in cases)
    return "s-" + hashlib.sha256(json.dumps([task, keys]).encode()).hexdigest()[:12]


def resumed(paths: list[str], form: Form, sid: str, cases: list[Case]) -> dict[str, dict[str, Any]]:
    """Scores an earlier export of this very sample holds, by case id, to start the page from; an export of
    another sample or of other outputs is refused."""
    by_case = {c.case_id(sid): c for c in cases}
    by_run = {(c.run, c.item_id): c for c in cases}  # a row that names its run (a hand-made file)
    out: dict[str, dict[str, Any]] = {}
    for path in paths:
        for where, row in _rows(path):
            if row.get("sample") != sid:
                raise InputError(
                    f"exported from sample {row.get('sample') or '(none)'}, not this page's {sid}: annotate again "
                    "with the --sample, --seed and --runs (or --items) of that export, on the sweep it came from",
                    file=path,
                    record=where,
                    field="sample",
                )
            c = (
                by_case.get(str(row["case"]))
                if row.get("case")
                else by_run.get((str(row.get("model")), str(row.get("item_id"))))
            )
            if c is None or c.output_sha256 != row.get("output_sha256"):
                raise InputError(
                    "scores another output than this sweep's for this item and run: exported from another sweep",
                    file=path,
                    record=where,
                    field="output_sha256",
                )
            got = out.setdefault(c.case_id(sid), {"scores": {}, "comments": {}, "annotator": row.get("annotator")})
            code = str(row.get("criterion") or c.scales[0].code)
            got["scores"][code] = row.get("score")
            if row.get(form.comment_field):
                got["comments"][code] = row[form.comment_field]
    return out


def _rows(path: str) -> list[tuple[str, dict[str, Any]]]:
    p = Path(path)
    if not p.is_file():
        raise InputError("no such file", file=path, field="--resume")
    return read_table(p)
