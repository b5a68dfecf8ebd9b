"""LegalRikai's report across a sweep, as summary.json keeps it under task_reports.legalrikai: typed rows and
cells that agreement.py builds and report.py renders (the Summary stores a task's report as JSON, since the
summary layer knows no task; this model reads it back)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from offline_eval.runtime.errors import format_validation_error
from offline_eval.tasks.kit import Number

if TYPE_CHECKING:
    from offline_eval.results.summary import Summary
    from offline_eval.tasks.kit import RunEntry

TASK = "legalrikai"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Setting(BaseModel):
    """A LegalRikai run's setting options, as its entry in summary.json keeps them."""

    model_config = ConfigDict(extra="ignore")

    subtask: str
    overflow: str | None = None  # the overflow policy (absent in folders made before it was an option)

    @classmethod
    def of(cls, run: RunEntry) -> Setting:
        return cls.model_validate(run.options)


class AlphaCell(_Model):
    """Krippendorff's alpha (ordinal) on one criterion; n: the outputs two raters or more scored."""

    alpha: float | None
    n: int


class KappaCell(_Model):
    """Cohen's kappa between annotators on one criterion; n: the outputs both scored (the most of any pair)."""

    kappa: float | None
    n: int


class RhoCell(_Model):
    """Spearman's rho between a judge and the annotators on one criterion, with its p-value."""

    rho: float | None
    p: float | None
    n: int


class MaeCell(_Model):
    """Mean absolute error between a judge and the annotators' mean on one criterion, over n outputs: `mae` on
    [0, 1] (each score s as (s - lo)/(hi - lo)); `mae_points` on the criterion's own points, the scale of the paper's
    Table 8, which is (hi - lo) times `mae`: twice it on a 3-point criterion, equal on a 2-point one. A folder made
    before `mae_points` was recorded reads it as None; points() then derives it from `mae`."""

    mae: float | None
    n: int
    mae_points: float | None = None

    def points(self, lo: int, hi: int) -> float | None:
        if self.mae_points is not None or self.mae is None:
            return self.mae_points
        return round(self.mae * (hi - lo), 4)


class BiasCell(_Model):
    """A judge's mean score minus a reference's (the annotators or the judges' mean), on [0, 1]. Where a
    bootstrap ran, n_clusters is set and [ci_low, ci_high] is its 95% interval (both None: withheld)."""

    bias: float | None
    n: int
    ci_low: float | None = None
    ci_high: float | None = None
    n_clusters: int | None = None

    @property
    def has_interval(self) -> bool:
        return self.n_clusters is not None


class Inputs(_Model):
    """The run's items by what the overflow policy gave the model: the full prompt, a focused one, nothing."""

    full: int
    focused: int
    skipped: int


class Checks(_Model):
    """The run's deterministic checks of its revisions (Japanese toolkit; None on AmendExp)."""

    diff_chars: Number
    changed_precision: Number
    changed_recall: Number
    introduced_defects: Number


class ScoreRow(_Model):
    """One run on one sub-task: the judges' scores (Table 6), the inputs it got and the deterministic checks."""

    subtask: str
    run: str
    Avg: dict[str, Number]  # criterion -> mean over the judges, in [0, 1]
    score: Number
    judges: dict[str, dict[str, Number]]  # judge -> criterion -> its mean
    judge_failures: dict[str, int]
    inputs: Inputs
    checks: Checks


class Agreement(_Model):
    """Judge-human agreement (Tables 5, 7, 8): per sub-task, criterion and judge ("Avg": their mean)."""

    file: str
    rows: int
    matched_outputs: int
    unmatched: list[str]
    human_scores: dict[str, dict[str, dict[str, float]]]  # sub-task -> run -> criterion -> mean human score
    kappa: dict[str, dict[str, KappaCell]]  # sub-task -> criterion
    spearman: dict[str, dict[str, dict[str, RhoCell]]]  # sub-task -> judge -> criterion
    mae: dict[str, dict[str, dict[str, MaeCell]]]  # sub-task -> judge -> criterion
    # Absent in folders made before they were computed:
    alpha: dict[str, dict[str, AlphaCell]] = Field(default_factory=dict)  # among the annotators: sub-task -> criterion
    bias: dict[str, dict[str, dict[str, BiasCell]]] = Field(default_factory=dict)  # each judge (and Avg) minus the
    # annotators' mean: sub-task -> judge -> criterion


class JudgeAgreement(_Model):
    """Among several judges, per sub-task and criterion: Krippendorff's alpha over the outputs, and each judge's
    mean bias against the judges' mean, on [0, 1], with a CI that resamples source items."""

    alpha: dict[str, dict[str, AlphaCell]]  # sub-task -> criterion
    bias: dict[str, dict[str, dict[str, BiasCell]]]  # sub-task -> judge -> criterion


class LegalRikaiReport(_Model):
    """What the paper-layout tables are drawn from."""

    subtasks: list[str]
    criteria: dict[str, list[str]]
    judges: list[str]
    scores: list[ScoreRow]
    human: Agreement | None
    judge_agreement: JudgeAgreement | None

    def to_json(self) -> dict[str, Any]:
        """As summary.json keeps it: a cell's interval fields only where a bootstrap ran."""
        return self.model_dump(mode="json", exclude_unset=True)

    @classmethod
    def of(cls, summary: Summary) -> LegalRikaiReport | None:
        """The sweep's LegalRikai report (None: it ran no LegalRikai setting)."""
        raw = summary.task_reports.get(TASK)
        if raw is None:
            return None
        try:
            return cls.model_validate(raw)
        except ValidationError as e:
            where = str(summary.folder / "summary.json") if summary.folder else "summary.json"
            raise format_validation_error(e, where, prefix=f"task_reports.{TASK}") from None
