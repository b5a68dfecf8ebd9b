"""One engine load after another, in this process."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, TypeVar

from offline_eval.inference.backends.pool import AdapterPool

from .base import Log

if TYPE_CHECKING:
    from offline_eval.inference.backends.base import Backend
    from offline_eval.inference.backends.spec import LoadSpec
    from offline_eval.models.spec import ModelSpec

U = TypeVar("U")
T = TypeVar("T")


class SerialExecutor:
    parallel = False

    def __init__(self) -> None:
        self.pool = AdapterPool()

    def loader(self, model: ModelSpec, run: str, log: Log) -> Callable[[LoadSpec], Backend]:
        return self.pool.load

    def release(self, backend: Backend) -> None:
        self.pool.release(backend)

    def run_units(self, units: Sequence[U], work: Callable[[U], T], failed: Callable[[T], bool]) -> Iterator[T]:
        try:
            for u in units:
                yield work(u)
        finally:  # the evaluators load next: no engine of the units stays
            self.pool.close()

    def close(self) -> None:
        self.pool.close()
