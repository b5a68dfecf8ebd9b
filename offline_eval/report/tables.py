"""Tables built from summary.json runs; rendered to Markdown and HTML by the same code."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..metrics.ranking import has_score, rank_key


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


def quality_leaderboard(runs: list[dict[str, Any]], task: str) -> Table:
    """LegalEval-Q: ranked by AdjScore = mu^2 / (mu + sigma)."""
    from ..metrics.adjscore import tier

    ranked = sorted(runs, key=lambda r: rank_key(r["metrics"].get("adj_score"), r["run"]))
    rows = []
    for i, r in enumerate(ranked, 1):
        m = r["metrics"]
        adj = m.get("adj_score")
        rows.append([str(i) if has_score(adj) else "– (no items)", r["run"], _f(m.get("mean"), 2), _f(m.get("std"), 2), _f(m.get("median"), 2),
                     _f(adj, 2), tier(adj) if isinstance(adj, (int, float)) else "–",
                     _f(m.get("adj_score_delta"), 2), _f(m.get("n_scored")), _f(m.get("evaluator_parse_failures")),
                     _f(m.get("truncated_answers")), (r.get("evaluator") or {}).get("run", "–")])
    return Table(f"Leaderboard: {task}", ["#", "run", "mean", "std", "median", "AdjScore", "tier",
                                          "AdjScore validation - train", "scored", "evaluator parse failures",
                                          "answers cut off", "evaluator"], rows,
                 "Scores 0-100 from the regression scorer over the evaluator's Comment and Conclusion. AdjScore = "
                 "mu^2/(mu+sigma) with the population std; tier: >= 90 high, 70-90 mid, < 70 low.")


def leaderboard(runs: list[dict[str, Any]], task: str) -> Table:
    if task == "legalevalq":
        return quality_leaderboard(runs, task)
    ranked = sorted(runs, key=lambda r: rank_key(r["metrics"].get("f1"), r["run"], r["setting"]))
    rows = []
    for i, r in enumerate(ranked, 1):
        m = r["metrics"]
        if not has_score(m.get("f1")):
            rows.append(["–", r["run"], r["setting"], "no items", "no items", "–", _f(m.get("parse_failures")),
                         _f(m.get("n_skipped")), _f(m.get("n_scored"))])
            continue
        rows.append([str(i), r["run"], r["setting"], _ci(m, "f1"), _ci(m, "accuracy"), _f(m.get("faithfulness")),
                     _f(m.get("parse_failures")), _f(m.get("n_skipped")), _f(m.get("n_scored"))])
    return Table(f"Leaderboard: {task}", ["#", "run", "setting", "F1 [95% CI]", "accuracy [95% CI]", "faithfulness",
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
    rows = []
    for r in runs:
        t = r["throughput"]
        rows.append([r["run"], r["setting"], _f(t.get("items_per_s"), 1), _f(t.get("tokens_per_s"), 0),
                     _f(t.get("peak_rss_mb"), 0), _f(r.get("weights_mb"), 1), _f(t.get("wall_s"), 2),
                     _f(t.get("prompt_tokens")), _f(t.get("output_tokens")), _f(t.get("generated")),
                     _f(t.get("cached"))])
    return Table("Cost and throughput", ["run", "setting", "items/s", "tokens/s", "peak memory MB", "weights MB",
                                         "wall s", "prompt tokens", "output tokens", "generated", "from store"], rows,
                 "Peak memory is the resident memory of offline-eval and its engine processes (CPU RAM; GPU memory "
                 "is not included). Items served from the store cost no engine time; a re-run's items/s counts "
                 "them too.")


def _p(v: Any) -> str:
    if v is None:
        return "–"
    return f"{v:.2e}" if 0 < v < 1e-3 else f"{v:.4f}"


def ablations(summary: dict[str, Any]) -> list[Table]:
    out = []
    for fam in summary.get("ablations") or []:
        rows = []
        for c in fam["comparisons"]:
            stat = "–" if c["wilcoxon_stat"] is None else f"W={c['wilcoxon_stat']:.1f}"
            rows.append([c["comparison"], stat, _p(c["wilcoxon_p"]), _p(c["p_bonf"]), _p(c["p_holm"]),
                         _p(c["q_bh"]), f"{c['hl']:+.3f} [{c['hl_low']:+.3f}, {c['hl_high']:+.3f}]",
                         _f(c["cohens_d"]), _p(c["t_p"])])
        note = (f"{fam['n_items']} items scored by every member. Wilcoxon signed-rank on per-item scores; "
                "Bonferroni, Holm and Benjamini-Hochberg across this family; Hodges-Lehmann shift of the paired "
                "differences (first minus second) with a 95% bootstrap CI; Cohen's d_z and the paired t-test p.")
        if not rows:
            note = f"{fam['n_items']} shared items: too few to compare."
        out.append(Table(f"Ablation: {fam['family']}", ["comparison", "statistic", "raw p", "pBonf", "pHolm", "qBH",
                                                        "HL [95% CI]", "Cohen's d", "t-test p"], rows, note))
    return out


def consistency(summary: dict[str, Any]) -> Table | None:
    rows = []
    for c in summary.get("consistency") or []:
        share = c.get("identical")
        rows.append([c["setting"], c["run_a"], c["run_b"], _f(c.get("n_items")),
                     "–" if share is None else f"{100 * share:.1f}%", _f(c.get("kappa")),
                     "–" if c.get("delta") is None else f"{c['metric']} {c['delta']:+.3f}",
                     f"{_p(c.get('p'))} ({c.get('paired_test')})", _f(c.get("mean_abs_diff_p_true"), 4)])
    if not rows:
        return None
    return Table("Same weights, different engines", ["setting", "run A", "run B", "items", "identical answers",
                                                     "Cohen's kappa", "difference (A - B)", "paired p",
                                                     "mean |ΔP(true)|"], rows,
                 "Pairs of runs whose models declare `same_weights_as` each other, on the items both answered. "
                 "The paired test is McNemar's exact test on per-item correctness (Wilcoxon for graded scores); "
                 "mean |ΔP(true)| compares the label probabilities of logprob settings.")


def build_tables(summary: dict[str, Any]) -> list[Table]:
    from .legalrikai import legalrikai_tables

    runs = summary.get("runs", [])
    own = {"legalrikai"}  # tasks with tables of their own layout
    tables = [leaderboard([r for r in runs if r["task"] == task], task)
              for task in sorted({r["task"] for r in runs} - own)]
    tables += legalrikai_tables(summary)
    for t in (_breakdown(runs, "subject.", ".f1", "JBE-QA: F1 per subject"),
              _breakdown(runs, "year.", ".accuracy", "JBE-QA: accuracy per year")):
        if t:
            tables.append(t)
    same = consistency(summary)
    if same:
        tables.append(same)
    tables += ablations(summary)
    tables.append(throughput(runs))
    return tables
