"""A typed Summary from the few fields a report test cares about: every field the test leaves out gets a plain
value, so the report reads exactly what a sweep would have written (the model validates it whole)."""

from __future__ import annotations

from typing import Any

from offline_eval.metrics.flat import is_flat, metrics_v3
from offline_eval.results.summary import SCHEMA_VERSION, Summary

RUN: dict[str, Any] = {
    "model": "m",
    "variant": "v",
    "backend": "llamacpp",
    "max_model_len": 1,
    "task": "jbeqa",
    "options": {},
    "prompt_format": None,
    "n_items": 1,
    "primary_metric": "f1",
    "metrics": {},
    "weights_mb": 0.0,
    "throughput": {},
}
FAILURE: dict[str, Any] = {"model": "m", "variant": "v", "backend": "llamacpp", "max_model_len": 1}
VERDICT: dict[str, Any] = {
    "n": 1,
    "margin": 0.05,
    "estimate": None,
    "ci_low": None,
    "ci_high": None,
    "p_noninferiority": None,
    "variant": "v",
    "max_model_len": 1,
    "task": "jbeqa",
    "setting": "s",
    "metric": "accuracy",
}
CONSISTENCY: dict[str, Any] = {
    "setting": "s",
    "task": "jbeqa",
    "run_a": "a",
    "run_b": "b",
    "n_items": 1,
    "identical": None,
    "kappa": None,
    "metric": "accuracy",
    "metric_a": None,
    "metric_b": None,
    "delta": None,
    "paired_test": "none",
    "p": None,
}


def run(**fields: Any) -> dict[str, Any]:
    """A run entry's JSON with the given fields; metrics may be given flat, as version 3 wrote them (read forward as
    migrate.forward reads them: the model itself takes the current form only)."""
    entry = {**RUN, **fields}
    if is_flat(entry["metrics"]):
        entry["metrics"] = metrics_v3(entry["metrics"], entry["primary_metric"])
    return entry


def summary(part: dict[str, Any]) -> Summary:
    """A whole Summary from a partial one (runs, leaderboards, verdicts, consistency, failures as given)."""
    s = {k: v for k, v in part.items() if k not in ("runs", "failures", "noninferiority", "consistency")}
    s["schema_version"] = SCHEMA_VERSION
    s["runs"] = [run(**r) for r in part.get("runs", [])]
    s["failures"] = [{**FAILURE, **f} for f in part.get("failures", [])]
    s["noninferiority"] = [
        {
            "backend": "llamacpp",
            "reference_missing": [],
            **m,
            "comparisons": [{**VERDICT, **c} for c in m.get("comparisons", [])],
        }
        for m in part.get("noninferiority", [])
    ]
    s["consistency"] = [{**CONSISTENCY, **c} for c in part.get("consistency", [])]
    return Summary.model_validate(s)
