"""A sweep folder's summary and records made again from their primary sources, by the sweep's own stages: the
config file (hashed in the provenance), the data files it names, the weights (hashed again, no cached digest
trusted) and store.sqlite (what each engine answered, keyed by request), opened read-only. No engine starts:
an output the store lacks fails its run here, as a crash would have in the sweep."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..backends.fingerprint import Pins, pinned, served_key
from ..backends.spec import LoadSpec
from ..build import execute, summarize
from ..config import load_config, parse_config
from ..errors import InputError, OfflineEvalError
from ..executors.serial import SerialExecutor
from ..modelspec import ModelSpec
from ..pipeline.execute import LoggingEngine, Stage
from ..pipeline.plan import Plan, plan
from ..pipeline.state import State
from ..provenance import config_digest
from ..quiet import native_stderr_silenced
from ..results import ItemRecord, Records, ResultsFolder
from ..store import Store
from ..summary import SCHEMA_VERSION, Provenance, Summary
from ..timings import Timings


class _NoEngine(OfflineEvalError):
    pass


def _no_engine(spec: LoadSpec) -> object:
    raise _NoEngine(
        "store.sqlite lacks outputs this run needs (the rebuild starts no engine): the summary claims answers the "
        "store does not hold"
    )


class _ReplayStage(Stage):
    """The sweep's stage with every engine replaced by the store alone."""

    def engine(
        self, m: ModelSpec, spec: LoadSpec, run: str, store: Store, plan: Callable[[], int | None] | None = None
    ) -> LoggingEngine:
        return LoggingEngine(spec, run, self.log, store, _no_engine)  # type: ignore[arg-type]


@dataclass
class Rebuilt:
    summary: Summary | None = None  # None: it could not be rebuilt (`problems` says why); its timings unset
    records: Records[ItemRecord] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    plan: Plan | None = None


def pins(prov: Provenance) -> Pins:
    """The engine versions the sweep ran, and its served models' identities: claimed, since no engine runs."""
    versions = {x.engine: x.engine_version for x in prov.loads}
    served = {served_key(x.path, x.load_options): x.store_fingerprint for x in prov.loads if x.files is None}
    return Pins(versions=versions, served=served)


def rebuild(folder: ResultsFolder, claimed: Summary) -> Rebuilt:
    out = Rebuilt()
    prov = claimed.provenance
    assert prov is not None
    config = prov.sweep.config or str(folder.config)  # a mapping given to the Python API: the sweep's copy of it
    if not Path(config).is_file():
        out.problems.append(f"provenance.sweep.config: {config} is missing: summary.json cannot be rebuilt")
        return out
    try:
        given = prov.sweep.config is not None
        digest = config_digest(config, None) if given else config_digest(None, _json(Path(config)))
    except InputError as e:
        out.problems.append(f"provenance.sweep.config: {e}")
        return out
    if digest != prov.sweep.config_sha256:
        out.problems.append(
            f"provenance.sweep.config_sha256: the file says {prov.sweep.config_sha256}, {config} now hashes to "
            f"{digest}: the config changed since the sweep, so summary.json cannot be rebuilt from it"
        )
        return out
    try:
        # No engine runs, but the scorer's libraries (torch, torchao) import and talk: --debug shows them.
        with native_stderr_silenced():
            out.summary, out.records, out.plan = _replay(folder, claimed, prov, config, out)
    except OfflineEvalError as e:
        out.problems.append(f"the rebuild from the store stopped: {e}")
    return out


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"unreadable ({e})", file=str(path)) from None


def _replay(
    folder: ResultsFolder, claimed: Summary, prov: Provenance, config: str, out: Rebuilt
) -> tuple[Summary, Records[ItemRecord], Plan]:
    if prov.sweep.config is not None:
        cfg = load_config(config)
    else:
        cfg = parse_config(_json(Path(config)), folder.root, config)
    tasks = sorted({s.task for s in prov.settings})
    limits = {s.task: s.task_options.get("limit") for s in prov.settings}
    the = plan(cfg, config, None, [t for t in tasks if t in cfg.tasks] or None, limits)
    wanted = {r.run for r in claimed.runs} | {f.run for f in claimed.failures}
    wanted |= {x.run for x in prov.loads if x.role == "candidate"}
    the.loads = [ld for ld in the.loads if ld.run in wanted]
    store = Store(folder.store, read_only=True)
    lines: list[str] = []
    try:
        stage = _ReplayStage(
            store, folder.store, SerialExecutor(), lines.append, Timings(), cfg.runner.chunk_size, False, False
        )
        state = State(Summary(schema_version=SCHEMA_VERSION), [], [])
        with pinned(pins(prov)):
            execute(stage, the, state, config)
    finally:
        store.close()
    summary = summarize(cfg, the, state, state.records, prov.sweep.model_copy(deep=True))
    # Claimed, not checked: wall-clock and memory (no engine ran here), carried over to be compared as equal.
    throughput = {r.key: r.throughput for r in claimed.runs}
    for r in summary.runs:
        if r.key in throughput:
            r.throughput = throughput[r.key]
    started = {x.run: x.engine_start for x in prov.loads}  # what an engine's start did: claimed, as timings are
    for x in summary.provenance.loads if summary.provenance else []:
        x.engine_start = started.get(x.run)
    # Why a run failed is an event of the sweep; that it failed here too (its outputs are not all stored) is checked.
    reasons = {f.run: f.reason for f in claimed.failures}
    for f in summary.failures:
        if f.run not in reasons:
            out.problems.append(f"{f.run}: fails in the rebuild: {f.reason}")
        f.reason = reasons.get(f.run, f.reason)
    return summary, state.records, the
