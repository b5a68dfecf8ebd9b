"""Tables built from summary.json runs; rendered to Markdown and HTML by the same code."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..metrics.bootstrap import MIN_CLUSTERS
from ..metrics.ranking import has_score
from ..results import PlainRecord
from ..tasks.base import Metric, Task


@dataclass
class Table:
    title: str
    header: list[str]
    rows: list[list[str]]
    note: str = ""
    classes: list[list[str]] | None = None  # per cell: a CSS class of report.html (e.g. a verdict's colour)
    styles: list[list[str]] | None = None  # per cell: inline CSS (e.g. a heat colour)


def _f(v: Any, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def ci_text(m: dict[str, Any], name: str, digits: int = 3, clusters: str = "n_clusters") -> str:
    """A metric with its 95% CI, "v [lo, hi]"; where the CI was withheld, why: "n too small" (fewer clusters than
    a bootstrap needs) or "no spread" (every resample gave the same value), never a point interval [v, v]."""
    if f"{name}_ci_low" not in m or not has_score(m.get(name)):
        return _f(m.get(name), digits)
    lo, hi = m.get(f"{name}_ci_low"), m.get(f"{name}_ci_high")
    if lo is None or hi is None:
        n = m.get(clusters)
        why = "no spread" if isinstance(n, int) and n >= MIN_CLUSTERS else "n too small"
        return f"{_f(m.get(name), digits)} ({why}{f': {n} clusters' if isinstance(n, int) else ''})"
    return f"{_f(m.get(name), digits)} [{_f(lo, digits)}, {_f(hi, digits)}]"


VIOLATIONS = "constraint_violations"  # answers that broke their constraint (scored as parse failures)


def ranked(summary: dict[str, Any], setting: str) -> list[tuple[int | None, str]]:
    """(rank, run) in the order of the summary's leaderboard for one setting, where the sweep ranked the runs
    once (best first, which way is better being the task's): runs with the same value share a rank; a run with
    no score has none."""
    out: list[tuple[int | None, str]] = []
    rows = (summary.get("leaderboards") or {}).get(setting) or []
    for i, row in enumerate(rows):
        if not has_score(row.get("value")):
            out.append((None, row["run"]))
        elif i and rows[i - 1].get("value") == row["value"] and out[-1][0] is not None:
            out.append((out[-1][0], row["run"]))
        else:
            out.append((i + 1, row["run"]))
    return out


def leaderboard(task: type[Task], runs: list[dict[str, Any]], summary: dict[str, Any]) -> Table:
    """A task's runs per setting, in the summary's ranking by the primary metric, one column per declared metric
    (CIs where declared)."""
    metrics = task.metrics or (Metric(task.primary_metric, task.primary_metric),)
    if any(VIOLATIONS in r["metrics"] for r in runs):  # every task's runs carry it: next to its parse failures
        at = next((i + 1 for i, x in enumerate(metrics) if "failures" in x.name), len(metrics))
        metrics = (*metrics[:at], Metric(VIOLATIONS, "constraint violations", False), *metrics[at:])
    primary = metrics[0]
    by_key = {(r["run"], r["setting"]): r for r in runs}
    rows = []
    for setting in sorted({r["setting"] for r in runs}):
        for rank, run in ranked(summary, setting):
            r = by_key.get((run, setting))
            if r is None:
                continue
            m = r["metrics"]
            scored = has_score(m.get(primary.name))
            cells = [
                (ci_text(m, x.name, x.digits) if x.ci else _f(m.get(x.name), x.digits))
                if scored or not x.ci
                else "no items"
                for x in metrics
            ]
            rows.append([str(rank) if rank is not None else "–", r["run"], r["setting"], *cells])
    header = ["#", "run", "setting", *[x.label + (" [95% CI]" if x.ci else "") for x in metrics]]
    note = f"Ranked within each setting by {primary.label}. {task.leaderboard_note}".strip()
    return Table(f"{task.name}: every metric per run", header, rows, note)


def breakdown(runs: list[dict[str, Any]], prefix: str, suffix: str, title: str) -> Table | None:
    """One column per key found between prefix and suffix in the runs' metrics (per subject, per year...)."""
    keys = sorted(
        {
            k[len(prefix) : -len(suffix)]
            for r in runs
            for k in r["metrics"]
            if k.startswith(prefix) and k.endswith(suffix)
        }
    )
    if not keys:
        return None
    rows = [
        [
            r["run"],
            r["setting"],
            *[ci_text(r["metrics"], f"{prefix}{k}{suffix}", clusters=f"{prefix}{k}.n_clusters") for k in keys],
        ]
        for r in runs
    ]
    note = (
        "[95% CI]: a bootstrap that resamples clusters within the group (JBE-QA: exam questions); "
        f"'n too small' where the group has fewer than {MIN_CLUSTERS} clusters."
    )
    return Table(title, ["run", "setting", *keys], rows, note)


def throughput(runs: list[dict[str, Any]]) -> Table:
    rows = []
    for r in runs:
        t = r["throughput"]
        rows.append(
            [
                r["run"],
                r["setting"],
                _f(t.get("items_per_s"), 1),
                _f(t.get("tokens_per_s"), 0),
                _f(t.get("peak_rss_mb"), 0),
                _f(r.get("weights_mb"), 1),
                _f(t.get("wall_s"), 2),
                _f(t.get("load_s"), 2),
                _f(t.get("prompt_tokens")),
                _f(t.get("output_tokens")),
                _f(t.get("generated")),
                _f(t.get("cached")),
            ]
        )
    return Table(
        "Cost and throughput",
        [
            "run",
            "setting",
            "items/s",
            "tokens/s",
            "peak memory MB",
            "weights MB",
            "wall s",
            "engine load s",
            "prompt tokens",
            "output tokens",
            "generated",
            "from store",
        ],
        rows,
        "Peak memory is the resident memory of offline-eval and its engine processes (CPU RAM; GPU memory "
        "is not included). Items served from the store cost no engine time; a re-run's items/s counts "
        "them too.",
    )


def _p(v: Any) -> str:
    if v is None:
        return "–"
    return f"{v:.2e}" if 0 < v < 1e-3 else f"{v:.4f}"


def _statistic(c: dict[str, Any]) -> str:
    if c.get("test") == "mcnemar" and c.get("discordant"):
        first, second = c["discordant"]
        return f"McNemar: {first} vs {second} discordant"
    return "–" if c.get("wilcoxon_stat") is None else f"Wilcoxon W={c['wilcoxon_stat']:.1f}"


def ablations(summary: dict[str, Any]) -> list[Table]:
    out = []
    for fam in summary.get("ablations") or []:
        rows = []
        for c in fam["comparisons"]:
            rows.append(
                [
                    c["comparison"],
                    _statistic(c),
                    _p(c["p"]),
                    _p(c["p_bonf"]),
                    _p(c["p_holm"]),
                    _p(c["q_bh"]),
                    _p(c.get("bootstrap_p")),
                    f"{c['hl']:+.3f} [{c['hl_low']:+.3f}, {c['hl_high']:+.3f}]",
                    _f(c["cohens_d"]),
                    _p(c["t_p"]),
                ]
            )
        clusters = fam.get("n_clusters")
        note = (
            f"{fam['n_items']} items scored by every member"
            + (f", in {clusters} clusters" if clusters is not None and clusters != fam["n_items"] else "")
            + ". McNemar's exact test where both members' per-item scores are right/wrong (0/1), the Wilcoxon "
            "signed-rank test on graded scores; Bonferroni, Holm and Benjamini-Hochberg of that p across this "
            "family; beside it, the p of a bootstrap that resamples clusters (the statements of one exam question "
            "together), which the item-level tests do not account for; Hodges-Lehmann shift of the paired "
            "differences (first minus second) with a 95% cluster-bootstrap CI; Cohen's d_z and the paired t-test "
            "p (graded scores)."
        )
        if not rows:
            note = f"{fam['n_items']} shared items: too few to compare."
        out.append(
            Table(
                f"Ablation: {fam['family']}",
                [
                    "comparison",
                    "statistic",
                    "raw p",
                    "pBonf",
                    "pHolm",
                    "qBH",
                    "cluster-bootstrap p",
                    "HL [95% CI]",
                    "Cohen's d",
                    "t-test p",
                ],
                rows,
                note,
            )
        )
    return out


def consistency(summary: dict[str, Any]) -> Table | None:
    rows = []
    for c in summary.get("consistency") or []:
        share = c.get("identical")
        rows.append(
            [
                c["setting"],
                c["run_a"],
                c["run_b"],
                _f(c.get("n_items")),
                "–" if share is None else f"{100 * share:.1f}%",
                _f(c.get("kappa")),
                "–" if c.get("delta") is None else f"{c['metric']} {c['delta']:+.3f}",
                f"{_p(c.get('p'))} ({c.get('paired_test')})",
                _f(c.get("mean_abs_diff_p_true"), 4),
            ]
        )
    if not rows:
        return None
    return Table(
        "Same weights, different engines",
        [
            "setting",
            "run A",
            "run B",
            "items",
            "identical answers",
            "Cohen's kappa",
            "difference (A - B)",
            "paired p",
            "mean |ΔP(true)|",
        ],
        rows,
        "Pairs of runs whose models declare `same_weights_as` each other, on the items both answered. "
        "The paired test is McNemar's exact test on per-item correctness (Wilcoxon for graded scores); "
        "mean |ΔP(true)| compares the label probabilities of logprob settings.",
    )


def clusters(runs: list[dict[str, Any]]) -> Table:
    """Per run and setting: items, clusters, items with no cluster, and the primary metric's design effect."""
    rows = [
        [
            r["run"],
            r["setting"],
            _f(r.get("n_items")),
            _f(r["metrics"].get("n_clusters")),
            _f(r["metrics"].get("n_unclustered")),
            f"{r.get('primary_metric')} {_f(r['metrics'].get('design_effect'), 2)}",
        ]
        for r in runs
    ]
    unclustered = sum(int(r["metrics"].get("n_unclustered") or 0) for r in runs)
    note = (
        "Every CI in this report is clustered: its bootstrap resamples clusters, not items (JBE-QA: the exam "
        "question, parsed from the release's id, e.g. 令和５年-民法-１８-１ is statement 1 of question 18; "
        "LegalEval-Q: the question; LegalRikai: the source item), and the paired right/wrong intervals are "
        "widened by the design effect. The design effect is the variance of the clustered bootstrap over that "
        "of an item bootstrap, for the primary metric: 1 where items are independent, about 1 + (m - 1) ICC "
        "for questions of m correlated statements; an item-level CI would be narrower by its square root."
    )
    if unclustered:
        note += (
            f" {unclustered} item(s) had an id of another shape and no cluster: each counts as its own, which "
            "understates the design effect if they share questions."
        )
    return Table(
        "Clusters and design effects",
        ["run", "setting", "items", "clusters", "items without a cluster", "design effect (primary metric)"],
        rows,
        note,
    )


def provenance(summary: dict[str, Any]) -> list[Table]:
    """What produced the numbers: the code and machine, each load's weights and engine, each setting's data."""
    prov = summary.get("provenance")
    if not prov:
        return []
    sw = prov["sweep"]
    unknown = sw.get("unknown") or {}

    def known(key: str, shown: str | None) -> str:
        return shown if shown is not None else f"unknown: {unknown.get(key, 'not recorded')}"

    gpus = sw.get("gpus")
    rows = [
        ["offline-eval", sw["offline_eval_version"]],
        [
            "git revision",
            known(
                "git_revision",
                sw.get("git_revision") and sw["git_revision"] + (" (dirty)" if sw.get("git_dirty") else ""),
            ),
        ],
        ["command", " ".join(sw["command"])],
        ["config", f"{sw.get('config') or 'not a file'} (sha256 {sw['config_sha256'][:16]}…)"],
        ["Python, OS", f"{sw['python']}, {sw['os']}"],
        ["CPU", f"{known('cpu_model', sw.get('cpu_model'))} x {sw.get('cpu_count')}"],
        [
            "GPUs",
            known(
                "gpus",
                None if gpus is None else ", ".join(f"{g['name']} (driver {g['driver']})" for g in gpus) or "none",
            ),
        ],
        ["engine libraries", ", ".join(f"{k} {v}" for k, v in sorted(sw["libraries"].items())) or "none imported"],
        ["started, ended", f"{sw['started']}, {sw.get('ended')}"],
    ]
    loads = [
        [
            x["run"],
            x["role"],
            f"{x['engine']} ({x['engine_version']})",
            (x.get("weights_digest") or "–")[:16],
            str(len(x.get("files") or [])),
            x["prompt_format"] + (f" {x['chat_template_sha256'][:12]}" if x.get("chat_template_sha256") else ""),
            x["store_fingerprint"][:16],
        ]
        for x in prov["loads"]
    ]
    settings = [
        [
            x["setting"],
            str(x["n_items"]),
            "; ".join(f"{Path(f['path']).name} {f['sha256'][:12]}" for f in x["data_files"]) or "–",
            x["prompt_template_sha256"][:12],
            (x.get("constraint") or {}).get("type", "none"),
        ]
        for x in prov["settings"]
    ]
    return [
        Table("Provenance: the sweep", ["what", "value"], rows, "Read locally; nothing contacts a network."),
        Table(
            "Provenance: each load",
            ["run", "role", "engine", "weights sha256", "files", "prompt format", "store fingerprint"],
            loads,
            "Every weights file is listed with its size and full sha256 in summary.json; `offline-eval verify` "
            "hashes them again.",
        ),
        Table(
            "Provenance: each task setting",
            ["setting", "items", "data files (sha256)", "prompt template sha256", "constraint"],
            settings,
        ),
    ]


def detail_sections(summary: dict[str, Any]) -> list[tuple[str, list[Table]]]:
    """The report's details, below its first screen: each task's own sections (every metric, breakdowns, its
    paper's tables), then what every sweep has."""
    runs = summary.get("runs", [])
    out: list[tuple[str, list[Table]]] = []
    for name in sorted({r["task"] for r in runs}):
        out.append(
            (f"{name}: details", task_class(name).report_tables([r for r in runs if r["task"] == name], summary))
        )
    out.append(("Clusters and design effects", [clusters(runs)]))
    same = consistency(summary)
    if same:
        out.append((same.title, [same]))
    fams = ablations(summary)
    if fams:
        out.append((f"Pairwise ablation tests ({len(fams)} families)", fams))
    out.append(("Cost and throughput", [throughput(runs)]))
    prov = provenance(summary)
    if prov:
        out.append(("Provenance", prov))
    return out


def task_class(name: str) -> type[Task]:
    """The task's class, or a stand-in that ranks by the runs' recorded primary metric (a task this
    installation no longer has still gets a leaderboard)."""
    from ..errors import InputError
    from ..tasks import get_task_class

    try:
        return get_task_class(name)
    except InputError:
        return type(f"Unknown_{name}", (_Unknown,), {"name": name})


class _Unknown(Task):
    Record = PlainRecord
