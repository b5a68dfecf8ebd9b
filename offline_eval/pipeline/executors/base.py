"""The executor contract: how a unit's engine is loaded, and how the units are run."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from offline_eval.inference.backends.base import Backend
    from offline_eval.inference.backends.spec import LoadSpec
    from offline_eval.models.spec import ModelSpec

U = TypeVar("U")
T = TypeVar("T")
Log = Callable[[str], None]


class Executor(Protocol):
    parallel: bool  # units run at once: each needs its own store connection and no progress bar of its own

    def loader(self, model: ModelSpec, run: str, log: Log) -> Callable[[LoadSpec], Backend]:
        """What loads this unit's engine when its first miss needs it."""
        ...

    def release(self, backend: Backend) -> None:
        """A unit is done with its engine (the serial executor keeps an adapter's load for the next adapter)."""
        ...

    def run_units(self, units: Sequence[U], work: Callable[[U], T], failed: Callable[[T], bool]) -> Iterator[T]:
        """work(unit) for every unit; the outcomes come back in the units' order."""
        ...

    def close(self) -> None: ...
