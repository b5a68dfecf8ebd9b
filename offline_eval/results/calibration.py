"""summary.json's `calibration`: every judged number of every run, corrected with a random sample of human labels
by prediction-powered inference (PPI++), beside the judge-only mean, the plain PPI and the labels-only estimates,
and the judge's agreement with the labels (docs/calibration.md). A row without labels, or whose labels were not
drawn at random, says why in `reason` and holds the judge-only mean alone."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

CALIBRATED, UNCALIBRATED = "calibrated", "uncalibrated"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Interval(_Model):
    """An estimate of the human mean with its 95% interval and standard error (bounds None: no interval)."""

    estimate: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    se: float | None = None

    @property
    def has_interval(self) -> bool:
        return self.ci_low is not None and self.ci_high is not None


class CalibrationRow(_Model):
    """One judged number of one run on one task setting. `number`: the metric it corrects (a criterion code, the
    sub-task's score, LegalEval-Q's mean); `judge`: whose scores ("Avg": the judges' mean; the scorer). `headline`:
    the number the leaderboard and the verdicts read. Scores are on `scale` (lo, hi)."""

    task: str
    setting: str
    run: str
    number: str
    judge: str
    headline: bool
    scale: tuple[float, float]
    status: str  # CALIBRATED (ppi_pp holds the estimate) or UNCALIBRATED (reason says why)
    reason: str | None = None
    source: str | None = None  # the human-label file(s)
    judge_mean: float | None  # the judge alone, over every output it scored
    ppi_pp: Interval | None = None  # the headline: PPI++, lambda tuned as ppi_py's ppi_mean_ci(lam=None)
    ppi: Interval | None = None  # plain PPI, lambda = 1
    labels: Interval | None = None  # the labels alone
    lam: float | None = None  # lambda-hat (one stratum; with several, each stratum's in lams)
    lams: list[float] = []
    n: int = 0  # labelled outputs
    N: int = 0  # judge-only outputs
    stale: int = 0  # labels not used: their output changed since it was labelled
    unscored: int = 0  # the run's outputs this judge did not score (failed, cut, non-finite): outside n and N
    labels_unscored: int = 0  # labelled outputs among those, whose labels calibrate nothing
    strata: int = 0
    rho: float | None = None  # Pearson's correlation of judge and human over the labelled outputs
    label_sd: float | None = None  # the labels' standard deviation (ddof 0), what a label budget is planned from
    effective_n: float | None = None  # n(n+N)/(n+(1-rho^2)N)
    method: str | None = None  # "analytic" (ppi_mean_ci) or "cluster bootstrap"
    # agreement on the labelled outputs: 2-level criteria at their midpoint; graded ones
    kappa: float | None = None
    base_rate: float | None = None
    judge_rate: float | None = None
    tpr: float | None = None
    tnr: float | None = None
    mae: float | None = None
    spearman: float | None = None

    @property
    def calibrated(self) -> bool:
        return self.status == CALIBRATED and self.ppi_pp is not None and self.ppi_pp.estimate is not None
