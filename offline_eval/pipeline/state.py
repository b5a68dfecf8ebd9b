"""What a sweep into a folder starts from and ends with: the earlier summary's runs, failures and provenance,
carried over where this sweep did not redo them; one current state per run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from offline_eval.results.records import ItemRecord, Records, ResultsFolder, RunEntry, RunKey
from offline_eval.results.summary import (
    SCHEMA_VERSION,
    Failure,
    LoadProvenance,
    Provenance,
    SettingProvenance,
    Summary,
    SweepProvenance,
)
from offline_eval.runtime.errors import InputError
from offline_eval.tasks import read_summary
from offline_eval.tasks.base import Task

if TYPE_CHECKING:
    from .plan import Configured


@dataclass
class State:
    earlier: Summary
    runs: list[RunEntry]
    failures: list[Failure]
    records: Records[ItemRecord] = field(default_factory=dict)
    loads: list[LoadProvenance] = field(default_factory=list)
    dropped: list[RunKey] = field(default_factory=list)  # an earlier sweep's runs the config no longer plans

    @classmethod
    def start(
        cls, folder: ResultsFolder, attempted: set[str], configured: Configured, log: Callable[[str], None]
    ) -> State:
        """From an earlier sweep into the folder: its runs and failures that the config still plans (`configured`:
        every run x setting, whatever --only and --tasks chose this time). A run not attempted this time keeps its
        earlier state; an attempted one gets its state from this sweep. A run the config no longer plans (a model
        or variant renamed, a budget given as a list) leaves the summary; its outputs stay in the store."""
        earlier = read_earlier(folder, log)

        def planned(r: RunEntry) -> bool:
            ours = r.key in configured or (r.task in configured.unread and r.run in configured.runs)
            return ours and configured.same_protocol(r.task, r.protocol)

        runs = [r for r in earlier.runs if planned(r)]
        names = configured.runs
        dropped = [r.key for r in earlier.runs if not planned(r)]
        if dropped:
            which = ", ".join(sorted({k.run for k in dropped}))
            log(f"runs of an earlier sweep here that this config no longer plans leave the summary: {which}")
        failures = [f for f in earlier.failures if f.run not in attempted and f.run in names]
        return cls(earlier, runs, failures, dropped=dropped)

    def forget_dropped(self, folder: ResultsFolder) -> None:
        """The results files of the runs the config no longer plans (their outputs stay in the store)."""
        top = (folder.root / "results").resolve()
        for key in self.dropped:
            f = folder.results_file(key)
            if not f.resolve().is_relative_to(top) or not f.is_file():  # names read from the earlier summary
                continue
            f.unlink()
            if not any(f.parent.iterdir()):
                f.parent.rmdir()

    def failed(self, f: Failure) -> None:
        """One current state per run: a failed run leaves the leaderboard, whatever an earlier sweep stored for it
        (its outputs stay in the store, so a fixed re-run costs nothing)."""
        self.failures.append(f)
        self.runs = [r for r in self.runs if r.run != f.run]

    def put(self, entry: RunEntry) -> None:
        """This sweep's entry replaces an earlier one of the same run and setting; runs stay sorted."""
        self.runs = sorted([r for r in self.runs if r.key != entry.key] + [entry], key=lambda r: r.key)

    def everything(self, folder: ResultsFolder, tasks: dict[str, Task]) -> Records[ItemRecord]:
        """This sweep's records, plus those of runs an earlier sweep into this folder produced (read once)."""
        out = dict(self.records)
        for entry in self.runs:
            key = entry.key
            if key not in out and entry.task in tasks:
                earlier = folder.read_records(key, tasks[entry.task].Record.from_json)
                if earlier is not None:
                    out[key] = earlier
        return out

    def provenance(self, sweep_provenance: SweepProvenance, settings: list[SettingProvenance]) -> Provenance:
        """This sweep's, and an earlier sweep's for the runs and settings it carried over."""
        loads = self.loads
        here = {x.run for x in loads}
        kept = {r.run for r in self.runs} | here
        before = self.earlier.provenance
        if before is not None:
            loads = loads + [x for x in before.loads if x.run not in here and x.run in kept]
            planned = {x.setting for x in settings}
            carried = {r.setting for r in self.runs}  # a setting no run keeps (a dropped one) leaves the provenance
            settings = settings + [x for x in before.settings if x.setting not in planned and x.setting in carried]
        return Provenance(sweep=sweep_provenance, loads=loads, settings=settings)


def read_earlier(folder: ResultsFolder, log: Callable[[str], None]) -> Summary:
    """An earlier sweep's summary in this folder, whose runs this one carries over; one this version cannot read
    whole is set aside (its runs are made again from the store), never half-read."""
    if not folder.summary.exists():
        return Summary(schema_version=SCHEMA_VERSION)
    try:
        return read_summary(folder.summary)
    except InputError as e:
        log(f"{e}; its runs are not carried over (this sweep's are written, and the store keeps every output)")
        return Summary(schema_version=SCHEMA_VERSION)
