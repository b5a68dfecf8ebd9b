"""Where a `protocol: paper` LegalRikai run is not the paper's, one phrase each (Task.departures): the summary, the
dry run and the report's first screen name them beside the run's paper label."""

from __future__ import annotations

from typing import Any

from offline_eval.runtime.i18n import kept

PROMPTS = kept("candidate and judge prompts ours (the paper's Appendix B names its templates without printing them)")
JUDGES = kept("LLM judges from the config (the paper's were its own API judges)")
CUT_LEFT_OUT = kept("an answer its cap cuts is left out of every mean (the paper's API models wrote whole answers)")
FOCUS = kept(
    "statutes that do not fit cut to the changed articles and their neighbours (overflow: focus; the paper's models "
    "read them whole)"
)


def paper_departures(options: Any) -> list[str]:
    """What every paper-protocol run of these options does that the paper did not (docs/tasks/legalrikai.md,
    "Protocol")."""
    out = [PROMPTS, JUDGES, CUT_LEFT_OUT]
    if options.overflow == "focus":
        out.append(FOCUS)
    return out
