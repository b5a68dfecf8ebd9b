"""Old summary.json files read forward, one schema version at a time (the inspect_ai pattern: the raw JSON of
version N becomes version N+1's, then the current model validates it). The file on disk is never rewritten: a
re-sweep into the folder writes the current version.

- 3 -> 4: a run's metrics were one flat map whose keys encoded their structure; they become RunMetrics
  (offline_eval.metrics.values: each value with its interval, breakdowns and judges typed), read by
  offline_eval.metrics.flat."""

from __future__ import annotations

from typing import Any

from .metrics.flat import metrics_v3


def forward(raw: dict[str, Any], version: int, current: int) -> dict[str, Any]:
    """summary.json's raw JSON of `version`, migrated to `current` (a version with no path forward is left as it
    is, for the caller to refuse)."""
    steps = {3: _v3_to_v4}
    while version < current and version in steps:
        raw = steps[version](raw)
        version += 1
    return raw


def _v3_to_v4(raw: dict[str, Any]) -> dict[str, Any]:
    out = dict(raw)
    out["schema_version"] = 4
    out["runs"] = [
        {**r, "metrics": metrics_v3(r["metrics"], str(r.get("primary_metric", "")))}
        if isinstance(r, dict) and isinstance(r.get("metrics"), dict)
        else r
        for r in raw["runs"]
    ]
    return out
