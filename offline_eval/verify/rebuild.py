"""A sweep folder's summary and records made again from their primary sources, by the sweep's own stages: the
config file (hashed in the provenance), the data files it names, the weights (hashed again, no cached digest
trusted) and store.sqlite (what each engine answered, keyed by request), opened read-only. No engine starts:
an output the store lacks fails its run here, as a crash would have in the sweep."""

from __future__ import annotations

import argparse
import ast
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from offline_eval.inference.backends.spec import LoadSpec
from offline_eval.inference.store import Store
from offline_eval.modelfiles.fingerprint import Pins, pinned, served_key
from offline_eval.models.spec import ModelSpec
from offline_eval.pipeline.build import execute, summarize
from offline_eval.pipeline.config import load_config, parse_config
from offline_eval.pipeline.execute import LoggingEngine, Stage
from offline_eval.pipeline.executors.serial import SerialExecutor
from offline_eval.pipeline.options import SweepOptions
from offline_eval.pipeline.plan import Plan, plan
from offline_eval.pipeline.provenance import config_digest
from offline_eval.pipeline.state import State
from offline_eval.results.records import ItemRecord, Records, ResultsFolder, RunKey
from offline_eval.results.summary import SCHEMA_VERSION, Provenance, Summary
from offline_eval.runtime.errors import InputError, OfflineEvalError
from offline_eval.runtime.quiet import native_stderr_silenced
from offline_eval.runtime.timings import Timings
from offline_eval.tasks import get_task_class, task_names
from offline_eval.tasks.kit.protocol import declared_before


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
    """The engine versions the sweep ran, its served models' identities and the int4 kernel each load took:
    claimed, since no engine runs."""
    versions = {x.engine: x.engine_version for x in prov.loads}
    served = {served_key(x.path, x.load_options): x.store_fingerprint for x in prov.loads if x.files is None}
    started = [(x.path, x.engine_start or {}) for x in prov.loads]
    int4 = {path: str(start["int4_kernel"]) for path, start in started if start.get("int4_kernel")}
    return Pins(versions=versions, served=served, int4=int4)


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


@dataclass(frozen=True)
class Selection:
    """What the sweep that wrote summary.json was asked to run, as its command line records it (`offline-eval
    sweep`'s --only, --tasks and --limit, or offline_eval.sweep's only, only_tasks and limit). `known` False: the
    command is not one this reads (`offline-eval run`, whose config is one model and one task, or a program that
    started the sweep its own way): the whole config was planned, each task at the limit its setting records."""

    known: bool = False
    only: list[str] | None = None
    tasks: list[str] | None = None
    limit: int | None = None

    def describe(self) -> str:
        given = [f"--{k} {','.join(v)}" for k, v in (("only", self.only), ("tasks", self.tasks)) if v is not None]
        given += [f"--limit {self.limit}"] if self.limit is not None else []
        return f"the sweep's {' '.join(given)}" if given else "the sweep (no --only or --tasks)"


class _Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Refused(message)


def _sweep_parser() -> argparse.ArgumentParser:
    """`offline-eval sweep`'s options as cli.py declares them (all of them, so that an abbreviation resolves as
    it did there); only the selection is read."""
    s = _Parser(prog="offline-eval sweep", add_help=False)
    s.add_argument("config")
    s.add_argument("--out")
    s.add_argument("--only")
    s.add_argument("--tasks")
    s.add_argument("--limit", type=int)
    s.add_argument("--fresh", action="store_true")
    s.add_argument("--dry-run", action="store_true")
    s.add_argument("-v", "--verbose", action="store_true")
    s.add_argument("--ray")
    return s


def _names(v: str | None) -> list[str] | None:
    """A comma-separated option as cli.py reads it (an empty list refused the sweep: nothing was selected)."""
    return None if v is None else [x.strip() for x in v.split(",") if x.strip()]


def selection(command: Sequence[str]) -> Selection:
    """The selection of the sweep whose command line (provenance.sweep.command) this is."""
    if len(command) == 1 and command[0].startswith("offline_eval.sweep("):  # the Python API's, as api.py writes it
        try:
            call = ast.parse(command[0], mode="eval").body
            assert isinstance(call, ast.Call)
            given = {
                k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg in ("only", "only_tasks", "limit")
            }
        except (SyntaxError, ValueError, TypeError, AssertionError, RecursionError):
            return Selection()
        only, tasks, limit = given.get("only"), given.get("only_tasks"), given.get("limit")
        if not all(x is None or isinstance(x, list | tuple) for x in (only, tasks)) or not (
            limit is None or isinstance(limit, int)
        ):
            return Selection()
        return Selection(True, list(only) if only else None, list(tasks) if tasks else None, limit)
    rest = list(command[1:])
    while rest and rest[0].startswith("-"):  # the options before the subcommand (--debug)
        rest.pop(0)
    if not rest or rest[0] != "sweep":
        return Selection()
    try:
        a, _ = _sweep_parser().parse_known_args(rest[1:])
    except _Refused:
        return Selection()
    return Selection(True, _names(a.only), _names(a.tasks), a.limit)


