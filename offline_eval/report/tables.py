"""The sweep's own tables (every task's runs, whatever the task): clusters, consistency, ablations, cost and
provenance; and the report's detail sections in order, each task's own first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from offline_eval.metrics.stats import PairedResult
from offline_eval.metrics.values import N_CLUSTERS, N_UNCLUSTERED
from offline_eval.results.records import PlainRecord, RunEntry
from offline_eval.results.summary import Summary
from offline_eval.runtime.errors import InputError
from offline_eval.runtime.i18n import _, pgettext
from offline_eval.tasks import get_task_class
from offline_eval.tasks.base import Task
from offline_eval.tasks.kit.sections import Table, fmt, sentences, stored
from offline_eval.tasks.sampled import MAJORITY_VOTE, RUN_TO_RUN_SD, SAMPLES, SAMPLES_DISAGREE

from .calibration import calibration_tables


def throughput(runs: list[RunEntry]) -> Table:
    rows = []
    thought = any(r.throughput.reasoning is not None for r in runs)  # the thinking columns where a model thought
    for r in runs:
        t = r.throughput
        think = t.reasoning
        extra = (
            [fmt(think.thinking_tokens_per_item if think else None, 1), fmt(think.cut_by_budget if think else None)]
            if thought
            else []
        )
        rows.append(
            [
                r.run,
                r.setting,
                fmt(t.items_per_s, 1),
                fmt(t.tokens_per_s, 0),
                fmt(t.peak_rss_mb, 0),
                fmt(r.weights_mb, 1),
                fmt(t.wall_s, 2),
                fmt(t.load_s, 2),
                fmt(t.prompt_tokens),
                fmt(t.output_tokens),
                fmt(t.generated),
                fmt(t.cached),
                *extra,
            ]
        )
    return Table(
        _("Cost and throughput"),
        [
            _("run"),
            _("setting"),
            _("items/s"),
            _("tokens/s"),
            _("peak memory MB"),
            _("weights MB"),
            _("wall s"),
            _("engine load s"),
            _("prompt tokens"),
            _("output tokens"),
            _("generated"),
            _("from store"),
            *([_("thinking tokens/item"), _("thinking cut by budget")] if thought else []),
        ],
        rows,
        sentences(
            _(
                "Peak memory is the resident memory of offline-eval and its engine processes (CPU RAM; GPU memory "
                "is not included). Items served from the store cost no engine time; a re-run's items/s counts "
                "them too."
            ),
            _(
                "A thinking block the budget cut was closed for the model and its answer scored as given; the count "
                "says how many."
            )
            if thought
            else "",
        ),
    )


def samples(runs: list[RunEntry]) -> Table | None:
    """Runs that answered each item k times (None: none did)."""
    rows = []
    for r in runs:
        metrics = r.metrics
        if SAMPLES.of(metrics) is None:
            continue
        rows.append(
            [
                r.run,
                r.setting,
                fmt(SAMPLES.of(metrics)),
                r.primary_metric,
                fmt(metrics.get(r.primary_metric)),
                fmt(RUN_TO_RUN_SD.of(metrics)),
                fmt(MAJORITY_VOTE.of(metrics)),
                fmt(SAMPLES_DISAGREE.of(metrics)),
            ]
        )
    if not rows:
        return None
    return Table(
        _("Repeated samples"),
        [_("run"), _("setting"), _("samples"), _("metric"), _("over all samples"), _("run-to-run SD"),
         _("majority vote"), _("items split")],
        rows,
        _(
        "Each item answered k times (seeds seed..seed+k-1): the metric is over every answer, each item weighed "
        "once; verdicts and ablations compare per-item means. Run-to-run SD: the SD of the metric across sample "
        "index, how far one run of the model may land from another. Majority vote: the share of items whose "
        "most frequent answer is right (a tie counts its answers' mean); items split: the share whose samples do "
        "not all answer alike. Both only where an answer is right or wrong."
        ),
    )  # fmt: skip


def _p(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v:.2e}" if 0 < v < 1e-3 else f"{v:.4f}"


def _statistic(c: PairedResult) -> str:
    if c.test == "mcnemar" and c.discordant:
        first, second = c.discordant
        return _("McNemar: {first} vs {second} discordant", first=first, second=second)
    return "–" if c.wilcoxon_stat is None else f"Wilcoxon W={c.wilcoxon_stat:.1f}"


def ablations(summary: Summary) -> list[Table]:
    out = []
    for fam in summary.ablations:
        rows = []
        for c in fam.comparisons:
            rows.append(
                [
                    c.comparison,
                    _statistic(c),
                    _p(c.p),
                    _p(c.p_bonf),
                    _p(c.p_holm),
                    _p(c.q_bh),
                    _p(c.bootstrap_p),
                    f"{c.hl:+.3f} [{c.hl_low:+.3f}, {c.hl_high:+.3f}]"
                    if c.hl_low is not None and c.hl_high is not None
                    else _(
                        "{hl:+.3f} (no CI: {why})", hl=c.hl, why=stored(c.undefined) if c.undefined else _("undefined")
                    ),
                    fmt(c.cohens_d),
                    _p(c.t_p),
                ]
            )
        clusters = fam.n_clusters
        note = sentences(
            _("{n} items scored by every member, in {clusters} clusters.", n=fam.n_items, clusters=clusters)
            if clusters is not None and clusters != fam.n_items
            else _("{n} items scored by every member.", n=fam.n_items),
            _(
                "McNemar's exact test where both members' per-item scores are right/wrong (0/1), the Wilcoxon "
                "signed-rank test on graded scores; Bonferroni, Holm and Benjamini-Hochberg of that p across this "
                "family; beside it, the p of a bootstrap that resamples clusters (the statements of one exam question "
                "together), which the item-level tests do not account for; Hodges-Lehmann shift of the paired "
                "differences (first minus second) with a 95% cluster-bootstrap CI; Cohen's d_z and the paired t-test "
                "p (graded scores)."
            ),
        )
        if not rows:
            note = _("{n} shared items: too few to compare.", n=fam.n_items)
        out.append(
            Table(
                _("Ablation: {family}", family=stored(fam.family)),
                [
                    _("comparison"),
                    _("statistic"),
                    _("raw p"),
                    "pBonf",
                    "pHolm",
                    "qBH",
                    _("cluster-bootstrap p"),
                    _("HL [95% CI]"),
                    "Cohen's d",
                    _("t-test p"),
                ],
                rows,
                note,
            )
        )
    return out


def consistency(summary: Summary) -> Table | None:
    rows = []
    for c in summary.consistency:
        share = c.identical
        rows.append(
            [
                c.setting,
                c.run_a,
                c.run_b,
                fmt(c.n_items),
                "–" if share is None else f"{100 * share:.1f}%",
                fmt(c.kappa),
                "–" if c.delta is None else f"{c.metric} {c.delta:+.3f}",
                f"{_p(c.p)} ({c.paired_test})",
                fmt(c.mean_abs_diff_p_true, 4),
            ]
        )
    if not rows:
        return None
    return Table(
        _("Same weights, different engines"),
        [
            _("setting"),
            _("run A"),
            _("run B"),
            _("items"),
            _("identical answers"),
            _("Cohen's kappa"),
            _("difference (A - B)"),
            _("paired p"),
            _("mean |ΔP(true)|"),
        ],
        rows,
        _(
        "Pairs of runs whose models declare `same_weights_as` each other, on the items both answered. "
        "The paired test is McNemar's exact test on per-item correctness (Wilcoxon for graded scores); "
        "mean |ΔP(true)| compares the label probabilities of logprob settings."
        ),
    )  # fmt: skip


def _clusters(runs: list[RunEntry]) -> str:
    """What a cluster is, in each task of these runs, as the task declares it."""
    found = [task_class(t) for t in sorted({r.task for r in runs})]
    return "; ".join(f"{c.title or c.name}: {_(c.clusters)}" for c in found if c.clusters) or _("each item its own")


def clusters(runs: list[RunEntry]) -> Table:
    """Per run and setting: items, clusters, items with no cluster, and the primary metric's design effect."""
    rows = [
        [
            r.run,
            r.setting,
            fmt(r.n_items),
            fmt(N_CLUSTERS.of(r.metrics)),
            fmt(N_UNCLUSTERED.of(r.metrics)),
            f"{r.primary_metric} {fmt(_design_effect(r), 2)}",
        ]
        for r in runs
    ]
    unclustered = sum(int(N_UNCLUSTERED.of(r.metrics) or 0) for r in runs)
    note = sentences(
        _(
            "Every CI in this report is clustered: its bootstrap resamples clusters, not items ({clusters}), "
            "and the paired right/wrong intervals are widened by the design effect. The design effect is the variance "
            "of the clustered bootstrap over that of an item bootstrap, for the primary metric: 1 where items are "
            "independent, about 1 + (m - 1) ICC for questions of m correlated statements; an item-level CI would be "
            "narrower by its square root.",
            clusters=_clusters(runs),
        ),
        _(
            "{n} item(s) had an id of another shape and no cluster: each counts as its own, which understates the "
            "design effect if they share questions.",
            n=unclustered,
        )
        if unclustered
        else "",
    )
    return Table(
        _("Clusters and design effects"),
        [_("run"), _("setting"), _("items"), _("clusters"), _("items without a cluster"),
         _("design effect (primary metric)")],
        rows,
        note,
    )  # fmt: skip


