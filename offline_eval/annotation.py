"""What a task offers for human annotation (`offline-eval annotate`): for each candidate output, the documents the
annotator reads, the gold answer, the scales they score on, what stays hidden until they have scored (the run's
name, the judges' scores), and the fields of the rows the page exports; and the form of that export, the file the
task reads back (LegalRikai's human_scores) or trains on (LegalEval-Q's scorer). Tasks build these; the annotate
command samples them and writes the page."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from .judges import Criterion

# A diff as the item browser draws it: [[op, text], ...], op "=" kept, "+" inserted, "-" deleted, "…" elided.
Segments = list[list[str]]


@dataclass
class Doc:
    """A document on the page, always rendered as text: a title, and its text or a diff."""

    title: str
    text: str = ""
    diff: Segments | None = None
    open: bool = True  # shown unfolded (else behind its title)


@dataclass
class Case:
    """One candidate output to annotate."""

    run: str
    setting: str
    item_id: str
    stratum: str  # what the sample is stratified over besides the run (e.g. the sub-task)
    output: str  # the text annotated: its sha256 ties every score to it
    shown: list[Doc]  # the task input and the candidate's answer
    gold: list[Doc]  # behind a toggle
    scales: list[Criterion]  # one score each, within its scale
    hidden: list[Doc]  # shown once the annotator has saved their scores (blind mode): the judges' scores
    export: dict[str, Any]  # the fixed fields of its exported rows (which item, which run)
    prompt: list[tuple[str, str]] = field(default_factory=list)  # (role, text): what the candidate was asked

    @property
    def key(self) -> str:
        return f"{self.run}\t{self.setting}\t{self.item_id}"

    @property
    def output_sha256(self) -> str:
        return hashlib.sha256(self.output.encode("utf-8", "surrogatepass")).hexdigest()

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(key=self.key, output_sha256=self.output_sha256, scales=[_scale(c) for c in self.scales])
        del out["output"]  # the page shows the output through `shown`; the hash identifies it
        return out


def _scale(c: Criterion) -> dict[str, Any]:
    return {"code": c.code, "name": c.name, "definition": c.definition, "lo": c.lo, "hi": c.hi, "levels": c.scale}


@dataclass(frozen=True)
class Form:
    """How the page exports: one CSV row per scale scored (with `columns` in order), or one JSON line per case;
    every row is the case's `export` fields plus the score (`criterion` and `score` in a CSV row), the annotator,
    their comment (under `comment_field`), the sample id and the output's sha256."""

    file_name: str
    kind: Literal["csv", "jsonl"]
    columns: tuple[str, ...] = ()
    comment_field: str = "comment"
