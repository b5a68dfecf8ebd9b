"""A sweep's stages from its plan to its Summary, writing no file: the sweep runs them on its engines, and
`verify` runs them again on the store alone, so both make every number with the same code."""

from __future__ import annotations

from offline_eval.analyses import analyse
from offline_eval.config import SweepConfig
from offline_eval.pipeline.evaluate import run_evaluations
from offline_eval.pipeline.execute import Stage, attempt
from offline_eval.pipeline.plan import Plan
from offline_eval.pipeline.state import State
from offline_eval.results.records import ItemRecord, Records
from offline_eval.results.summary import SCHEMA_VERSION, Summary, SweepProvenance


def execute(stage: Stage, the: Plan, state: State, source: str) -> State:
    """Every model load (serially, or beside one another on the executor), then the evaluators."""
    units = list(enumerate(the.loads, 1))
    n = len(units)
    for unit in stage.executor.run_units(
        units, lambda u: attempt(stage, u[0], n, u[1], the.tasks, source), lambda u: u.failure is not None
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
    state.loads += run_evaluations(stage, the.tasks, state.records, state.runs, state.failures)
    return state


def summarize(
    cfg: SweepConfig, the: Plan, state: State, everything: Records[ItemRecord], facts: SweepProvenance
) -> Summary:
    """The Summary of what the state holds, `everything` being its runs' records (State.everything), without its
    timings."""
    known = {t.name: t.task for t in the.tasks}
    return Summary(
        schema_version=SCHEMA_VERSION,
        provenance=state.provenance(facts, the.settings),
        runs=state.runs,
        failures=state.failures,
        **analyse(cfg.models, cfg.margin, state.runs, everything, known),
    )
