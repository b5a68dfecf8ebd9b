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
from offline_eval.tasks.kit.annotation import Case, Form


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
    }
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    csp = f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:; connect-src 'none'"
    blind_note = (
        "Blind: this page does not hold which run wrote an output, nor the scores the sweep gave it. Load the "
        f"reveal file ({reveal_file}) to see an output's once you have saved your scores for it."
        if blind
        else "Not blind (--unblind): the run and the sweep's scores are shown from the start."
    )
    loader = (
        f'<label>Reveal file <input id="reveal" type="file" accept=".json,application/json" '
        f'title="{html.escape(reveal_file)}"></label>'
        if blind
        else ""
    )
    warned = "".join(f'<p class="warning">{html.escape(w)}</p>' for w in warnings)
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="ja"><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="{csp}">'
        f"<title>{html.escape(title)}</title><style>{style}</style></head><body>\n"
        f"<header><h1>{html.escape(title)}</h1><p>{html.escape(blind_note)} Your progress is kept in this "
        f"browser (closing the page loses nothing); Export downloads what you have saved.</p>{warned}</header>\n"
        f'<nav><label>Annotator <input id="annotator" type="text" autocomplete="name"></label>{loader}'
        '<button id="prev" type="button">Previous</button> <select id="pick"></select> '
        '<button id="next" type="button">Next</button>'
        '<span id="progress"></span> <button id="export" type="button">Export your scores'
        '</button><div id="message" role="status"></div></nav>\n'
        '<main id="case"></main>\n'
        f'<script type="application/json" id="payload">{script_json(payload)}</script>\n'
        f"<script>{script}</script>\n</body></html>\n"
    )
