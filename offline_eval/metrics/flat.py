"""A version-3 run's metrics: one flat map whose keys encoded their structure (`f1_ci_low`, `subject.民法.f1`,
`year.2015.n_clusters`, `mean.train`, `CA.focused_share`, `CA@judge-run`, `judge_failures@judge-run`), read
into RunMetrics' JSON. The one place those key forms are still read: RunMetrics and RunEntry accept the old form
through it (a migrating validator), and offline_eval.results.migrate reads old summaries forward with it."""

from __future__ import annotations

from typing import Any

from .bootstrap import MIN_CLUSTERS

_CI = ("_ci_low", "_ci_high")
V4_KEYS = frozenset({"values", "breakdowns", "judges"})


def is_flat(m: Any) -> bool:
    return isinstance(m, dict) and not set(m) <= V4_KEYS


def _stat(key: str) -> tuple[str, str]:
    """(metric, field): `f1_ci_low` -> (f1, ci_low); `f1` -> (f1, value); `n` and `n_clusters` name no metric."""
    for suffix in _CI:
        if key.endswith(suffix):
            return key[: -len(suffix)], suffix[1:]
    return key, "value"


def metrics_v3(flat: dict[str, Any], primary: str | None) -> dict[str, Any]:
    """One run's version-3 metrics as version 4's RunMetrics JSON. The run-level design effect was of the
    primary metric; with none given it stays a named value."""
    values: dict[str, dict[str, Any]] = {}
    groups: dict[tuple[str, str], dict[str, Any]] = {}  # (axis, group) -> {n, n_clusters, metrics: {...}}
    judges: dict[str, dict[str, Any]] = {}
    for key, v in flat.items():
        if "@" in key:
            name, judge = key.split("@", 1)
            j = judges.setdefault(judge, {"criteria": {}})
            if name in ("judge_failures", "judge_overflow"):
                j[name.removeprefix("judge_")] = v
            else:
                j["criteria"][name] = v
        elif key.startswith(("subject.", "year.")):
            axis, rest = key.split(".", 1)
            group, stat = rest.rsplit(".", 1)
            g = groups.setdefault((axis, group), {"metrics": {}})
            if stat in ("n", "n_clusters"):
                g[stat] = v
            else:
                name, field = _stat(stat)
                g["metrics"].setdefault(name, {})[field] = v
        elif "." in key:
            left, right = key.split(".", 1)
            if right == "focused_share":
                groups.setdefault(("criterion", left), {"metrics": {}})["metrics"][right] = {"value": v}
            else:  # LegalEval-Q's per split: mean.train, adj_score.validation
                groups.setdefault(("split", right), {"metrics": {}})["metrics"][left] = {"value": v}
        else:
            name, field = _stat(key)
            values.setdefault(name, {})[field] = v
    n_clusters = flat.get("n_clusters")
    deff = values.pop("design_effect", None) if primary is not None else None
    for name, mv in values.items():
        if "ci_low" in mv or "ci_high" in mv:
            _interval(mv, n_clusters)
        if name == primary and deff is not None and deff.get("value") is not None:
            mv["design_effect"] = deff["value"]
    breakdowns: dict[str, dict[str, dict[str, Any]]] = {}
    for (axis, group), g in groups.items():
        for mv in g["metrics"].values():
            if "n" in g:
                mv["n"] = g["n"]
            if "n_clusters" in g:
                _interval(mv, g["n_clusters"])
        breakdowns.setdefault(axis, {})[group] = g["metrics"]
    for j in judges.values():
        j.setdefault("failures", 0)
        j.setdefault("overflow", 0)
    return {"values": values, "breakdowns": breakdowns, "judges": judges}


def _interval(mv: dict[str, Any], n_clusters: Any) -> None:
    """A version-3 interval's fields as MetricValue's: its clusters, and why it was withheld (the rule
    metrics.bootstrap.trusted applies)."""
    if isinstance(n_clusters, int):
        mv["n_clusters"] = n_clusters
        if mv.get("ci_low") is None or mv.get("ci_high") is None:
            mv.pop("ci_low", None)
            mv.pop("ci_high", None)
            mv["note"] = "n too small" if n_clusters < MIN_CLUSTERS else "no spread"
