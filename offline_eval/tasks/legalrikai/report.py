"""LegalRikai tables in the paper's layout: scores (Table 6), kappa (Table 5), Spearman (Table 7), MAE (Table 8).
Top: AmendExp (CA AA RA CI AI RI); bottom: the revision tasks (IF SC CP TA WA)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from offline_eval.metrics.agreement import format_rho
from offline_eval.runtime.i18n import N_, _
from offline_eval.tasks.kit import N_SKIPPED, OURS, BrowserView, Number, ReportParts, Table
from offline_eval.tasks.kit.parts import TaskClass
from offline_eval.tasks.kit.sections import fmt, sentences

from . import rubric
from .metrics import FORMAT_FAILURES, N_FOCUSED, N_FULL, N_JUDGED, TRUNCATED
from .record import LegalRikaiRecord
from .sweepreport import Agreement, AlphaCell, BiasCell, KappaCell, LegalRikaiReport, MaeCell, RhoCell, Setting

if TYPE_CHECKING:
    from offline_eval.results.summary import Summary
    from offline_eval.tasks.kit import RunEntry

_NAMES = rubric.NAMES
_REVISION = ("statrev", "reqrev", "riskrev")


_AMENDEXP = "amendexp"
# The criteria's codes as column headers: a translation gives the rubric's name with the code beside it (glossary).
_CODES = (N_("IF"), N_("SC"), N_("CP"), N_("TA"), N_("WA"), N_("CA"), N_("AA"), N_("RA"), N_("CI"), N_("AI"), N_("RI"))


def _heads(crits: list[str]) -> list[str]:
    return [_(k) for k in crits]


def _groups(rep: LegalRikaiReport) -> list[tuple[str, list[str], list[str]]]:
    """(title suffix, sub-tasks, criteria) for AmendExp and for the revision tasks present."""
    subs = rep.subtasks
    out = []
    if _AMENDEXP in subs:
        out.append(("AmendExp", [_AMENDEXP], rep.criteria[_AMENDEXP]))
    rev = [s for s in _REVISION if s in subs]
    if rev:
        out.append(("StatRev, ReqRev, RiskRev", rev, rep.criteria[rev[0]]))
    return out


def _v(x: Number) -> str:
    return fmt(x if x is None else float(x), 2)  # a mean, also where every record counted a whole number


def score_tables(rep: LegalRikaiReport) -> list[Table]:
    n = len(rep.judges)
    tables = []
    for title, subs, crits in _groups(rep):
        rows = []
        for s in (s for s in rep.scores if s.subtask in subs):
            c = s.checks
            det = (
                []
                if title == "AmendExp"
                else [
                    fmt(c.diff_chars, 0),
                    _v(c.changed_precision),
                    _v(c.changed_recall),
                    _v(c.introduced_defects),
                ]
            )
            rows.append(
                [
                    _NAMES[s.subtask],
                    s.run,
                    *[_v(s.Avg.get(k)) for k in crits],
                    _v(s.score),
                    *det,
                    f"{s.inputs.full}/{s.inputs.focused}/{s.inputs.skipped}",
                    ", ".join(f"{v}" for v in s.judge_failures.values()) or "–",
                ]
            )
        det_head = (
            [] if title == "AmendExp" else [_("diff chars"), _("changed P"), _("changed R"), _("defects introduced")]
        )
        tables.append(
            Table(
                _("LegalRikai {title}: judge scores (Avg of {n} judge(s), Table 6 layout)", title=title, n=n),
                [
                    _("task"),
                    _("run"),
                    *_heads(crits),
                    _("mean"),
                    *det_head,
                    _("inputs full/focused/skipped"),
                    _("judge failures"),
                ],
                rows,
                _(
                    "Each judge's score s is mapped to [0, 1] as (s - min)/(max - min); Avg is the mean over "
                    "the judges that answered, then over items (under protocol paper, an answer cut off by its cap is "
                    "not judged and counts in no mean: see 'answers cut off'). Deterministic columns (Japanese toolkit): "
                    "characters changed against the input contract, precision/recall of changed articles "
                    "against the gold, structure defects the output introduced (per item). Judge failures "
                    "(unparseable, cut off or overflowing answers) are per judge, in the order: {judges}.",
                    judges=", ".join(rep.judges),
                ),
            )
        )
        rows = [
            [_NAMES[s.subtask], s.run, j, *[_v(v.get(k)) for k in crits]]
            for s in rep.scores
            if s.subtask in subs
            for j, v in s.judges.items()
        ]
        if rows:
            tables.append(
                Table(
                    _("LegalRikai {title}: scores per judge", title=title),
                    [_("task"), _("run"), _("judge"), *_heads(crits)],
                    rows,
                )
            )
    return tables


def agreement_tables(rep: LegalRikaiReport) -> list[Table]:
    h = rep.human
    if h is None:
        return []
    judges = [*rep.judges, "Avg"]
    tables = []
    fields = {"rows": h.rows, "file": h.file, "outputs": h.matched_outputs}
    note = (
        _("{rows} human score rows from {file}, matched to {outputs} outputs; not matched: {unmatched}.",
          **fields, unmatched="; ".join(h.unmatched))
        if h.unmatched
        else _("{rows} human score rows from {file}, matched to {outputs} outputs.", **fields)
    )  # fmt: skip
    for title, subs, crits in _groups(rep):
        subs = [s for s in subs if s in h.kappa]
        if subs:
            tables += _annotator_tables(h, title, subs, crits) + _judge_vs_human_tables(
                h, title, subs, crits, judges, note
            )
    return tables


def _annotator_tables(h: Agreement, title: str, subs: list[str], crits: list[str]) -> list[Table]:
    """The annotators' own numbers: their scores, and their agreement with one another."""
    tables = []
    rows = [
        [_NAMES[s], run, *[_v(v.get(k)) for k in crits]] for s in subs for run, v in sorted(h.human_scores[s].items())
    ]
    tables.append(
        Table(
            _("LegalRikai {title}: human scores (Table 6)", title=title),
            [_("task"), _("model"), *_heads(crits)],
            rows,
            _("Annotators' scores mapped to [0, 1]; several annotators of one output are averaged."),
        )
    )
    rows = [[_NAMES[s], *[_kappa(h.kappa[s].get(k)) for k in crits]] for s in subs]
    tables.append(
        Table(
            _("LegalRikai {title}: Cohen's kappa between annotators (Table 5)", title=title),
            [_("task"), *_heads(crits)],
            rows,
            _(
                "nan: every output got the same label, so kappa is undefined (as in the paper). n: outputs both "
                "annotators scored (the most of any pair)."
            ),
        )
    )
    if any(h.alpha.get(s) for s in subs):
        rows = [[_NAMES[s], *[_alpha(h.alpha.get(s, {}).get(k)) for k in crits]] for s in subs]
        tables.append(
            Table(
                _("LegalRikai {title}: agreement among the annotators (Krippendorff's alpha, ordinal)", title=title),
                [_("task"), *_heads(crits)],
                rows,
                _(
                    "Over the outputs two annotators or more scored (n per cell), any number of annotators and "
                    "missing scores allowed; 1 = perfect agreement, 0 = what chance gives. From the `krippendorff` "
                    "package."
                ),
            )
        )
    return tables


