"""The output folder and the typed keys of what flows through a sweep.

OUT/store.sqlite                      every engine output (the crash-safe layer; resume reads it)
OUT/results/<run>/<setting>.jsonl     one record per item, written once per sweep
OUT/summary.json                      written once, at the end
OUT/report.md, OUT/report.html, OUT/plots/
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final, NamedTuple, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from offline_eval.inference.requests import Result
from offline_eval.metrics.values import RunMetrics
from offline_eval.runtime.fileio import write_jsonl_atomic


class RunKey(NamedTuple):
    """One run (model x variant x context length) on one task setting."""

    run: str
    setting: str

    def __str__(self) -> str:
        return f"{self.run}/{self.setting}"


class Unset(enum.Enum):
    """A record field the record's state has no value for (e.g. a skipped item's token counts): not written."""

    UNSET = "unset"


UNSET: Final = Unset.UNSET


class ItemRecord(Protocol):
    """One item's record, as generic code (ablations, verdicts, consistency, the item browser) reads it. Each task
    has its own dataclass, whose field order is its results file's key order (see JsonRecord)."""

    @property
    def id(self) -> str: ...
    @property
    def output(self) -> str: ...
    @property
    def finish_reason(self) -> str: ...
    @property
    def gold(self) -> Any: ...
    @property
    def parsed(self) -> Any: ...  # the answer as scored; None: a parse failure
    @property
    def scores(self) -> dict[str, Any]: ...
    @property
    def skipped(self) -> bool: ...  # the prompt did not fit the context: nothing was generated

    def to_json(self) -> dict[str, Any]: ...

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ItemRecord | None: ...


J = TypeVar("J", bound="JsonRecord")


class JsonRecord:
    """to_json/from_json for a record dataclass: keys in field order, fields left UNSET omitted."""

    def to_json(self) -> dict[str, Any]:
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not UNSET}  # type: ignore[arg-type]

    @classmethod
    def from_json(cls: type[J], d: dict[str, Any]) -> J | None:
        """A record as a results file holds it (None: not one of this task's records in a form this version
        reads). Keys this version does not know are dropped; fields the file lacks and may lack stay UNSET."""
        if not isinstance(d, dict):
            return None
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        try:
            return cls(**{k: v for k, v in d.items() if k in names})
        except TypeError:
            return None


@dataclass(kw_only=True)
class PlainRecord(JsonRecord):
    """A record of a task this installation lacks: the generic fields, as far as its results file has them."""

    id: str
    output: str = ""
    finish_reason: str = "stop"
    gold: Any = None
    parsed: Any = None
    scores: dict[str, Any] = field(default_factory=dict)
    skipped: bool = False


R = TypeVar("R", bound=ItemRecord)


THINKING_FIELDS = ("reasoning", "reasoning_tokens", "reasoning_cut")


def with_thinking(record: R, result: Result) -> R:
    """A task's record with its model's thinking beside the answer (a record of a model that did not think, or
    of a task whose records have no place for it, is left as it is)."""
    if result.reasoning is None or not all(hasattr(record, f) for f in THINKING_FIELDS):
        return record
    return replace(  # type: ignore[type-var]
        record,
        reasoning=result.reasoning,
        reasoning_tokens=result.reasoning_tokens,
        reasoning_cut=result.reasoning_cut,
    )


def with_sample(record: R, index: int) -> R:
    """A record of one of an item's k samples (k > 1), numbered from 0; a task whose records have no place for it
    leaves it as it is."""
    return replace(record, sample=index) if hasattr(record, "sample") else record  # type: ignore[type-var]


def sample_of(record: ItemRecord) -> int | None:
    """Which of its item's samples a record is (None: the item was answered once)."""
    s = getattr(record, "sample", UNSET)
    return None if s is UNSET or s is None else int(s)


def output_key(record: ItemRecord) -> str:
    """One output's name among a run's: its item id, and its sample where the item has several."""
    s = sample_of(record)
    return str(record.id) if s is None else f"{record.id}#{s}"


def item_means(
    records: Iterable[ItemRecord], score: Callable[[Any], float | None], cluster: Callable[[Any], str | None]
) -> dict[str, tuple[float, str | None]]:
    """Item id -> (the mean of its samples' scores, its cluster): what paired tests compare, an item counted once
    however many answers it has (samples whose score is None do not count)."""
    sums: dict[str, list[float]] = {}
    labels: dict[str, str | None] = {}
    for rec in records:
        s = score(rec)
        if s is None:
            continue
        i = str(rec.id)
        sums.setdefault(i, []).append(float(s))
        labels.setdefault(i, cluster(rec))
    return {i: (math.fsum(v) / len(v), labels[i]) for i, v in sums.items()}


Records = dict[RunKey, list[R]]  # per-item records of each run on each task setting; Records[ItemRecord] generic
RecordReader = Callable[[dict[str, Any]], ItemRecord | None]


