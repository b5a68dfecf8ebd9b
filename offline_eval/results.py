"""The output folder and the typed keys of what flows through a sweep.

    OUT/store.sqlite                      every engine output (the crash-safe layer; resume reads it)
    OUT/results/<run>/<setting>.jsonl     one record per item, written once per sweep
    OUT/summary.json                      written once, at the end
    OUT/report.md, OUT/report.html, OUT/plots/
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from .fileio import write_jsonl_atomic


class RunKey(NamedTuple):
    """One run (model x variant x context length) on one task setting."""

    run: str
    setting: str

    def __str__(self) -> str:
        return f"{self.run}/{self.setting}"


Records = dict[RunKey, list[dict[str, Any]]]  # per-item records of each run and setting


def key_of(entry: dict[str, Any]) -> RunKey:
    return RunKey(entry["run"], entry["setting"])


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
