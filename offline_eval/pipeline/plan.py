"""The plan: every task built and its data read, each setting's items and phase built once, and the model loads,
before any engine starts, so bad data fails in seconds, not after a model."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from offline_eval.inference.backends.spec import LoadSpec
from offline_eval.inference.requests import Phase, request_json
from offline_eval.models.spec import ModelSpec
from offline_eval.results.records import RunKey
from offline_eval.results.summary import SettingProvenance
from offline_eval.runtime.errors import InputError
from offline_eval.runtime.netguard import allow_only
from offline_eval.tasks import load_items, make_task
from offline_eval.tasks.base import Item, Setting, Task
from offline_eval.tasks.kit.datafiles import reading

from . import provenance
from .config import SweepConfig, data_path_problems
from .thinking_checks import ThinkingRun, check_thinking


@dataclass
class PlannedSetting:
    name: str
    options: Setting
    items: Sequence[Item]
    phase: Phase  # the same for every model: built once


@dataclass
class PlannedTask:
    name: str
    task: Task
    items: list[Item]
    data_files: list[str] = field(default_factory=list)  # every data file or folder the task read
    settings: list[PlannedSetting] = field(default_factory=list)


@dataclass(frozen=True)
class Load:
    """One engine load: a model's variant at one context length."""

    model: ModelSpec
    variant: str
    ctx: int
    index: int  # the model's place under `models:`, which a path problem names

    @property
    def run(self) -> str:
        return self.model.run_name(self.variant, self.ctx)

    def spec(self) -> LoadSpec:
        return self.model.load_spec(self.variant, self.ctx)

    def problem(self, source: str) -> str | None:
        return self.model.path_problem(self.variant, source, self.index)


@dataclass
class Plan:
    tasks: list[PlannedTask]
    loads: list[Load]
    settings: list[SettingProvenance]
    notes: list[str] = field(default_factory=list)  # what the plan could not check (the dry run prints them)

    def keys(self) -> list[RunKey]:
        """Every results file the sweep will write."""
        return [RunKey(ld.run, s.name) for ld in self.loads for t in self.tasks for s in t.settings]


def plan(
    cfg: SweepConfig,
    source: str,
    only: list[str] | None,
    only_tasks: list[str] | None,
    limit: int | None | dict[str, int | None],
) -> Plan:
    """`limit`: --limit, or each task's own (a rebuild of a folder that several sweeps wrote)."""
    models = [m for m in cfg.models if not only or m.name in only]
    if only and len(models) != len(set(only)):
        missing = set(only) - {m.name for m in models}
        raise InputError(f"--only names models not in the config: {', '.join(sorted(missing))}")
    if problems := data_path_problems(cfg, source):
        raise InputError(problems[0])
    tasks = plan_tasks(cfg, only_tasks, limit, source)
    index = {id(m): i for i, m in enumerate(cfg.models)}
    loads = [Load(m, v, c, index[id(m)]) for m in models for v, c in m.runs()]
    notes = check_thinking(thinking_runs(loads, tasks, source), source)
    return Plan(tasks, loads, [x for t in tasks for x in setting_provenance(t)], notes)


def thinking_runs(loads: list[Load], tasks: list[PlannedTask], source: str) -> list[ThinkingRun]:
    """What check_thinking refuses before any engine starts: each load whose weights are there, with every setting
    it answers; each evaluator (its delimiters: its prompts hold the answers, unknown yet)."""
    settings = tuple((s.name, s.phase) for t in tasks for s in t.settings)
    runs = [
        ThinkingRun(ld.model, ld.variant, ld.ctx, f"models.{ld.index}", settings)
        for ld in loads
        if ld.problem(source) is None
    ]
    for t in tasks:
        for key in t.task.model_options:  # a task's judges or evaluator, where the config declares it
            value = getattr(t.task.options, key, None)
            specs = [(f"{key}.{i}", m) for i, m in enumerate(value)] if isinstance(value, list) else [(key, value)]
            for where, ev in specs:
                if not isinstance(ev, ModelSpec):
                    continue
                v, c = ev.runs()[0]  # loaded once: one variant, one context length
                if ev.path_problem(v, source, 0) is None:
                    runs.append(ThinkingRun(ev, v, c, f"tasks.{t.name}.{where}"))
    return runs


