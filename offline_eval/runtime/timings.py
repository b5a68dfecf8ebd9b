"""Where a sweep's wall-clock time goes, stage by stage: summary.json's `timings` block.

Everything under `timings` (like every run's `throughput`) is wall-clock and cache state, so it differs between
two otherwise identical sweeps; the rest of summary.json does not.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# Stages that are the engines' own work; the rest of the wall time is the harness's fixed cost.
ENGINE_STAGES = ("engine_load", "phase", "evaluator_load", "evaluation")


class Timings:
    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.stages: list[dict[str, Any]] = []

    def add(self, stage: str, seconds: float, **info: Any) -> None:
        self.stages.append({"stage": stage, **info, "s": round(seconds, 3)})

    @contextmanager
    def stage(self, stage: str, **info: Any) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(stage, time.perf_counter() - t0, **info)

    def to_dict(self) -> dict[str, Any]:
        """The stages in order, their totals by kind, the whole sweep, and `fixed_s`: what is neither an engine
        start nor a phase (data load, scoring, summary, report, closing engines)."""
        total = time.perf_counter() - self.started
        by_stage: dict[str, float] = {}
        for s in self.stages:
            by_stage[s["stage"]] = by_stage.get(s["stage"], 0.0) + s["s"]
        engine = sum(v for k, v in by_stage.items() if k in ENGINE_STAGES)
        return {
            "stages": self.stages,
            "by_stage": {k: round(v, 3) for k, v in by_stage.items()},
            "total_s": round(total, 3),
            "fixed_s": round(total - engine, 3),
            "prefix_reuse": prefix_reuse(self.stages),
        }


def prefix_reuse(stages: list[dict[str, Any]]) -> dict[str, Any]:
    """Prompt tokens submitted against those computed, summed over the candidate phases and over the
    evaluator (judge) phases that measured it."""
    out: dict[str, Any] = {}
    for kind, name in (("phase", "candidates"), ("evaluation", "evaluators")):
        counts = [s["prefix_reuse"] for s in stages if s["stage"] == kind and s.get("prefix_reuse")]
        if counts:
            sub, comp = sum(c["submitted"] for c in counts), sum(c["computed"] for c in counts)
            out[name] = {"submitted": sub, "computed": comp, "ratio": round(sub / comp, 2) if comp else None}
    return out
