"""A run's metrics as values, not key strings: each number with its interval, breakdowns as typed maps (per
subject, per year, per split...), and each judge's scores as a row. summary.json's `runs[].metrics` is one
RunMetrics (schema version 4); a version-3 summary's flat keys are read into it by offline_eval.results.migrate."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .bootstrap import Interval

Number = float | int | None


class MetricValue(BaseModel):
    """One number. Where a clustered bootstrap ran, `n_clusters` is set and [ci_low, ci_high] is its 95%
    interval, or both are None and `note` says why it was withheld ("n too small": fewer clusters than a
    bootstrap needs; "no spread": every resample gave the same value). `n`: the items it is over, where a
    breakdown's group gives it; `design_effect`: the clustered variance over the simple one, where computed."""

    model_config = ConfigDict(extra="forbid")

    value: Number
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    n_clusters: int | None = None
    design_effect: float | None = None
    note: str | None = None

    @property
    def has_interval(self) -> bool:
        """A bootstrap ran for this value (its interval may still be withheld: `note` says why)."""
        return self.n_clusters is not None

    @classmethod
    def of(
        cls,
        value: Number,
        interval: Interval | None = None,
        *,
        n: int | None = None,
        design_effect: float | None = None,
        digits: int | None = None,
    ) -> MetricValue:
        """The value with its interval (None: no bootstrap ran), floats rounded to `digits` where given. Only the
        fields that apply are set, so summary.json holds no empty ones."""

        def r(x: Any) -> Any:
            return round(x, digits) if digits is not None and isinstance(x, float) else x

        kw: dict[str, Any] = {"value": r(value)}
        if n is not None:
            kw["n"] = n
        if interval is not None:
            kw["n_clusters"] = interval.n_clusters
            if interval.low is not None and interval.high is not None:
                kw["ci_low"], kw["ci_high"] = r(interval.low), r(interval.high)
            elif interval.reason:
                kw["note"] = interval.reason
        if design_effect is not None:
            kw["design_effect"] = r(design_effect)
        return cls(**kw)


class JudgeMetrics(BaseModel):
    """One judge's part of a run's scores: its answers that gave no scores, that overflowed its context, and its
    mean score per criterion, normalised to [0, 1]."""

    model_config = ConfigDict(extra="forbid")

    failures: int
    overflow: int
    criteria: dict[str, float] = Field(default_factory=dict)


Breakdown = dict[str, dict[str, MetricValue]]  # group (a subject, a year, a split...) -> metric -> value


class RunMetrics(BaseModel):
    """A run's metrics on one setting. `values`: each named metric (a task's declared metrics, its counts and
    checks); `breakdowns`: axis (subject, year, split, criterion...) -> group -> metric -> value; `judges`: per
    judge run, its scores (tasks with LLM judges)."""

    model_config = ConfigDict(extra="forbid")

    values: dict[str, MetricValue] = Field(default_factory=dict)
    breakdowns: dict[str, Breakdown] = Field(default_factory=dict)
    judges: dict[str, JudgeMetrics] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _always_written(self) -> RunMetrics:
        # The maps are filled after construction (put, group): each is written even where a dump leaves out
        # the fields never set.
        self.__pydantic_fields_set__.update(("values", "breakdowns", "judges"))
        return self

    def get(self, name: str, default: Number = None) -> Number:
        """A named metric's value (`default` where the run has none)."""
        v = self.values.get(name)
        return default if v is None else v.value

    def __getitem__(self, name: str) -> Number:
        return self.values[name].value

    def __contains__(self, name: object) -> bool:
        return name in self.values

    def metric(self, name: str) -> MetricValue | None:
        return self.values.get(name)

    def put(self, name: str, value: Number | MetricValue) -> None:
        self.values[name] = value if isinstance(value, MetricValue) else MetricValue(value=value)

    def update(self, values: Mapping[str, Number | MetricValue]) -> None:
        for k, v in values.items():
            self.put(k, v)

    def group(self, axis: str, group: str, name: str, value: Number | MetricValue) -> None:
        mv = value if isinstance(value, MetricValue) else MetricValue(value=value)
        self.breakdowns.setdefault(axis, {}).setdefault(group, {})[name] = mv

    def groups(self, axis: str, name: str) -> dict[str, MetricValue]:
        """One metric of one breakdown, per group (e.g. F1 per subject)."""
        return {g: m[name] for g, m in self.breakdowns.get(axis, {}).items() if name in m}

    def numbers(self) -> Iterator[tuple[tuple[str, ...], Number]]:
        """Every number it holds, with its path: what a migration's proof compares."""
        for name, v in self.values.items():
            yield from _mv_numbers(("values", name), v)
        for axis, groups in self.breakdowns.items():
            for g, ms in groups.items():
                for name, v in ms.items():
                    yield from _mv_numbers(("breakdowns", axis, g, name), v)
        for j, jm in self.judges.items():
            yield ("judges", j, "failures"), jm.failures
            yield ("judges", j, "overflow"), jm.overflow
            for c, x in jm.criteria.items():
                yield ("judges", j, "criteria", c), x


def _mv_numbers(path: tuple[str, ...], v: MetricValue) -> Iterator[tuple[tuple[str, ...], Number]]:
    for field in ("value", "ci_low", "ci_high", "n", "n_clusters", "design_effect"):
        x = getattr(v, field)
        if x is not None or field == "value":
            yield (*path, field), x


@dataclass(frozen=True)
class Count:
    """A number a run reports beside its task's metrics (a count, a share, a check): declared once, by a task
    (`Task.counts`) or here for every task, and read through its declaration, never by its name spelled again."""

    name: str
    label: str = ""

    def of(self, m: RunMetrics, default: Number = None) -> Number:
        return m.get(self.name, default)


N_CLUSTERS = Count("n_clusters", "clusters")  # with_intervals writes it for every task with a declared interval
N_UNCLUSTERED = Count("n_unclustered", "items without a cluster")
N_SKIPPED = Count("n_skipped", "skipped (overflow)")
CONSTRAINT_VIOLATIONS = Count("constraint_violations", "answers that broke their constraint")
EVERY_TASK = (N_CLUSTERS, N_UNCLUSTERED, N_SKIPPED, CONSTRAINT_VIOLATIONS)
