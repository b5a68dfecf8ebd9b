"""A task's own part of the report, all optional, in a companion object beside the task: the report renders it
from summary.json and the results files alone, so every part is class-level. A task names its subclass as
`Task.report_parts`; the defaults are one leaderboard of the task's declared metrics and nothing else."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from .sections import BrowserView, Metric, leaderboard

if TYPE_CHECKING:
    from offline_eval.results.records import RunEntry
    from offline_eval.results.summary import Summary

    from .figures import Plot
    from .sections import Table


class TaskClass(Protocol):
    """What a task's report parts read of its task class (a tasks.base.Task subclass)."""

    @property
    def name(self) -> str: ...

    @property
    def primary_metric(self) -> str: ...

    @property
    def metrics(self) -> tuple[Metric, ...]: ...

    @property
    def leaderboard_note(self) -> str: ...


class ReportParts:
    @classmethod
    def tables(cls, task: TaskClass, runs: list[RunEntry], summary: Summary) -> list[Table]:
        """The task's sections of report.md/html: by default one leaderboard of its declared metrics."""

        metrics = task.metrics or (Metric(task.primary_metric, task.primary_metric),)
        return [leaderboard(task.name, metrics, task.leaderboard_note, runs, summary)]

    @classmethod
    def plots(cls, runs: list[RunEntry]) -> list[Plot]:
        return []

    @classmethod
    def browser_view(cls, record: Any) -> BrowserView:
        """The report's item browser on one record (its group, whether it is right, what to show beside it)."""
        return BrowserView()

    @classmethod
    def glance_note(cls, runs: list[RunEntry]) -> str | None:
        """What the report's opening lines should add about one setting's scored runs (None: nothing)."""
        return None

    @classmethod
    def leaderboard_row(cls, value: float) -> dict[str, Any]:
        """What summary.json's leaderboard row adds to a run's primary-metric value (e.g. LegalEval-Q's tier)."""
        return {}
