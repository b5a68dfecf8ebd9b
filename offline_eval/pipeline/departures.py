"""Where a run labelled with a paper's protocol decodes otherwise than the paper (issue 62, item 12): the task's own
departures (Task.departures) are the same for every model; these come from the model's settings in models.yaml,
so each names its run. The summary, the dry run and the report's first screen show them beside the paper label."""

from __future__ import annotations

from typing import Any

from offline_eval.inference.backends.registry import get_engine
from offline_eval.models.decoding import SamplingSpec
from offline_eval.models.spec import ModelSpec
from offline_eval.models.thinking import explicit_settings
from offline_eval.results import stored


def _spelled(s: SamplingSpec) -> str:
    fields = s.model_dump(exclude_unset=True) or {"temperature": s.temperature}
    return ", ".join(f"{k} {v}" for k, v in fields.items())


def model_departures(task: Any, m: ModelSpec, variant: str, ctx: int) -> list[str]:
    """One phrase per way this run's decoding departs from the paper's: models.yaml's own sampling or thinking
    (where the task's protocol has a reasoning preset, only what models.yaml sets otherwise than the preset), and a
    served model sent greedy decoding where the paper decodes as the weights' files say (only the server knows
    those, and the docs promise a served model decodes as its server does)."""
    if task.protocol != "paper":
        return []
    run, preset = m.run_name(variant, ctx), task.reasoning_preset
    sampling, reasoning, out = m.sampling_of(variant), m.reasoning_of(variant), []
    thinks = reasoning is not None and reasoning.think
    theirs = stored.AS_WEIGHTS if task.model_sampling else stored.GREEDY
    if preset is not None and thinks:
        theirs = stored.PRESET.format(temperature=preset.temperature, top_k=preset.top_k)
    if isinstance(sampling, SamplingSpec):
        out.append(stored.SAMPLING.format(run=run, sampling=_spelled(sampling), paper=theirs))
    elif sampling == "model" and not task.model_sampling:
        out.append(stored.SAMPLING_MODEL.format(run=run, paper=theirs))
    if thinks and preset is not None:
        out += [stored.RUN_DEPARTS.format(run=run, departure=d)
                for d in preset.departures(reasoning, explicit_settings(m, variant), ctx)]  # fmt: skip
    elif thinks:
        out.append(stored.THINKING_AS_SET.format(run=run, budget=reasoning.budget))  # type: ignore[union-attr]
    if task.model_sampling and sampling is None and get_engine(m.backend).remote:
        out.append(stored.SERVED_GREEDY.format(run=run, paper=theirs))
    return out
