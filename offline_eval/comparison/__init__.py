"""`offline-eval compare OLD NEW`: two sweep folders, made months apart or on other machines, item by item.

Runs are matched by name (or `--map OLD_RUN=NEW_RUN`), settings by name, items by id, and only where both
provenances hold the same data files for the setting: a changed file refuses that setting, naming it. Each
matched pair gets the verdicts' own paired statistics (`analyses.verdicts.paired_verdict`: Tango's interval with
the design effect for right/wrong items, the cluster bootstrap for graded ones) against a margin, and a verdict
read from its interval: regressed (the difference is below -margin), non-inferior, improved (above 0), or
inconclusive. What changed between the two is read from the provenances; identical weights and prompts whose
answers differ point at an engine or tool change. The flipped items go to flips.jsonl and an HTML page that
reuses the report's item browser.
"""

from .match import compare
from .model import Change, Comparison, Flip, SettingComparison

__all__ = ["Change", "Comparison", "Flip", "SettingComparison", "compare"]
