"""Tables built from summary.json runs; rendered to Markdown and HTML by the same code."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Table:
    title: str
    header: list[str]
    rows: list[list[str]]
    note: str = ""


def _f(v: Any, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _ci(m: dict[str, Any], name: str) -> str:
    if f"{name}_ci_low" not in m:
        return _f(m.get(name))
    return f"{_f(m.get(name))} [{_f(m[name + '_ci_low'])}, {_f(m[name + '_ci_high'])}]"


def leaderboard(runs: list[dict[str, Any]]) -> Table:
    ranked = sorted(runs, key=lambda r: (-(r["metrics"].get("f1") or 0), r["run"], r["setting"]))
    rows = []
    for i, r in enumerate(ranked, 1):
        m = r["metrics"]
        rows.append([str(i), r["run"], r["setting"], _ci(m, "f1"), _ci(m, "accuracy"), _f(m.get("faithfulness")),
                     _f(m.get("parse_failures")), _f(m.get("n_skipped")), _f(m.get("n_scored"))])
    return Table("Leaderboard", ["#", "run", "setting", "F1 [95% CI]", "accuracy [95% CI]", "faithfulness",
                                 "parse failures", "skipped (overflow)", "scored"], rows,
                 "F1 takes 'true' as the positive class. Non-binary answers count as 0 (false), as in the paper. "
                 "Faithfulness is the share of answers that were a bare 1 or 0.")


def _breakdown(runs: list[dict[str, Any]], prefix: str, suffix: str, title: str) -> Table | None:
    keys = sorted({k[len(prefix):-len(suffix)] for r in runs for k in r["metrics"]
                   if k.startswith(prefix) and k.endswith(suffix)})
    if not keys:
        return None
    rows = [[r["run"], r["setting"], *[_f(r["metrics"].get(f"{prefix}{k}{suffix}")) for k in keys]] for r in runs]
    return Table(title, ["run", "setting", *keys], rows)


def throughput(runs: list[dict[str, Any]]) -> Table:
    rows = [[r["run"], r["setting"], _f(r["throughput"].get("items_per_s"), 1), _f(r["throughput"].get("wall_s"), 2),
             _f(r["throughput"].get("prompt_tokens")), _f(r["throughput"].get("output_tokens")),
             _f(r["throughput"].get("generated")), _f(r["throughput"].get("cached"))] for r in runs]
    return Table("Throughput", ["run", "setting", "items/s", "wall s", "prompt tokens", "output tokens",
                                "generated", "from store"], rows,
                 "Items served from the store cost no engine time; a re-run's items/s counts them too.")


def build_tables(summary: dict[str, Any]) -> list[Table]:
    runs = summary.get("runs", [])
    tables = [leaderboard(runs)]
    for t in (_breakdown(runs, "subject.", ".f1", "F1 per subject"),
              _breakdown(runs, "year.", ".accuracy", "Accuracy per year")):
        if t:
            tables.append(t)
    tables.append(throughput(runs))
    return tables