def _before_protocols(prov: Provenance) -> set[str]:
    """The tasks the sweep ran before protocols existed (their recorded options name none): they ran offline-eval's,
    so a config of theirs that names no protocol is rebuilt under it (the default is the papers' since), as is
    every other option that declares what runs had before it existed."""
    return {s.task for s in prov.settings if "protocol" not in s.task_options}


def _replay(
    folder: ResultsFolder, claimed: Summary, prov: Provenance, config: str, out: Rebuilt
) -> tuple[Summary, Records[ItemRecord], Plan]:
    if prov.sweep.config is not None:
        cfg = load_config(config)
    else:
        cfg = parse_config(_json(Path(config)), folder.root, config)
    for name in _before_protocols(prov):
        if name in cfg.tasks and name in task_names():
            cfg.tasks[name] = {**declared_before(get_task_class(name).Options.model_fields), **cfg.tasks[name]}
    # What the config plans, as the sweep's own selection chose from it (not what the summary claims ran), plus the
    # tasks and runs an earlier sweep into the folder left in it.
    chosen = selection(prov.sweep.command)
    selected = [t for t in cfg.tasks if chosen.tasks is None or t in chosen.tasks]
    earlier = {s.task for s in prov.settings}
    limits = {s.task: s.task_options.get("limit") for s in prov.settings}
    if chosen.known:
        limits |= {t: chosen.limit for t in selected}  # None: the config's own
    tasks = [t for t in cfg.tasks if t in earlier or t in selected]
    sweep_plan = plan(cfg, config, None, tasks or None, limits)
    mine = {t.name for t in sweep_plan.tasks if t.name in selected}
    planned = [
        RunKey(ld.run, x.setting)
        for ld in sweep_plan.loads
        if chosen.only is None or ld.model.name in chosen.only
        for x in sweep_plan.settings
        if x.task in mine
    ]
    out.problems += _unknown(list(cfg.tasks), [m.name for m in cfg.models], chosen)
    out.problems += _unlisted(claimed, planned, chosen)
    wanted = {r.run for r in claimed.runs} | {f.run for f in claimed.failures} | {k.run for k in planned}
    wanted |= {x.run for x in prov.loads if x.role == "candidate"}
    sweep_plan.loads = [ld for ld in sweep_plan.loads if ld.run in wanted]
    store = Store(folder.store, read_only=True)
    lines: list[str] = []
    try:
        options = SweepOptions(log=lines.append, progress=False)
        stage = _ReplayStage(options, store, folder.store, SerialExecutor(), Timings(), cfg.runner.chunk_size)
        state = State(Summary(schema_version=SCHEMA_VERSION), [], [])
        with pinned(pins(prov)):
            execute(stage, sweep_plan, state, config)
    finally:
        store.close()
    summary = summarize(cfg, sweep_plan, state, state.records, prov.sweep.model_copy(deep=True))
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
    return summary, state.records, sweep_plan


def _unlisted(claimed: Summary, planned: list[RunKey], chosen: Selection) -> list[str]:
    """Each run x setting the sweep planned that summary.json lists neither among its runs nor among its failures."""
    ran = {r.key for r in claimed.runs}
    failed = {f.run for f in claimed.failures}
    why = chosen.describe() if chosen.known else "the sweep (its command line records no --only or --tasks)"
    return [
        f"{k.run} / {k.setting}: planned by the config and {why}, but in neither the runs nor the failures of "
        "summary.json"
        for k in planned
        if k not in ran and k.run not in failed
    ]


def _unknown(tasks: Sequence[str], models: Sequence[str], chosen: Selection) -> list[str]:
    """A selection naming what the config lacks: the sweep refuses it, so no sweep of this config ran it."""
    out = []
    for flag, names, known in (("--only", chosen.only, models), ("--tasks", chosen.tasks, tasks)):
        if missing := sorted(set(names or ()) - set(known)):
            listed = ", ".join(missing)
            out.append(f"provenance.sweep.command: {flag} names what the config lacks ({listed}): no sweep of it ran")
    return out
