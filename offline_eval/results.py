"""The output folder and the typed keys of what flows through a sweep.

OUT/store.sqlite                      every engine output (the crash-safe layer; resume reads it)
OUT/results/<run>/<setting>.jsonl     one record per item, written once per sweep
OUT/summary.json                      written once, at the end
OUT/report.md, OUT/report.html, OUT/plots/
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, NamedTuple

from .fileio import write_jsonl_atomic


class RunKey(NamedTuple):
    """One run (model x variant x context length) on one task setting."""

    run: str
    setting: str

    def __str__(self) -> str:
        return f"{self.run}/{self.setting}"


Records = dict[RunKey, list[dict[str, Any]]]  # per-item records: id, output, parsed, gold, scores + the task's own
TaskReport = dict[str, Any]  # a task's tables across runs (e.g. judge-human agreement): summary.task_reports


@dataclass
class RunEntry:
    """One run on one task setting: its metrics and costs. summary.json's `runs` holds these, in this order."""

    model: str
    variant: str
    backend: str
    run: str
    max_model_len: int
    task: str
    setting: str
    options: dict[str, Any]
    prompt_format: str | None
    n_items: int
    primary_metric: str
    metrics: dict[str, Any]
    weights_mb: float
    throughput: dict[str, Any]  # timings: the one part of an entry that differs between identical sweeps
    evaluator: dict[str, Any] | None = None  # the runs that judged or evaluated this one's outputs
    extra: dict[str, Any] = field(default_factory=dict)  # keys of an earlier version's summary, kept as they were

    @property
    def key(self) -> RunKey:
        return RunKey(self.run, self.setting)

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        if self.evaluator is None:
            del out["evaluator"]
        return {**out, **self.extra}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunEntry | None:
        """An entry an earlier sweep wrote (None: not one this version can use; its run is simply re-made)."""
        names = {f.name for f in fields(cls)} - {"extra"}
        try:
            entry = cls(
                **{k: v for k, v in d.items() if k in names}, extra={k: v for k, v in d.items() if k not in names}
            )
        except TypeError:
            return None
        ok = (
            isinstance(entry.run, str)
            and isinstance(entry.setting, str)
            and isinstance(entry.metrics, dict)
            and isinstance(entry.options, dict)
            and isinstance(entry.throughput, dict)
        )
        return entry if ok else None


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
    def plots(self) -> Path:
        return self.root / "plots"

    def results_file(self, key: RunKey) -> Path:
        return self.root / "results" / key.run / f"{key.setting}.jsonl"

    def write_records(self, key: RunKey, records: list[dict[str, Any]]) -> None:
        write_jsonl_atomic(self.results_file(key), records)

    def read_records(self, key: RunKey) -> list[dict[str, Any]] | None:
        """A run's records as an earlier sweep wrote them (only for runs this sweep did not produce)."""
        f = self.results_file(key)
        if not f.exists():
            return None
        return [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines()]
