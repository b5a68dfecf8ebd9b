"""The English texts the sweep stores in summary.json for a reader (why a verdict is on the judges' scale, why a
judged number is not calibrated, how a run departs from the paper, an ablation family's title), each written from
one message here (`kept`: MESSAGE.format(...)); the report reads them back into these messages and shows them in the
reader's language (offline_eval.runtime.i18n.said). Kept here, below the report, so that drawing a report registers
them whatever else it imports."""

from __future__ import annotations

from offline_eval.runtime.i18n import kept

# How a run's decoding departs from the paper's (pipeline/departures.py); {paper} is one of the last three.
SAMPLING = kept("{run}: sampling from models.yaml ({sampling}; the paper's: {paper})")
SAMPLING_MODEL = kept("{run}: sampling: model, the weights' own (the paper's: {paper})")
RUN_DEPARTS = kept("{run}: {departure}")
THINKING_AS_SET = kept("{run}: thinking as models.yaml sets it (budget {budget}), not the paper's decoding")
SERVED_GREEDY = kept(
    "{run}: the served model was sent temperature 0.0 (the paper's decode {paper}, which only the server knows: give "
    "its settings as the model's sampling)"
)
AS_WEIGHTS = kept("as the weights' generation_config says")
GREEDY = kept("greedy")
PRESET = kept("temperature {temperature}, top_k {top_k}")

# Why a verdict is on the judges' scale (Verdict.scale_note; pipeline/analyses/verdicts.py).
NO_CALIBRATED_FORM = kept("{metric} has no calibrated form")
ONE_SIDE_CALIBRATED = kept(
    "{source}: only {have} has calibrated labels, {lacking} none (field human_scores): label a random sample of both "
    "runs' outputs"
)
UNEVEN_JUDGING = kept(
    "the judges scored {n} output(s) of one run and not the other: calibrated estimates would compare other items"
)
NO_INTERVAL = kept("a calibrated estimate has no interval: {reasons}")
NO_STANDARD_ERROR = kept("no standard error")

# Why a judged number is not calibrated (CalibrationRow.reason; pipeline/analyses/calibration.py).
NO_LABELS = kept(
    "no human labels: give the task human_scores from a random sample of its outputs (docs/calibration.md)"
)
NONE_ON_RUN = kept("no human label on this run's outputs (labels on one run never correct another)")
JUDGE_SCORED_NONE = kept("{judge} scored none of the run's outputs")
NO_FULL_LABELS = kept("no output has every label {number} needs")
UNSCORED_LABELS = kept("{why} ({lost} labelled output(s) unscored)")

# An ablation family's title (pipeline/analyses/ablations.py).
VARIANTS = kept("{model} ({engine}), {setting}, ctx {ctx}: variants")
CONTEXTS = kept("{model} ({engine}), {setting}, {variant}: context lengths")