def _judge_vs_human_tables(
    h: Agreement, title: str, subs: list[str], crits: list[str], judges: list[str], note: str
) -> list[Table]:
    """The judges against the annotators: rank correlation, error in the rubric's points and on [0, 1], bias."""
    tables = []
    rows = [[_NAMES[s], j, *[_rho(h.spearman[s][j].get(k)) for k in crits]] for s in subs for j in judges]
    tables.append(
        Table(
            _("LegalRikai {title}: Spearman's rho, judges vs humans (Table 7)", title=title),
            [_("task"), _("judge"), *_heads(crits)],
            rows,
            sentences(
                _("† p < 0.05. nan: a constant column (e.g. every human score identical) or fewer than 3 outputs."),
                note,
            ),
        )
    )
    scale = {c.code: (c.lo, c.hi) for c in rubric.criteria(subs[0])}
    points = ", ".join(f"{k} {scale[k][0]}-{scale[k][1]}" for k in crits)
    rows = [[_NAMES[s], j, *[_mae_points(h.mae[s][j].get(k), *scale[k]) for k in crits]] for s in subs for j in judges]
    tables.append(
        Table(
            _(
                "LegalRikai {title}: mean absolute error, judges vs humans, in rubric points (Table 8: the paper's "
                "scale)",
                title=title,
            ),
            [_("task"), _("judge"), *_heads(crits)],
            rows,
            sentences(
                _(
                    "As the paper's Table 8: on each criterion's own points ({points}); a judge's score against the "
                    "mean of the annotators' scores. n: outputs both the judge and an annotator scored.",
                    points=points,
                ),
                note,
            ),
        )
    )
    rows = [[_NAMES[s], j, *[_mae(h.mae[s][j].get(k)) for k in crits]] for s in subs for j in judges]
    tables.append(
        Table(
            _(
                "LegalRikai {title}: mean absolute error, judges vs humans, on [0, 1] (offline-eval's scale)",
                title=title,
            ),
            [_("task"), _("judge"), *_heads(crits)],
            rows,
            _(
                "The same pairs with every score s mapped to [0, 1] as (s - lo)/(hi - lo), the scale of the scores "
                "above: a 3-point criterion's value is half the one in points, a 2-point criterion's the same."
            ),
        )
    )
    if any(h.bias.get(s) for s in subs):
        rows = [
            [_NAMES[s], j, *[_bias(h.bias.get(s, {}).get(j, {}).get(k)) for k in crits]] for s in subs for j in judges
        ]
        tables.append(
            Table(
                _("LegalRikai {title}: each judge's bias against the annotators", title=title),
                [_("task"), _("judge"), *_heads(crits)],
                rows,
                _(
                    "The mean, over the outputs both scored, of the judge's score minus the annotators' mean, on "
                    "[0, 1] (positive: the judge is more lenient than your annotators) [95% CI resampling source "
                    "items; 'n too small' under 20 items]; n: outputs."
                ),
            )
        )
    return tables


