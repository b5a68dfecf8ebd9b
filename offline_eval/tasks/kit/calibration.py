"""What a task declares for calibration (docs/calibration.md): its judged numbers, each the judge's score of one
output and the human truth of that output from its labels, and the human labels a sweep read, matched to the runs'
outputs with their sampling design. The sweep's analysis (pipeline/analyses/calibration.py) corrects every judged
number of every run with them (PPI++) where the labels were drawn at random."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from offline_eval.results.calibration import CalibrationRow, Interval
from offline_eval.runtime.errors import InputError
from offline_eval.runtime.i18n import _, ngettext

from .sections import fmt, stored

HumanSample = Literal["random"]
HUMAN_SAMPLE_HELP = (
    "random: the human scores are a simple random sample of each run's outputs, drawn elsewhere (an export of "
    "`offline-eval annotate` records its own draw); their judged numbers are then calibrated (docs/calibration.md)"
)


DRAWS = ("random", "picked")  # an export's `draw`: the annotation page's seeded draw, or outputs listed by --items


def read_draw(value: Any, path: str, where: str) -> str:
    """An export row's sampling design: "random", "picked", or "" where the row records none (a hand-made file)."""

    v = str(value or "").strip()
    if v and v not in DRAWS:
        raise InputError(f"unknown draw '{v}'; expected random or picked", file=path, record=where, field="draw")
    return v


def drawn(draws: set[str], human_sample: str | None) -> tuple[bool, bool]:
    """(random, stratified) for an output whose rows record these draws: random where every row comes from the
    page's seeded draw (stratified by run and the task's strata), or, none picked, where the options vouch for it
    (`human_sample: random`: a simple random sample)."""
    page = draws == {"random"}
    return page or ("picked" not in draws and human_sample == "random"), page


@dataclass(frozen=True)
class JudgedNumber:
    """One judged number of a run: `number` names the run metric it corrects, `judge` whose scores ("Avg": the
    judges' mean). `value`: the judge's score of one output (a record; None: not scored); `truth`: the human truth
    of an output from its labels (criterion -> the annotators' mean, on `scale`; None: not enough labels).
    `levels`: the criterion's points (2: agreement as kappa and TPR/TNR; else MAE and Spearman). `headline`: the
    number the leaderboard and the verdicts read."""

    number: str
    judge: str
    scale: tuple[float, float]
    value: Callable[[Any], float | None]
    truth: Callable[[dict[str, float]], float | None]
    levels: int | None = None
    headline: bool = False


@dataclass(frozen=True)
class OutputLabels:
    """One output's human labels: criterion -> the annotators' mean on the judged numbers' scale; `random`: drawn
    at random (the annotation page's seeded draw, or `human_sample: random`); `stratified`: by the page's draw,
    stratified by run and the task's strata (`Task.design_stratum`)."""

    values: dict[str, float]
    random: bool
    stratified: bool


@dataclass
class HumanLabels:
    """The labels a task read, by (run, setting, item id). `stale`: labels not used, by (run, setting), whose
    output changed since it was labelled; `notes`: rows that matched no output, one line each."""

    source: str
    by_output: dict[tuple[str, str, str], OutputLabels] = field(default_factory=dict)
    stale: dict[tuple[str, str], int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def interval_text(x: Interval | None, digits: int) -> str:
    """An estimate [95% CI], or the estimate alone where there is no interval."""
    if x is None or x.estimate is None:
        return "–"
    if not x.has_interval:
        return fmt(x.estimate, digits)
    return f"{fmt(x.estimate, digits)} [{fmt(x.ci_low, digits)}, {fmt(x.ci_high, digits)}]"


def calibrated_text(row: CalibrationRow | None, judge_value: float | None, digits: int) -> str:
    """A leaderboard cell of a judged number: the PPI++ estimate [CI] "calibrated on n labels" where human labels
    corrected it, else the judge's value marked uncalibrated."""
    if row is not None and row.calibrated:
        cell = ngettext(
            "{ci} calibrated on {n} label (judges {judges})",
            "{ci} calibrated on {n} labels (judges {judges})",
            row.n,
            ci=interval_text(row.ppi_pp, digits),
            judges=fmt(judge_value, digits),
        )
        return cell + (f"; {stored(row.reason)}" if row.reason else "")
    return _("{ci} uncalibrated", ci=fmt(judge_value, digits))
