"""Where a sweep's engine loads run: one after another in this process, or as parallel units on a Ray cluster.

Either way the driver (this process) owns the store: it computes each unit's misses, and commits what comes
back chunk by chunk, so results and resume do not depend on where the engines ran.
"""

from __future__ import annotations

from collections.abc import Callable

from offline_eval.pipeline.config import RunnerSpec

from .base import Executor
from .ray_executor import RayExecutor
from .serial import SerialExecutor

__all__ = ["Executor", "make_executor"]


def make_executor(
    runner: RunnerSpec, ray: str | None, log: Callable[[str], None], progress: bool | None = None
) -> Executor:
    """`--ray ADDRESS` wins over models.yaml's `runner: {executor: ray, address: ...}`."""
    if ray is None and runner.executor == "serial":
        return SerialExecutor()

    return RayExecutor(ray or runner.address or "auto", log, progress)