def judge_agreement_tables(rep: LegalRikaiReport) -> list[Table]:
    """Among several judges: Krippendorff's alpha per criterion, and each judge's bias against their mean."""
    ja = rep.judge_agreement
    if ja is None:
        return []
    tables = []
    for title, subs, crits in _groups(rep):
        subs = [s for s in subs if s in ja.alpha]
        if not subs:
            continue
        rows = [[_NAMES[s], *[_alpha(ja.alpha[s].get(k)) for k in crits]] for s in subs]
        tables.append(
            Table(
                _("LegalRikai {title}: agreement among the judges (Krippendorff's alpha, ordinal)", title=title),
                [_("task"), *_heads(crits)],
                rows,
                _(
                    "Over every candidate output that two judges or more scored (n per cell); 1 = perfect agreement, "
                    "0 = what chance gives; nan: no variation to agree on. From the `krippendorff` package."
                ),
            )
        )
        rows = [
            [_NAMES[s], j, *[_bias(ja.bias[s][j].get(k)) for k in crits]]
            for s in subs
            for j in rep.judges
            if j in ja.bias[s]
        ]
        tables.append(
            Table(
                _("LegalRikai {title}: each judge's bias against the judges' mean", title=title),
                [_("task"), _("judge"), *_heads(crits)],
                rows,
                _(
                    "The mean, over the outputs it scored beside another judge, of the judge's score minus the "
                    "judges' mean on that output, on [0, 1] (positive: more lenient) [95% CI resampling source "
                    "items; 'n too small' under 20 items]."
                ),
            )
        )
    return tables


def _cell(value: float | None, n: int) -> str:
    return ("nan" if value is None else f"{value:.2f}") + f" (n={n})"


def _alpha(x: AlphaCell | None) -> str:
    return "–" if x is None or not x.n else _cell(x.alpha, x.n)


def _kappa(x: KappaCell | None) -> str:
    return "–" if x is None or not x.n else _cell(x.kappa, x.n)


def _mae(x: MaeCell | None) -> str:
    return "–" if x is None or not x.n else _cell(x.mae, x.n)


def _mae_points(x: MaeCell | None, lo: int, hi: int) -> str:
    return "–" if x is None or not x.n else _cell(x.points(lo, hi), x.n)


