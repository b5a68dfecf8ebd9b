"""compare's words for a reader, in the current language (offline_eval.runtime.i18n). comparison.json keeps its
reasons and the labels of what changed in English, the same file in every language: each is written (match.py)
from one of the English templates below, and `said` reads a stored text back into its template's fields, so the
page and the terminal show it translated. A text no template gives (an engine's own error inside a failure, a
statistic's reason worded elsewhere) is shown as it is."""

from __future__ import annotations

from offline_eval.metrics import noninferiority  # noqa: F401 (its kept() reasons)
from offline_eval.runtime import i18n
from offline_eval.runtime.i18n import N_, _, kept

# Why a setting was refused or is inconclusive (SettingComparison.reason), as match.py writes it.
NO_RESULTS = kept("NEW has no results for it")
NO_RESULTS_BECAUSE = kept("NEW has no results for it: {failure}")
NOT_INSTALLED = kept("task {task} is not installed here")
PROTOCOL_CHANGED = kept(
    "OLD ran the {old} protocol and NEW the {new} protocol: other prompts, items or decoding, so their numbers are "
    "not comparable (--allow-protocol-change compares them anyway)"
)
DATA_CHANGED = kept(
    "the data changed between the sweeps: {file} (--allow-changed-data compares the items that did not)"
)
NO_DIGESTS = kept("the data changed ({file}) and {folder} records no item digests (made before them)")
NO_ITEM_CHANGED = kept("the data changed ({file}) but no item did: it changes their scoring, so none compares")
NO_TASK_OPTIONS = kept("neither folder recorded the setting's task options (schema version 2): re-sweep one of them")
NONE_SCORED = kept("no item scored in both")
NO_MARGIN = kept("{metric} has no margin")

# What changed (Change): the sweep's scope, a folder's provenance, a library.
SWEEP = N_("sweep")
RECORDED = N_("recorded")
NONE_RECORDED = N_("none recorded: its data, weights and prompts are not checked against the other's")
NONE_RECORDED_EITHER = N_("none recorded in either folder: nothing is known of their inputs")
LIBRARY = N_("library {name}")


def what(text: str) -> str:
    """A Change's `what` (a provenance field's label, marked where match.py writes it, or a library's)."""
    return i18n.said(text, (LIBRARY,)) if text.startswith(LIBRARY.split("{")[0]) else _(text)


def scope(text: str) -> str:
    """A Change's `scope`: "sweep" is ours; a run pair or a setting is a name."""
    return _(SWEEP) if text == SWEEP else text


def value(text: str) -> str:
    """A Change's old or new value: our words for a folder's provenance, else data."""
    return i18n.said(text, (RECORDED, NONE_RECORDED, NONE_RECORDED_EITHER))
