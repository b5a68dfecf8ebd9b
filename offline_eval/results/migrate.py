"""Old summary.json files read forward, one schema version at a time (the inspect_ai pattern: the raw JSON of
version N becomes version N+1's, then the current model validates it). The file on disk is never rewritten: a
re-sweep into the folder writes the current version.

- 2 -> 3: version 3 made the file one typed model and added what made it (`provenance`); version 2 named its version
  `version` and recorded no provenance, which stays absent (verify says it has nothing to rebuild from). A run
  entry's keys left over from version 1 (version 2 kept them as they were) are dropped: no reader uses them.
- 3 -> 4: a run's metrics were one flat map whose keys encoded their structure; they become RunMetrics
  (offline_eval.metrics.values: each value with its interval, breakdowns and judges typed), read by
  offline_eval.metrics.flat.
- 4 -> 5: version 5 added `calibration` (judged numbers corrected by human labels) and a judged verdict's `scale`;
  a version-4 sweep calibrated nothing, so they stay absent."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from offline_eval.metrics.flat import metrics_v3


def forward(raw: dict[str, Any], version: int, current: int, run_fields: Collection[str]) -> dict[str, Any]:
    """summary.json's raw JSON of `version`, migrated to `current` (a version with no path forward is left as it
    is, for the caller to refuse). `run_fields`: the keys a run entry has (the summary layer's model, above this
    one)."""
    steps: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
        2: lambda r: _v2_to_v3(r, run_fields),
        3: _v3_to_v4,
        4: lambda r: {**r, "schema_version": 5},
    }
    while version < current and version in steps:
        raw = steps[version](raw)
        version += 1
    return raw


def _v2_to_v3(raw: dict[str, Any], run_fields: Collection[str]) -> dict[str, Any]:
    out = {k: v for k, v in raw.items() if k != "version"}
    out["schema_version"] = 3
    out["runs"] = [{k: v for k, v in r.items() if k in run_fields} if isinstance(r, dict) else r for r in raw["runs"]]
    return out


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
