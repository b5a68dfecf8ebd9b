"""The typed comparison of two sweep folders: per setting, the verdict and its statistics; what changed; the
flipped items."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from offline_eval.metrics.noninferiority import NonInferiority
from offline_eval.results.calibration import CalibrationRow
from offline_eval.runtime.i18n import N_

# The verdicts, as comparison.json holds them (English in every language) and as a reader reads them, `_(verdict)`.
REGRESSED, IMPROVED, NON_INFERIOR_V, INCONCLUSIVE_V, REFUSED, MISSING = (
    N_("regressed"),
    N_("improved"),
    N_("non-inferior"),
    N_("inconclusive"),
    N_("refused"),
    N_("missing"),  # OLD has results for the setting, NEW none (its run failed, or it left the setting out)
)
FailOn = Literal["inferior", "inconclusive"]


class Change(BaseModel):
    """One thing the two sweeps did differently: the sweep's (tool, git revision, config, libraries), a run's
    load (weights, engine, chat template, load options) or a setting's (prompt template, data, task options)."""

    scope: str  # "sweep", a run pair "OLD_RUN -> NEW_RUN", or a setting
    what: str
    old: str | None
    new: str | None


class Flip(BaseModel):
    setting: str
    old_run: str
    new_run: str
    id: str
    direction: Literal["right->wrong", "wrong->right"]
    gold: Any
    old_output: str
    new_output: str


class SettingComparison(BaseModel):
    old_run: str
    new_run: str
    setting: str
    task: str
    metric: str
    margin: float | None
    n_items: int  # compared: in both, scored in both
    n_left_out: int = 0  # items whose content changed between the sweeps (--allow-changed-data)
    old_mean: float | None  # the metric's per-item mean over the compared items
    new_mean: float | None
    verdict: str  # regressed | non-inferior | improved | inconclusive | refused | missing
    old_protocol: str = "offline-eval"  # the task's protocol in each sweep (tasks/kit/protocol.py)
    new_protocol: str = "offline-eval"
    reason: str | None = None  # why refused or inconclusive
    statistics: NonInferiority | None = None
    # items right in OLD and wrong in NEW, and the reverse: counted where the paired metric is right or wrong
    # (Metric.paired "binary"); None where it is graded (neither) or nothing was compared
    right_to_wrong: int | None = None
    wrong_to_right: int | None = None
    answers_differ: int = 0  # items whose raw outputs differ
    same_inputs: bool = False  # weights, chat template, prompt template and data identical
    engine_or_tool_change: bool = False  # same inputs, different answers: the engine or the tool changed them


class CalibratedPair(BaseModel):
    """A judged setting's headline number in both folders (each folder's `calibration` row for the run): the
    calibrated estimate where human labels made one, else the judges' mean (docs/calibration.md)."""

    setting: str
    number: str
    old_run: str
    new_run: str
    old: CalibrationRow | None
    new: CalibrationRow | None


class Comparison(BaseModel):
    old: str
    new: str
    # Both folders passed `offline-eval verify` first (their summaries and results rebuilt from their stores,
    # data, configs and weights match); False: compared as they are (--no-verify), said in every output.
    verified: bool = False
    settings: list[SettingComparison] = Field(default_factory=list)
    changes: list[Change] = Field(default_factory=list)
    unmatched_old: list[str] = Field(default_factory=list)  # runs of OLD that NEW lacks (and --map names none)
    unmatched_new: list[str] = Field(default_factory=list)
    flips: list[Flip] = Field(default_factory=list)
    calibration: list[CalibratedPair] = Field(default_factory=list)

    def fails(self, fail_on: FailOn | None) -> bool:
        """Whether a verdict hits `--fail-on`: any regression (inferior), or any regression or inconclusive one."""
        if fail_on is None:
            return False
        hits = {REGRESSED, MISSING} if fail_on == "inferior" else {REGRESSED, MISSING, INCONCLUSIVE_V, REFUSED}
        return any(s.verdict in hits for s in self.settings)
