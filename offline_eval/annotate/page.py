"""The annotation page: one self-contained HTML file that opens from disk (no server, no network: its Content
Security Policy allows no connection and runs only its own script, by hash). Cases travel as an inline JSON
payload whose every <, >, & and line separator is escaped; the script renders every text with textContent. Blind,
the payload holds no run name, judge score or rationale: those are in the reveal file written beside the page,
which the annotator may load into it (a file input, read in the browser) to see each output's once they have
scored it."""

from __future__ import annotations

import base64
import hashlib
import html
from dataclasses import asdict
from importlib import resources
from typing import Any

from offline_eval.runtime.fileio import script_json
from offline_eval.runtime.i18n import N_, _
from offline_eval.tasks.kit.annotation import Case, Form

# What page.js writes, by key: each translated here (the current language) into the payload's "text", whose
# {fields} page.js fills in.
SCRIPT_TEXT = {
    "storage": N_("This browser refused to keep the progress ({error}): export before closing the page."),
    "progress": N_("done {done} · skipped {skipped} · left {left} (of {total})"),
    "comment": N_("comment (optional)"),
    "invalid": N_("{name} ({code}): give a whole number from {lo} to {hi}"),
    "heading": N_("Output {at} of {total}: {stratum} / {item}"),
    "prompt": N_("The candidate's prompt"),
    "gold": N_("The gold answer (show)"),
    "save": N_("Save my scores"),
    "save_again": N_("Save again"),
    "saved": N_("Saved."),
    "skip": N_("Skip"),
    "revealed": N_("Revealed now that you have scored"),
    "unblind": N_("Not blind (--unblind)"),
    "unrevealed": N_(
        "Saved. Which run wrote this output, and the sweep's scores for it, are in the reveal file ({file}): load it "
        "above to see them for the outputs you have scored."
    ),
    "no_annotator": N_("Give your name as the annotator first: every exported row carries it."),
    "nothing": N_("Nothing to export yet: save your scores for an output first."),
    "exported": N_("Exported {rows} row(s) to {file}: one file per annotator, give them all to the sweep."),
    "not_reveal": N_("{file} is not a reveal file ({reveal_file} is this page's)."),
    "other_sample": N_("{file} is the reveal file of sample {sample}, not of this page's {page_sample}."),
    "loaded": N_("Loaded {file}: each output's run and scores show once you have saved yours."),
}

# The page's own labels and buttons, translated where the page is written.
_PAGE_TEXT = {
    "reveal": N_("Reveal file"),
    "annotator": N_("Annotator"),
    "previous": N_("Previous"),
    "next": N_("Next"),
    "export": N_("Export your scores"),
}


def reveal(sid: str, task: str, cases: list[Case]) -> dict[str, Any]:
    """The reveal file's content: each case's run and hidden documents, by case id."""
    return {"sample": sid, "task": task, "cases": {c.case_id(sid): c.reveal() for c in cases}}


def page(
    title: str,
    sid: str,
    task: str,
    form: Form,
    cases: list[Case],
    annotator: str,
    blind: bool,
    prefill: dict[str, Any],
    reveal_file: str,
    warnings: list[str],
    draw: str = "random",
) -> str:
    """`draw`: the sample's design, which every exported row carries: "random" (the seeded draw) or "picked"
    (--items); the sweep calibrates judged numbers only with random ones (docs/calibration.md)."""
    script = resources.files(__package__).joinpath("page.js").read_text(encoding="utf-8")
    style = resources.files(__package__).joinpath("page.css").read_text(encoding="utf-8")
    payload = {
        "sample": sid,
        "task": task,
        "form": asdict(form),
        "annotator": annotator,
        "blind": blind,
        "cases": [c.to_page(sid) for c in cases],
        "prefill": prefill,
        "reveal_file": reveal_file,
        "draw": draw,
        "reveal": None if blind else reveal(sid, task, cases),  # --unblind: shown from the start, so inline
        "text": {k: _(v) for k, v in SCRIPT_TEXT.items()},  # unformatted: page.js fills the fields in
    }
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    csp = f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:; connect-src 'none'"
    blind_note = (
        _(
            "Blind: this page does not hold which run wrote an output, nor the scores the sweep gave it. Load the "
            "reveal file ({file}) to see an output's once you have saved your scores for it.",
            file=reveal_file,
        )
        if blind
        else _("Not blind (--unblind): the run and the sweep's scores are shown from the start.")
    )
    kept = _(
        "Your progress is kept in this browser (closing the page loses nothing); Export downloads what you have saved."
    )
    e = html.escape
    w = {k: _(v) for k, v in _PAGE_TEXT.items()}
    loader = (
        f'<label>{e(w["reveal"])} <input id="reveal" type="file" accept=".json,application/json" '
        f'title="{e(reveal_file)}"></label>'
        if blind
        else ""
    )
    warned = "".join(f'<p class="warning">{html.escape(w)}</p>' for w in warnings)
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="ja"><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="{csp}">'
        f"<title>{html.escape(title)}</title><style>{style}</style></head><body>\n"
        f"<header><h1>{e(title)}</h1><p>{e(blind_note)} {e(kept)}</p>{warned}</header>\n"
        f'<nav><label>{e(w["annotator"])} <input id="annotator" type="text" autocomplete="name"></label>{loader}'
        f'<button id="prev" type="button">{e(w["previous"])}</button> <select id="pick"></select> '
        f'<button id="next" type="button">{e(w["next"])}</button>'
        f'<span id="progress"></span> <button id="export" type="button">{e(w["export"])}'
        '</button><div id="message" role="status"></div></nav>\n'
        '<main id="case"></main>\n'
        f'<script type="application/json" id="payload">{script_json(payload)}</script>\n'
        f"<script>{script}</script>\n</body></html>\n"
    )
