"""`offline-eval annotate DIR --task T`: a sample of a finished sweep's outputs, written as one self-contained HTML
page on which a lawyer scores them (blind by default); its export is the file the task reads back or trains on."""

from __future__ import annotations

from pathlib import Path

from ..fileio import write_text_atomic
from .page import page
from .sample import offered, read_sweep, resumed, sample, sample_id


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
) -> tuple[Path, int, str]:
    """Writes the page; (its path, the outputs in it, the sample id)."""
    summary = read_sweep(out_dir)
    made, cases = offered(summary, task, out_dir)
    chosen = sample(cases, n, seed, runs, items)
    form = made.annotation_form
    assert form is not None  # offered() refuses a task without one
    sid = sample_id(task, chosen)
    prefill = resumed(resume or [], form, sid, chosen)
    path = Path(out) if out else Path(out_dir) / f"annotate-{task}-{sid}.html"
    title = f"offline-eval: annotate {made.title or made.name} ({len(chosen)} outputs, sample {sid})"
    write_text_atomic(path, page(title, sid, task, form, chosen, annotator, blind, prefill))
    return path, len(chosen), sid
