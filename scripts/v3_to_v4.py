"""Every number of a version-3 summary.json found again in a version-4 one (or a later one, which moved none): each run's flat metric keys mapped to
their typed fields by rules written here, independently of offline_eval.metrics.flat (the migration), and every
number of the version-4 metrics accounted for by one of them. The rest of the summary (leaderboards, verdicts,
ablations, consistency, task reports) is compared whole; wall-clock parts (timings, throughput, the sweep's clock
and command, engine starts) are left out.

    python scripts/v3_to_v4.py OLD/summary.json NEW/summary.json

OLD: a sweep by offline-eval before schema 4 (tests/fixtures/v3-demo, or a checkout of that version); NEW: the
same config swept by this version, or OLD read forward (`offline_eval.load(OLD).to_json()`). Prints one line,
`v3 -> v4: N numbers compared, M differ, K unaccounted`, then each difference; exits 1 on any."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

MIN_CLUSTERS = 5  # metrics.bootstrap.MIN_CLUSTERS, written down here as the rule it is


def v4_paths(key: str, primary: str, flat: dict[str, Any]) -> list[tuple[str, ...]]:
    """Where a version-3 key's number lives in version 4's RunMetrics JSON."""
    if "@" in key:
        name, judge = key.split("@", 1)
        if name == "judge_failures":
            return [("judges", judge, "failures")]
        if name == "judge_overflow":
            return [("judges", judge, "overflow")]
        return [("judges", judge, "criteria", name)]
    parts = key.split(".")
    if parts[0] in ("subject", "year"):
        axis, group, stat = parts[0], ".".join(parts[1:-1]), parts[-1]
        metric = {"subject": "f1", "year": "accuracy"}[axis]
        field = {"n": "n", "n_clusters": "n_clusters", f"{metric}_ci_low": "ci_low", f"{metric}_ci_high": "ci_high"}
        return [("breakdowns", axis, group, metric, field.get(stat, "value"))]
    if len(parts) == 2 and parts[1] == "focused_share":
        return [("breakdowns", "criterion", parts[0], "focused_share", "value")]
    if len(parts) == 2:
        return [("breakdowns", "split", parts[1], parts[0], "value")]
    if key == "design_effect":
        return [("values", primary, "design_effect")]
    for end in ("_ci_low", "_ci_high"):
        if key.endswith(end):
            return [("values", key[: -len(end)], end[1:])]
    return [("values", key, "value")]


def numbers(m: dict[str, Any], path: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    out: dict[tuple[str, ...], Any] = {}
    for k, v in m.items():
        if isinstance(v, dict):
            out.update(numbers(v, (*path, k)))
        elif k != "note":
            out[(*path, k)] = v
    return out


def get(m: dict[str, Any], path: tuple[str, ...]) -> Any:
    for p in path:
        if not isinstance(m, dict) or p not in m:
            return KeyError
        m = m[p]
    return m


def same(a: Any, b: Any) -> bool:
    """Equal numbers, exactly: both versions round the same way."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def run_metrics(old: dict[str, Any], new: dict[str, Any]) -> tuple[int, list[str], list[str]]:
    """(numbers compared, differences, v4 numbers no v3 key accounts for) of one run."""
    flat, typed, primary = old["metrics"], new["metrics"], old["primary_metric"]
    compared, differ, seen = 0, [], set()
    for key, v in flat.items():
        for path in v4_paths(key, primary, flat):
            got = get(typed, path)
            compared += 1
            seen.add(path)
            ci_withheld = path[-1] in ("ci_low", "ci_high") and v is None and got is KeyError
            if not ci_withheld and not same(v, got):
                differ.append(f"{key} = {v!r}, v4 {'/'.join(path)} = {'absent' if got is KeyError else repr(got)}")
    extra = []
    for path, v in numbers(typed).items():
        if path in seen or v is None:
            continue
        if path[-1] == "n_clusters" and path[0] == "values" and v == flat.get("n_clusters"):
            continue  # the run's clusters, given to each interval of the run
        if path[-1] in ("ci_low", "ci_high") and v is None:
            continue
        extra.append(f"{'/'.join(path)} = {v!r}")
    for path, v in numbers(typed).items():  # a withheld interval says why, as bootstrap.trusted decides
        if path[-1] == "n_clusters" and v is not None:
            mv = get(typed, path[:-1])
            if mv.get("ci_low") is None and mv.get("note") != ("n too small" if v < MIN_CLUSTERS else "no spread"):
                differ.append(f"{'/'.join(path[:-1])}: withheld, note {mv.get('note')!r} with {v} clusters")
    return compared, differ, extra


_CLOCK = ("throughput", "metrics")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    a = ap.parse_args(argv)
    old, new = (json.loads(p.read_text(encoding="utf-8")) for p in (a.old, a.new))
    if old.get("schema_version") != 3 or not isinstance(v := new.get("schema_version"), int) or v < 4:
        print(f"want a version-3 and a version-4 (or later) summary, got {old.get('schema_version')} and "
              f"{new.get('schema_version')}", file=sys.stderr)  # fmt: skip
        return 2
    by = {(r["run"], r["setting"]): r for r in new["runs"]}
    compared, differ, extra = 0, [], []
    for r in old["runs"]:
        n = by.pop((r["run"], r["setting"]), None)
        if n is None:
            differ.append(f"{r['run']} / {r['setting']}: not in NEW")
            continue
        c, d, e = run_metrics(r, n)
        compared += c
        differ += [f"{r['run']} / {r['setting']}: {x}" for x in d]
        extra += [f"{r['run']} / {r['setting']}: {x}" for x in e]
        rest = ({k: v for k, v in x.items() if k not in _CLOCK} for x in (r, n))
        if next(rest) != next(rest):
            differ.append(f"{r['run']} / {r['setting']}: the entry's other fields differ")
    differ += [f"{k[0]} / {k[1]}: not in OLD" for k in by]
    for part in ("leaderboards", "noninferiority", "ablations", "consistency", "task_reports", "failures"):
        compared += 1
        if old.get(part) != new.get(part):
            differ.append(f"{part} differ")
    print(f"v3 -> v4: {compared} numbers compared, {len(differ)} differ, {len(extra)} unaccounted")
    for line in differ + extra:
        print(f"  {line}")
    return 1 if differ or extra else 0


if __name__ == "__main__":
    sys.exit(main())