class TaskReport(Protocol):
    """A task's tables across runs (e.g. judge-human agreement), kept in summary.json under task_reports."""

    def to_json(self) -> dict[str, Any]: ...


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PrefixReuse(_Strict):
    """Prompt tokens handed to the engine and those it computed (the rest its prefix cache served)."""

    submitted: int
    computed: int
    ratio: float | None  # submitted / computed (None: nothing computed)


class Reasoning(_Strict):
    """A reasoning model's thinking over a phase: the items that thought, their thinking tokens, those the budget
    cut off, and the answer phase's prompt share computed (where the engine says)."""

    items: int
    thinking_tokens: int
    thinking_tokens_per_item: float
    cut_by_budget: int
    answer_prompt_computed: float | None = None


class Throughput(_Strict):
    """A run's cost on one setting (wall-clock: the one part of an entry that differs between identical sweeps).
    A field the run did not measure is left unset and is not written; `evaluator`: the evaluator's own cost over
    this run's outputs (one evaluator), or per evaluator run."""

    items_per_s: float | None = None
    tokens_per_s: float | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    wall_s: float | None = None
    load_s: float | None = None
    generated: int | None = None
    cached: int | None = None
    peak_rss_mb: float | None = None
    prefix_reuse: PrefixReuse | None = None
    reasoning: Reasoning | None = None
    evaluator: Throughput | dict[str, Throughput] | None = None


class EvaluatorRef(_Strict):
    """The runs that judged or evaluated a run's outputs; `run`: the first of them."""

    run: str | None
    runs: list[str]


class RunEntry(BaseModel):
    """One run on one task setting: its metrics and costs. summary.json's `runs` holds these, in this order."""

    model_config = ConfigDict(extra="forbid")

    model: str
    variant: str
    backend: str
    run: str
    max_model_len: int
    task: str
    setting: str
    options: dict[str, Any]
    # The task's protocol (tasks/kit/protocol.py); a run recorded before protocols existed ran offline-eval's.
    protocol: str = "offline-eval"
    # Where a paper-protocol run is not the paper's (Task.departures): a mode of ours, a limit, a shorter answer.
    departures: list[str] = Field(default_factory=list)
    prompt_format: str | None
    n_items: int
    primary_metric: str
    metrics: RunMetrics
    weights_mb: float
    throughput: Throughput
    evaluator: EvaluatorRef | None = None

    @property
    def key(self) -> RunKey:
        return RunKey(self.run, self.setting)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)


@dataclass(frozen=True)
class ResultsFolder:
    root: Path

    @property
    def store(self) -> Path:
        return self.root / "store.sqlite"

    @property
    def summary(self) -> Path:
        return self.root / "summary.json"

    @property
    def report_md(self) -> Path:
        return self.root / "report.md"

    @property
    def report_html(self) -> Path:
        return self.root / "report.html"

    @property
    def config(self) -> Path:
        """A config given as a mapping (the Python API), as the sweep validated it: what verify rebuilds from."""
        return self.root / "config.json"

    @property
    def engine_log(self) -> Path:
        return self.root / "engines.log"

    @property
    def plots(self) -> Path:
        return self.root / "plots"

    def results_file(self, key: RunKey) -> Path:
        return self.root / "results" / key.run / f"{key.setting}.jsonl"

    def blocked(self, keys: list[RunKey]) -> str | None:
        """What stands where this folder's outputs go (a folder named like a results file, a file named like a
        folder), checked before any engine starts; None: nothing."""
        files = [self.summary, self.report_md, self.report_html, *(self.results_file(k) for k in keys)]
        folders = [self.root, self.plots, self.root / "results", *{self.results_file(k).parent for k in keys}]
        for f in files:
            if f.is_dir():
                return f"{f} is a folder, where a file is written: move it away"
        for d in folders:
            if d.exists() and not d.is_dir():
                return f"{d} is a file, where a folder is needed: move it away"
        return None

    def write_records(self, key: RunKey, records: list[ItemRecord]) -> None:
        write_jsonl_atomic(self.results_file(key), (r.to_json() for r in records))

    def read_records(self, key: RunKey, read: RecordReader) -> list[ItemRecord] | None:
        """A run's records as an earlier sweep wrote them, read by the task's record type (None: no results file,
        or one with a record this version cannot read: the run then counts as having no records)."""
        f = self.results_file(key)
        if not f.exists():
            return None
        out = []
        # "\n" only: str.splitlines() also splits on U+2028, U+0085, \x1c-\x1e, \v and \f, which dumps() writes raw
        for line in f.read_text(encoding="utf-8").split("\n"):
            if not line:
                continue
            try:
                rec = read(json.loads(line))
            except json.JSONDecodeError:
                rec = None
            if rec is None:
                return None
            out.append(rec)
        return out