def provenance(summary: Summary) -> list[Table]:
    """What produced the numbers: the code and machine, each load's weights and engine, each setting's data."""
    prov = summary.provenance
    if not prov:
        return []
    sw = prov.sweep

    def known(key: str, shown: str | None) -> str:
        return (
            shown
            if shown is not None
            else _("unknown: {why}", why=stored(sw.unknown[key]) if key in sw.unknown else _("not recorded"))
        )

    gpus = sw.gpus
    revision = sw.git_revision and (
        _("{revision} (dirty)", revision=sw.git_revision) if sw.git_dirty else sw.git_revision
    )
    gpu_names = ", ".join(_("{gpu} (driver {driver})", gpu=g.name, driver=g.driver) for g in gpus or [])
    not_a_file = _("not a file")
    rows = [
        ["offline-eval", sw.offline_eval_version],
        [_("git revision"), known("git_revision", revision)],
        [_("command"), " ".join(sw.command)],
        [_("config"), f"{sw.config or not_a_file} (sha256 {sw.config_sha256[:16]}…)"],
        ["Python, OS", f"{sw.python}, {sw.os}"],
        ["CPU", f"{known('cpu_model', sw.cpu_model)} x {sw.cpu_count}"],
        ["GPUs", known("gpus", None if gpus is None else gpu_names or _("none"))],
        [_("engine libraries"), ", ".join(f"{k} {v}" for k, v in sorted(sw.libraries.items())) or _("none installed")],
        [_("started, ended"), f"{sw.started}, {sw.ended}"],
    ]
    loads = [
        [
            x.run,
            pgettext("role", x.role),
            f"{x.engine} ({x.engine_version})",
            (x.weights_digest or "–")[:16],
            str(len(x.files or [])),
            x.prompt_format + (f" {x.chat_template_sha256[:12]}" if x.chat_template_sha256 else ""),
            x.store_fingerprint[:16],
        ]
        for x in prov.loads
    ]
    settings = [
        [
            x.setting,
            str(x.n_items),
            "; ".join(f"{Path(f.path).name} {f.sha256[:12]}" for f in x.data_files) or "–",
            x.prompt_template_sha256[:12],
            x.constraint_kind,
        ]
        for x in prov.settings
    ]
    return [
        Table(
            _("Provenance: the sweep"), [_("what"), _("value")], rows, _("Read locally; nothing contacts a network.")
        ),
        Table(
            _("Provenance: each load"),
            [
                _("run"),
                _("role"),
                _("engine"),
                _("weights sha256"),
                _("files"),
                _("prompt format"),
                _("store fingerprint"),
            ],
            loads,
            _(
                "Every weights file is listed with its size and full sha256 in summary.json; `offline-eval verify` "
                "hashes them again."
            ),
        ),
        Table(
            _("Provenance: each task setting"),
            [_("setting"), _("items"), _("data files (sha256)"), _("prompt template sha256"), _("constraint")],
            settings,
        ),  # fmt: skip
    ]