@dataclass(frozen=True)
class Configured:
    """Every run x setting the whole config plans, whatever --only and --tasks choose; `unread`: tasks not chosen
    this time whose settings depend on data that cannot be read now (a LegalRikai folder's sub-tasks): their
    earlier runs of configured models are kept as they are. `protocols`: each task's protocol now; an earlier run
    under another one is not this config's, whatever its setting is called."""

    keys: frozenset[RunKey]
    runs: frozenset[str]
    unread: frozenset[str]
    protocols: dict[str, str] = field(default_factory=dict)

    def __contains__(self, key: RunKey) -> bool:
        return key in self.keys

    def same_protocol(self, task: str, protocol: str) -> bool:
        return self.protocols.get(task, protocol) == protocol


def configured_keys(cfg: SweepConfig, source: str) -> Configured:
    """What the config plans (no items are read; a task whose settings need its data folder lists it)."""
    settings, unread, protocols = [], set(), {}
    for name, opts in cfg.tasks.items():
        task = make_task(name, dict(opts), source)
        protocols[name] = task.protocol
        try:
            settings += [task.setting_name(o) for o in task.settings()]
        except InputError:
            unread.add(name)  # a chosen task's data was read (and refused) by the plan before this
    runs = frozenset(m.run_name(v, c) for m in cfg.models for v, c in m.runs())
    return Configured(frozenset(RunKey(r, s) for r in runs for s in settings), runs, frozenset(unread), protocols)


def plan_tasks(
    cfg: SweepConfig, only_tasks: list[str] | None, limit: int | None | dict[str, int | None], source: str
) -> list[PlannedTask]:
    out = []
    for name, opts in cfg.tasks.items():
        if only_tasks and name not in only_tasks:
            continue
        opts = dict(opts)
        mine = limit.get(name) if isinstance(limit, dict) else limit
        if mine is not None:
            opts["limit"] = mine
        task = make_task(name, opts, source)
        with reading() as files:
            items = load_items(task, source)
        settings = []
        for options in task.settings():
            chosen = task.setting_items(items, options)
            settings.append(PlannedSetting(task.setting_name(options), options, chosen, task.build(chosen, options)))
        out.append(PlannedTask(name, task, items, files, settings))
    if only_tasks:
        unknown = set(only_tasks) - {p.name for p in out}
        if unknown:
            raise InputError(f"--tasks names tasks not in the config: {', '.join(sorted(unknown))}")
    return out


def setting_provenance(t: PlannedTask) -> list[SettingProvenance]:
    """Each setting of a planned task: its data, prompt template and constraints."""
    out = []
    for s in t.settings:
        constraint = s.phase.requests[0].constraint if s.phase.requests else None
        stage = t.task.evaluation()
        evaluation = stage.constraint(s.options) if stage else None
        out.append(
            provenance.setting(
                t.name,
                s.name,
                t.task.options.model_dump(mode="json"),
                t.data_files,
                s.items,
                [request_json(r) for r in s.phase.requests],
                t.task.prompt_template(s.options),
                constraint.to_dict() if constraint else None,
                evaluation.to_dict() if evaluation else None,
            )
        )
    return out


def guard_connections(cfg: SweepConfig, tasks: list[PlannedTask]) -> AbstractContextManager[None]:
    """A config that names servers: within the block, this process connects to their hosts and nowhere else."""

    specs = [*cfg.models, *(ev for t in tasks if (stage := t.task.evaluation()) for ev in stage.models())]
    urls = [url for m in specs for url in m.server_urls()]
    return allow_only(urls) if urls else nullcontext()
