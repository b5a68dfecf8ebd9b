"""`offline-eval annotate plan DIR --task T --width W`: how many human labels each run needs for the calibrated
estimate's 95% interval to have half-width W, from the pilot labels' correlation with the judges (the sweep's
`calibration`), by the effective-n formula n(n+N)/(n+(1-rho^2)N); and how many the judges save against labels
alone (docs/calibration.md)."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any

from offline_eval.metrics.calibration import labels_alone_for_width, labels_for_width
from offline_eval.runtime.errors import InputError
from offline_eval.runtime.i18n import N_, _, add_option, checked, language

from .sample import read_sweep


@dataclass(frozen=True)
class Need:
    setting: str
    run: str
    number: str
    pilot: int  # labels the pilot has
    outputs: int  # the run's outputs (labelled and not)
    rho: float | None
    sd: float | None  # the human labels' standard deviation in the pilot
    with_judges: int | None  # labels for half-width W with the judges (None: not even every output)
    alone: int | None  # with the labels alone (None: more than the run has)
    reason: str | None = None  # why there is no plan for this run

    @property
    def saved(self) -> int | None:
        if self.with_judges is None or self.alone is None:
            return None
        return self.alone - self.with_judges


def plan(out_dir: str, task: str, width: float) -> list[Need]:
    if not math.isfinite(width) or width <= 0:
        raise InputError(f"{width}: give a positive half-width, on the task's scale", field="--width")
    summary = read_sweep(out_dir)
    rows = [c for c in summary.calibration if c.task == task and c.headline]
    if not rows:
        judged = sorted({c.task for c in summary.calibration}) or ["none"]
        raise InputError(
            f"the sweep has no judged numbers of {task} (judged tasks in it: {', '.join(judged)})", field="--task"
        )
    if not any(c.rho is not None for c in rows):
        why = next((c.reason for c in rows if c.reason), "no labels")
        raise InputError(
            f"no pilot labels to plan from ({why}): label a small random sample first (offline-eval annotate DIR "
            f"--task {task} --sample 20), give its export to the sweep and run it again",
            file=out_dir,
            field="calibration",
        )
    out = []
    for c in rows:
        total = c.n + c.N
        sd = c.label_sd
        if c.rho is None or sd is None:
            out.append(Need(c.setting, c.run, c.number, c.n, total, c.rho, sd, None, None, c.reason or NO_PILOT))
            continue
        alone = labels_alone_for_width(width, sd)
        out.append(
            Need(
                c.setting,
                c.run,
                c.number,
                c.n,
                total,
                c.rho,
                sd,
                labels_for_width(width, sd, max(c.rho, 0.0), total),  # lambda is clipped at 0: no help below
                alone if alone <= total else None,
            )
        )
    return out


NO_PILOT = N_("no pilot")


def shown(needs: list[Need], width: float, lang: str | None = None) -> list[str]:
    """What the command prints, in `lang` (None: English): a line per run and setting."""
    with language(lang):
        lines = [
            _(
                "labels per run for a 95% interval of half-width {width:g} on the calibrated estimate (PPI++), from "
                "the pilot labels' correlation with the judges (effective n = n(n+N)/(n+(1-rho^2)N)):",
                width=width,
            )
        ]
        for x in needs:
            head = f"{x.setting} {x.run} ({x.number})"
            if x.reason is not None:
                reason = _(x.reason) if x.reason == NO_PILOT else x.reason
                lines.append(_("  {head}: no plan ({reason})", head=head, reason=reason))
                continue
            more = _("more than its {outputs} outputs", outputs=x.outputs)
            fields = {
                "head": head,
                "got": _(
                    "pilot {pilot} of {outputs} outputs, rho {rho:.2f}, sd {sd:.3g}",
                    pilot=x.pilot, outputs=x.outputs, rho=x.rho, sd=x.sd,
                ),
                "need": str(x.with_judges) if x.with_judges is not None else more,
                "alone": str(x.alone) if x.alone is not None else more,
            }  # fmt: skip
            if x.saved is not None:
                line = _(
                    "  {head}: {got}: {need} labels with the judges, {alone} alone; the judges save {saved}",
                    saved=x.saved,
                    **fields,
                )
            else:
                line = _("  {head}: {got}: {need} labels with the judges, {alone} alone", **fields)
            lines.append(line)
        return lines


def add_command(sub: Any) -> None:
    """`annotate plan` (argparse has no subcommand under a command with a positional: plan_argv renames it)."""
    p = sub.add_parser("annotate-plan", help="(as `annotate plan`) labels per run for a calibrated interval's width")
    p.add_argument("dir", help="the sweep's output folder, swept with the pilot labels")
    p.add_argument("--task", required=True)
    p.add_argument("--width", type=float, required=True, help="the 95%% interval's half-width, on the task's scale")
    add_option(p, "the lines printed")
    p.set_defaults(func=_command)


def _command(a: argparse.Namespace) -> int:
    lang = checked(a.lang)
    print("\n".join(shown(plan(a.dir, a.task, a.width), a.width, lang)))
    return 0


def plan_argv(argv: list[str]) -> list[str]:
    """`annotate plan DIR ...` is the annotate-plan command (a sweep folder named plan: `annotate ./plan`)."""
    at = next((i for i, x in enumerate(argv) if not x.startswith("-")), None)
    if at is not None and argv[at : at + 2] == ["annotate", "plan"]:
        return [*argv[:at], "annotate-plan", *argv[at + 2 :]]
    return argv