def _bias(x: BiasCell | None) -> str:
    if x is None or x.bias is None:
        return "–"
    text = f"{x.bias:+.3f}"
    if x.ci_low is not None and x.ci_high is not None:
        return text + f" [{x.ci_low:+.3f}, {x.ci_high:+.3f}] (n={x.n})"
    if x.has_interval:
        return _("{bias} (n too small: {k} items; n={n})", bias=text, k=x.n_clusters, n=x.n)
    return text + f" (n={x.n})"


def _rho(x: RhoCell | None) -> str:
    if x is None or not x.n:
        return "–"
    rho = "nan" if x.rho is None else format_rho(x.rho, x.p if x.p is not None else 1.0)
    return f"{rho} (n={x.n})"


def overflow_table(runs: list[RunEntry]) -> Table | None:
    rows = []
    for r in runs:
        if r.task != "legalrikai":
            continue
        metrics = r.metrics
        shares = [v.value for v in metrics.groups("criterion", "focused_share").values() if v.value is not None]
        rows.append(
            [
                r.run,
                r.setting,
                Setting.of(r).overflow or "–",
                fmt(N_FULL.of(metrics)),
                fmt(N_FOCUSED.of(metrics)),
                fmt(N_SKIPPED.of(metrics)),
                _v(max(shares)) if shares else "–",
                fmt(TRUNCATED.of(metrics)),
                _cut_judged(r.protocol, TRUNCATED.of(metrics)),
                fmt(N_JUDGED.of(metrics)),
                fmt(FORMAT_FAILURES.of(metrics)),
            ]
        )
    if not rows:
        return None
    return Table(
        _("LegalRikai: inputs under the overflow policy, and answers cut off"),
        [
            _("run"),
            _("setting"),
            _("policy"),
            _("full"),
            _("focused"),
            _("skipped"),
            _("focused share of scores"),
            _("answers cut off"),
            _("cut answers judged"),
            _("judged"),
            _("format failures"),
        ],
        rows,
        _(
            "focused: the statutes were cut to the articles that differ between the pre- and post-amendment "
            "text and their neighbours, because the full prompt did not fit the context. The share is that "
            "of the judged items behind each score (per criterion in summary.json: the run's "
            "metrics.breakdowns.criterion.<criterion>.focused_share). "
            "Answers cut off: generation stopped at the answer cap (metrics.truncated). Under protocol paper they go "
            "to no judge and count in no score (judged: the items behind the scores); under offline-eval they are "
            "judged as they stand, as before protocols existed. "
            "Format failures: answers not in the asked-for form (AmendExp without its two sections, no "
            "article in a contract); under paper, of the answers not cut off."
        ),
    )


def _cut_judged(protocol: str, cut: Number) -> str:
    if not cut:
        return "–"
    return _("yes ({protocol})", protocol=protocol) if protocol == OURS else _("no ({protocol})", protocol=protocol)


def legalrikai_tables(summary: Summary) -> list[Table]:
    rep = LegalRikaiReport.of(summary)
    if rep is None:
        return []
    out = score_tables(rep)
    t = overflow_table(summary.runs)
    if t:
        out.append(t)
    return out + judge_agreement_tables(rep) + agreement_tables(rep)


class LegalRikaiReportParts(ReportParts):
    """The paper's tables, and the item browser's view of an output with each judge's scores and rationales."""

    @classmethod
    def tables(cls, task: TaskClass, runs: list[RunEntry], summary: Summary) -> list[Table]:
        return legalrikai_tables(summary)

    @classmethod
    def browser_view(cls, record: LegalRikaiRecord) -> BrowserView:
        extra: dict[str, Any] = {}
        for j, v in sorted(record.judges.items()):
            failed = _("failed ({why})", why=v.get("finish_reason"))
            extra[_("judge {judge}: scores", judge=j)] = v.get("scores") if v.get("scores") else failed
            if v.get("rationales"):
                extra[_("judge {judge}: rationales", judge=j)] = "\n".join(
                    f"{k}: {t}" for k, t in v["rationales"].items()
                )
        if record.checks:
            extra[_("checks against the input contract")] = {k: v for k, v in record.checks.items() if k != "defects"}
        return BrowserView(record.subtask, None, extra, focused=record.input == "focused")
