"""The annotation page: one self-contained HTML file that opens from disk (no server, no network: its Content
Security Policy allows no connection and runs only its own script, by hash). Cases travel as an inline JSON
payload whose every <, >, & and line separator is escaped; the script renders every text with textContent."""

from __future__ import annotations

import base64
import hashlib
import html
from dataclasses import asdict
from importlib import resources
from typing import Any

from ..annotation import Case, Form
from ..fileio import script_json


def page(title: str, sid: str, task: str, form: Form, cases: list[Case], annotator: str, blind: bool,
         prefill: dict[str, Any]) -> str:  # fmt: skip
    script = resources.files(__package__).joinpath("page.js").read_text(encoding="utf-8")
    style = resources.files(__package__).joinpath("page.css").read_text(encoding="utf-8")
    payload = {
        "sample": sid,
        "task": task,
        "form": asdict(form),
        "annotator": annotator,
        "blind": blind,
        "cases": [c.to_json() for c in cases],
        "prefill": prefill,
    }
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    csp = f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:; connect-src 'none'"
    blind_note = (
        "Blind: which run wrote an output, and the scores the sweep gave it, are shown once you have saved yours."
        if blind
        else "Not blind (--unblind): the run and the sweep's scores are shown from the start."
    )
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="ja"><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="{csp}">'
        f"<title>{html.escape(title)}</title><style>{style}</style></head><body>\n"
        f"<header><h1>{html.escape(title)}</h1><p>{html.escape(blind_note)} Your progress is kept in this "
        "browser (closing the page loses nothing); Export downloads what you have saved.</p></header>\n"
        '<nav><label>Annotator <input id="annotator" type="text" autocomplete="name"></label>'
        '<button id="prev" type="button">Previous</button> <select id="pick"></select> '
        '<button id="next" type="button">Next</button>'
        '<span id="progress"></span> <button id="export" type="button">Export your scores'
        '</button><div id="message" role="status"></div></nav>\n'
        '<main id="case"></main>\n'
        f'<script type="application/json" id="payload">{script_json(payload)}</script>\n'
        f"<script>{script}</script>\n</body></html>\n"
    )