def detail_sections(summary: Summary) -> list[tuple[str, list[Table]]]:
    """The report's details, below its first screen: each task's own sections (every metric, breakdowns, its
    paper's tables), then what every sweep has."""
    runs = summary.runs
    out: list[tuple[str, list[Table]]] = []
    for name in sorted({r.task for r in runs}):
        task = task_class(name)
        tables = task.report_parts.tables(task, [r for r in runs if r.task == name], summary)
        out.append((_("{task}: details", task=name), tables))
    if calibrated := calibration_tables(summary):
        out.append((_("Calibration by human labels"), calibrated))
    out.append((_("Clusters and design effects"), [clusters(runs)]))
    same = consistency(summary)
    if same:
        out.append((same.title, [same]))
    fams = ablations(summary)
    if fams:
        out.append((_("Pairwise ablation tests ({n} families)", n=len(fams)), fams))
    if (repeated := samples(runs)) is not None:
        out.append((repeated.title, [repeated]))
    out.append((_("Cost and throughput"), [throughput(runs)]))
    prov = provenance(summary)
    if prov:
        out.append((_("Provenance"), prov))
    return out


def task_class(name: str) -> type[Task[Any, Any]]:
    """The task's class, or a stand-in that ranks by the runs' recorded primary metric (a task this
    installation no longer has still gets a leaderboard)."""

    try:
        return get_task_class(name)
    except InputError:
        return type(f"Unknown_{name}", (_Unknown,), {"name": name})


# A load's role, as summary.json stores it: translated where shown ("evaluator" is a judge or LegalEval-Q's evaluator).
ROLES = (pgettext("role", "candidate"), pgettext("role", "evaluator"))


class _Unknown(Task[Any, PlainRecord]):
    Record = PlainRecord


def _design_effect(run: RunEntry) -> float | None:
    mv = run.metrics.metric(run.primary_metric)
    return mv.design_effect if mv is not None else None
