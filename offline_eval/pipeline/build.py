"""A sweep's stages from its plan to its Summary, writing no file: the sweep runs them on its engines, and
`verify` runs them again on the store alone, so both make every number with the same code."""

from __future__ import annotations

from offline_eval.report.inputs import ItemInputs
from offline_eval.results.records import ItemRecord, Records, sample_of
from offline_eval.results.summary import SCHEMA_VERSION, Summary, SweepProvenance

from .analyses import analyse
from .config import SweepConfig
from .evaluate import run_evaluations
from .execute import Stage, attempt
from .plan import Plan, PlannedTask
from .state import State


def execute(stage: Stage, sweep_plan: Plan, state: State, source: str) -> State:
    """Every model load (serially, or beside one another on the executor), then the evaluators."""
    units = list(enumerate(sweep_plan.loads, 1))
    n = len(units)
    for unit in stage.executor.run_units(
        units, lambda u: attempt(stage, u[0], n, u[1], sweep_plan.tasks, source), lambda u: u.failure is not None
    ):
        if unit.abort is not None:
            raise unit.abort
        if unit.failure:
            state.failed(unit.failure)
            continue
        state.records.update(unit.records)
        if unit.load is not None:
            state.loads.append(unit.load)
        for entry in unit.runs:
            state.put(entry)
    state.loads += run_evaluations(stage, sweep_plan.tasks, state.records, state.runs, state.failures)
    return state


def summarize(
    cfg: SweepConfig, sweep_plan: Plan, state: State, everything: Records[ItemRecord], sweep_provenance: SweepProvenance
) -> Summary:
    """The Summary of what the state holds, `everything` being its runs' records (State.everything), without its
    timings."""
    known = {t.name: t.task for t in sweep_plan.tasks}
    return Summary(
        schema_version=SCHEMA_VERSION,
        provenance=state.provenance(sweep_provenance, sweep_plan.settings),
        runs=state.runs,
        failures=state.failures,
        **analyse(cfg.models, cfg.margin, state.runs, everything, known),
    )


def from_plan(tasks: list[PlannedTask], records: Records[ItemRecord]) -> ItemInputs:
    """Each planned setting's prompts and its task's diffs, for the runs whose records the sweep holds; never
    written to the results files."""
    inputs = ItemInputs()
    for t in tasks:
        for s in t.settings:
            keys = [k for k in records if k.setting == s.name]
            if not keys:
                continue
            ids = [it.id for it in s.items]
            inputs.add_phase(s.name, ids, s.phase)
            by_id = dict(zip(ids, s.items))
            for key in keys:
                for rec in records[key]:
                    item = by_id.get(str(rec.id))
                    if item is not None and not sample_of(rec):  # the browser shows an item's first sample
                        inputs.add_diffs(key, str(rec.id), t.task.browser_diffs(item, rec))
    return inputs
