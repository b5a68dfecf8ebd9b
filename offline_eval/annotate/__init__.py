"""`offline-eval annotate DIR --task T`: a sample of a finished sweep's outputs, written as one self-contained HTML
page on which a lawyer scores them (blind by default: the page names each output by an opaque case id, and the
runs and the judges' scores go to a reveal file beside it); its export is the file the task reads back or trains
on, from which the sweep finds each case's run again."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from offline_eval.runtime.fileio import write_json_atomic, write_text_atomic
from offline_eval.runtime.i18n import _, language

from .page import page, reveal
from .sample import changed_data, offered, read_sweep, resumed, sample, sample_id


@dataclass(frozen=True)
class Written:
    page: Path
    reveal: Path  # each case's run and the sweep's scores for it, by case id
    n: int  # outputs on the page
    sample: str
    warnings: list[str]  # data changed since the sweep (--allow-changed-data), as the page says


def annotate(
    out_dir: str,
    task: str,
    n: int = 30,
    seed: int = 0,
    runs: list[str] | None = None,
    items: str | None = None,
    annotator: str = "",
    out: str | None = None,
    blind: bool = True,
    resume: list[str] | None = None,
    allow_changed_data: bool = False,
    config: str | None = None,
    lang: str | None = None,
) -> Written:
    """Writes the page and its reveal file. `config`: the sweep's config, for a folder whose summary.json records
    no provenance (schema version 2): the data is read as it names it, unchecked against the sweep's. `lang`: the
    language of the page and of its warnings (None: English); the export and the reveal file are the same in every
    language."""
    with language(lang):
        summary = read_sweep(out_dir)
        warnings = changed_data(summary, task, out_dir, allow_changed_data)
        made, cases = offered(summary, task, out_dir, config)
        recorded = {s.setting for s in (summary.provenance.settings if summary.provenance else [])}
        if any(r.task == task and r.setting not in recorded for r in summary.runs):  # made from --config's data
            warnings.append(
                _(
                    "summary.json recorded no digest of the data the sweep read: this page shows the data {config} "
                    "names as it is now, and cannot tell whether it changed since the sweep.",
                    config=config,
                )
            )
        chosen = sample(cases, n, seed, runs, items)
        form = made.annotation_form
        assert form is not None  # offered() refuses a task without one
        sid = sample_id(task, chosen)
        prefill = resumed(resume or [], form, sid, chosen)
        path = Path(out) if out else Path(out_dir) / f"annotate-{task}-{sid}.html"
        key = path.with_name(f"{path.stem}.reveal.json")
        title = _(
            "offline-eval: annotate {task} ({n} outputs, sample {sample})", task=made.title or made.name, n=len(chosen),
            sample=sid,
        )  # fmt: skip
        write_json_atomic(key, reveal(sid, task, chosen))
        draw = "picked" if items is not None else "random"
        write_text_atomic(
            path, page(title, sid, task, form, chosen, annotator, blind, prefill, key.name, warnings, draw)
        )
        return Written(path, key, len(chosen), sid, warnings)
