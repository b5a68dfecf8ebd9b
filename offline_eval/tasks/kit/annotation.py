"""What a task offers for human annotation (`offline-eval annotate`): for each candidate output, the documents the
annotator reads, the gold answer, the scales they score on, what stays hidden until they have scored (the run's
name, the judges' scores), and the fields of the rows the page exports; and the form of that export, the file the
task reads back (LegalRikai's human_scores) or trains on (LegalEval-Q's scorer). Tasks build these; the annotate
command samples them and writes the page, which names each output by its case id only: the run and the hidden
documents go to the reveal file, and the sweep finds the run again from the id (`case_id`)."""

from __future__ import annotations

import hashlib
import json
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
    export: dict[str, Any]  # the fixed fields of its exported rows (which item; never the run: the case id names it)
    prompt: list[tuple[str, str]] = field(default_factory=list)  # (role, text): what the candidate was asked

    @property
    def key(self) -> str:
        return f"{self.run}\t{self.setting}\t{self.item_id}"

    @property
    def output_sha256(self) -> str:
        return output_sha256(self.output)

    def case_id(self, sample: str) -> str:
        return case_id(sample, self.run, self.setting, self.item_id)

    def to_page(self, sample: str) -> dict[str, Any]:
        """What the page holds of it: nothing that names the run or gives a judge's score or rationale (those are
        `reveal`'s); the output is shown through `shown`, its hash identifies it."""
        return {
            "case": self.case_id(sample),
            "item_id": self.item_id,
            "stratum": self.stratum,
            "shown": [asdict(d) for d in self.shown],
            "gold": [asdict(d) for d in self.gold],
            "scales": [_scale(c) for c in self.scales],
            "export": self.export,
            "prompt": [list(m) for m in self.prompt],
            "output_sha256": self.output_sha256,
        }

    def reveal(self) -> dict[str, Any]:
        """What the reveal file holds of it: the run, and the documents hidden until the annotator has scored."""
        return {
            "run": self.run,
            "setting": self.setting,
            "item_id": self.item_id,
            "hidden": [asdict(d) for d in self.hidden],
        }


def output_sha256(text: str) -> str:
    """The digest an export names the output it scores by: a score is never matched to another output."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def case_id(sample: str, run: str, setting: str, item_id: str) -> str:
    """The name the page and its export give one output of a sample: `c-` and 16 hex digits hashing the sample, the
    run, the setting and the item. The sweep that reads an export finds the run again by hashing its own runs."""
    return "c-" + hashlib.sha256(json.dumps([sample, run, setting, item_id]).encode()).hexdigest()[:16]


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
