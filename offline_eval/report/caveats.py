"""What the first screen puts under its answer: the cautions (one line each, the details a click away) and the
protocol of each task as a short label, its departures from the paper listed under it."""

from __future__ import annotations

from dataclasses import dataclass, field

from offline_eval.metrics.ranking import has_score
from offline_eval.metrics.values import N_SKIPPED
from offline_eval.results.records import RunEntry
from offline_eval.results.summary import Summary
from offline_eval.runtime.i18n import _, ngettext
from offline_eval.tasks.kit.sections import ranked, stored

from .tables import task_class


@dataclass(frozen=True)
class Caveat:
    """One line on the first screen, and what it stands for, shown on a click (HTML) or indented under it (Markdown)."""

    line: str
    details: list[str] = field(default_factory=list)


def cautions(summary: Summary) -> list[Caveat]:
    """What a reader must know before trusting a number: scores the task says to read with care, settings nobody
    scored, items skipped for length, failed runs."""
    runs = summary.runs
    noted, unscored = [], []
    for setting in sorted({r.setting for r in runs}):
        group = [r for r in runs if r.setting == setting]
        metric = group[0].primary_metric or "mean"
        scored = [r for r in group if has_score(r.metrics.get(metric))]
        if not scored:
            unscored.append(setting)
        elif note := task_class(group[0].task).report_parts.glance_note(_ranked(summary, setting, scored)):
            noted.append(_("{setting}: {note}.", setting=setting, note=note))
    out = []
    if noted:
        out.append(
            Caveat(
                ngettext(
                    "Scores to read with care in {n} task setting",
                    "Scores to read with care in {n} task settings",
                    len(noted),
                ),
                noted,
            )
        )
    if unscored:
        out.append(
            Caveat(
                ngettext(
                    "No run scored any item in {n} task setting",
                    "No run scored any item in {n} task settings",
                    len(unscored),
                ),
                unscored,
            )  # fmt: skip
        )
    skipped = [(r, int(N_SKIPPED.of(r.metrics) or 0)) for r in runs]
    if total := sum(n for _r, n in skipped):
        out.append(
            Caveat(
                _("{n} item(s) did not fit a context length and were skipped", n=total),
                [_("{run} on {setting}: {n}", run=r.run, setting=r.setting, n=n) for r, n in skipped if n],
            )
        )
    if summary.failures:
        out.append(
            Caveat(
                _("{n} run(s) failed", n=len(summary.failures)),
                [_("{run}: {reason}", run=f.run, reason=stored(f.reason)) for f in summary.failures],
            )
        )
    return out


def _ranked(summary: Summary, setting: str, scored: list[RunEntry]) -> list[RunEntry]:
    order = [run for _rank, run in ranked(summary, setting)]
    return sorted(scored, key=lambda r: order.index(r.run) if r.run in order else len(order))


def protocols(summary: Summary) -> list[Caveat]:
    """Per task, the protocol its numbers come from (tasks/kit/protocol.py) as a short label, and where runs labelled
    paper depart from it (Task.departures: a mode of ours, a limit, shorter answers), each departure once."""
    by_task: dict[str, set[str]] = {}
    departs: dict[str, dict[str, None]] = {}
    for r in summary.runs:
        by_task.setdefault(r.task, set()).add(r.protocol)
        departs.setdefault(r.task, {}).update(dict.fromkeys(r.departures))
    out = []
    for task, names in sorted(by_task.items()):
        named = _(" and ").join(sorted(names))
        if n := len(departs[task]):
            line = ngettext("{task}: {protocols}, {n} departure", "{task}: {protocols}, {n} departures", n,
                            task=task, protocols=named)  # fmt: skip
        else:
            line = _("{task}: {protocols}", task=task, protocols=named)
        out.append(Caveat(line, [stored(d) for d in departs[task]]))
    return out


def protocol_note() -> str:
    return _(
        "paper: the papers' protocols as their authors' code and text give them; offline-eval: ours; "
        "docs/tasks/<task>.md lists the differences."
    )
