"""Two sweep folders matched run by run, setting by setting and item by item, and compared."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from offline_eval.metrics.noninferiority import INFERIOR, NON_INFERIOR
from offline_eval.pipeline.analyses.verdicts import paired_verdict
from offline_eval.pipeline.config import margin_problem
from offline_eval.results.records import ItemRecord, item_means
from offline_eval.results.summary import LoadProvenance, SettingProvenance, Summary
from offline_eval.runtime.errors import InputError, OfflineEvalError, first_line
from offline_eval.runtime.i18n import N_
from offline_eval.runtime.lock import holder
from offline_eval.tasks import get_task_class, read_summary, recorded_task, task_names
from offline_eval.tasks.kit.sections import Metric
from offline_eval.verify import verify as verify_folder

from . import words
from .model import (
    IMPROVED,
    INCONCLUSIVE_V,
    MISSING,
    NON_INFERIOR_V,
    REFUSED,
    REGRESSED,
    CalibratedPair,
    Change,
    Comparison,
    Flip,
    SettingComparison,
)


def compare(
    old: str | Path,
    new: str | Path,
    mapping: dict[str, str] | None = None,
    margins: dict[str, float] | None = None,
    seed: int = 0,
    allow_changed_data: bool = False,
    allow_protocol_change: bool = False,
    verify: bool = True,
) -> Comparison:
    """The typed comparison of two sweep folders (`offline_eval.compare`). Each folder is verified first
    (`offline-eval verify`: its summary and results rebuilt from its store, data, config and weights): one that
    does not match is refused, naming its first mismatches; `verify=False` (--no-verify) compares them as they
    are, and the comparison says so."""
    a, b = _load(old), _load(new)
    margins = _margins(margins or {}, a, b)
    if verify:
        _verified("OLD", old)
        if Path(new).resolve() != Path(old).resolve():
            _verified("NEW", new)
    mapping = dict(mapping or {})
    old_runs, new_runs = {r.run for r in a.runs}, {r.run for r in b.runs}
    for o, n in mapping.items():
        if o not in old_runs:
            raise InputError(f"--map names run {o!r}, which {old} does not hold", field="--map")
        if n not in new_runs:
            raise InputError(f"--map names run {n!r}, which {new} does not hold", field="--map")
    pairs = dict(mapping)
    for r in sorted(old_runs & new_runs):
        if r not in pairs and r not in pairs.values():
            pairs.setdefault(r, r)
    out = Comparison(
        old=str(old),
        new=str(new),
        verified=verify,
        unmatched_old=sorted(old_runs - set(pairs)),
        unmatched_new=sorted(new_runs - set(pairs.values())),
    )
    out.changes = _sweep_changes(a, b)
    failed = {f.run: f.reason for f in b.failures}
    for o, n in sorted(pairs.items()):
        out.changes += _load_changes(a, b, o, n)
        mine, theirs = {r.setting for r in a.runs if r.run == o}, {r.setting for r in b.runs if r.run == n}
        for setting in sorted(mine & theirs):
            got, flips = _setting(a, b, o, n, setting, margins, seed, allow_changed_data, allow_protocol_change)
            out.settings.append(got)
            out.flips += flips
        out.settings += [_missing(a, o, n, x, failed.get(n)) for x in sorted(mine - theirs)]
    for o in [r for r in out.unmatched_old if r in failed]:  # NEW tried the run and it failed
        out.settings += [_missing(a, o, o, x, failed[o]) for x in sorted({r.setting for r in a.runs if r.run == o})]
        out.unmatched_old.remove(o)
    out.changes += _setting_changes(a, b, sorted({s.setting for s in out.settings}))
    out.calibration = _calibration(a, b, pairs)
    return out


def _calibration(a: Summary, b: Summary, pairs: dict[str, str]) -> list[CalibratedPair]:
    """Each matched run's headline judged number in both folders, as each folder's summary calibrated it."""
    old = {(c.run, c.setting, c.number): c for c in a.calibration if c.headline}
    new = {(c.run, c.setting, c.number): c for c in b.calibration if c.headline}
    out = []
    for o, n in sorted(pairs.items()):
        for setting, number in sorted(
            {(k[1], k[2]) for k in old if k[0] == o} | {(k[1], k[2]) for k in new if k[0] == n}
        ):
            out.append(
                CalibratedPair(
                    setting=setting,
                    number=number,
                    old_run=o,
                    new_run=n,
                    old=old.get((o, setting, number)),
                    new=new.get((n, setting, number)),
                )
            )
    return out


def _missing(a: Summary, o: str, n: str, setting: str, failure: str | None) -> SettingComparison:
    entry = next(r for r in a.runs if r.run == o and r.setting == setting)
    why = words.NO_RESULTS_BECAUSE.format(failure=failure) if failure else words.NO_RESULTS
    return SettingComparison(
        old_run=o, new_run=n, setting=setting, task=entry.task, metric=entry.primary_metric, margin=None, n_items=0,
        old_mean=None, new_mean=None, verdict=MISSING, reason=why,
    )  # fmt: skip


def _margins(margins: dict[str, Any], *folders: Summary) -> dict[str, float]:
    """`--margin`s checked by models.yaml's own rule (config.margin_problem): each names a metric a compared task
    tests for non-inferiority, and is a finite number above 0 inside its range."""
    declared: dict[str, Metric] = {}
    for task in sorted({r.task for s in folders for r in s.runs} & set(task_names())):
        metric = get_task_class(task).noninferiority_metric()
        declared[metric.name] = metric
    out = {}
    for key, value in margins.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(f"{key}={value!r}: the margin must be a number", field="--margin")
        if why := margin_problem(key, float(value), declared, "the compared folders"):
            raise InputError(f"{key}={value:g}: {why}", field="--margin")
        out[key] = float(value)
    return out


def _verified(role: str, folder: str | Path) -> None:
    """Refuses a folder that `offline-eval verify` does not pass, in one line naming it and its first mismatches."""
    instead = "--no-verify compares it as it is, saying so"
    try:
        problems = verify_folder(folder)
    except OfflineEvalError as e:
        raise InputError(f"{role} cannot be verified: {first_line(e)} ({instead})", file=str(folder)) from None
    if problems:
        shown = "; ".join(" ".join(p.split())[:240] for p in problems[:3])
        more = f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
        raise InputError(
            f"{role} does not verify, {len(problems)} mismatch(es): {shown}{more} (`offline-eval verify {folder}` "
            f"lists them; {instead})",
            file=str(folder),
        )


def _load(folder: str | Path) -> Summary:

    p = Path(folder)
    if not p.is_dir():
        raise InputError("not a sweep folder", file=str(p))
    if who := holder(p):
        raise InputError(f"a sweep is writing into this folder ({who}): compare it once it has finished", file=str(p))
    return read_summary(p / "summary.json")


def _setting_prov(s: Summary, setting: str) -> SettingProvenance | None:
    prov = s.provenance
    return next((x for x in prov.settings if x.setting == setting), None) if prov else None


def _run_load(s: Summary, run: str) -> LoadProvenance | None:
    prov = s.provenance
    return next((x for x in prov.loads if x.run == run and x.role == "candidate"), None) if prov else None


def _changed_data(a: SettingProvenance | None, b: SettingProvenance | None) -> str | None:
    """The first data file whose digest differs (by its name: the folders may be on other machines)."""
    if a is None or b is None:
        return None
    old = {Path(f.path).name: f.sha256 for f in a.data_files}
    new = {Path(f.path).name: f.sha256 for f in b.data_files}
    for name in sorted(set(old) | set(new)):
        if old.get(name) != new.get(name):
            where = next((f.path for f in b.data_files if Path(f.path).name == name), name)
            return where
    return None


def _setting(
    a: Summary,
    b: Summary,
    o: str,
    n: str,
    setting: str,
    margins: dict[str, float],
    seed: int,
    allow: bool,
    allow_protocol: bool = False,
) -> tuple[SettingComparison, list[Flip]]:
    entry = next(r for r in b.runs if r.run == n and r.setting == setting)
    was = next(r for r in a.runs if r.run == o and r.setting == setting)
    task_name = entry.task
    base = SettingComparison(
        old_run=o, new_run=n, setting=setting, task=task_name, metric="", margin=None, n_items=0,
        old_mean=None, new_mean=None, verdict=REFUSED, old_protocol=was.protocol, new_protocol=entry.protocol,
    )  # fmt: skip
    if task_name not in task_names():
        return base.model_copy(update={"reason": words.NOT_INSTALLED.format(task=repr(task_name))}), []
    if was.protocol != entry.protocol and not allow_protocol:
        why = words.PROTOCOL_CHANGED.format(old=was.protocol, new=entry.protocol)
        return base.model_copy(update={"reason": why}), []
    pa, pb = _setting_prov(a, setting), _setting_prov(b, setting)
    changed_items: set[str] = set()
    if changed := _changed_data(pa, pb):
        if not allow:
            why = words.DATA_CHANGED.format(file=changed)
            return base.model_copy(update={"reason": why}), []
        da, db = pa.item_digests if pa else None, pb.item_digests if pb else None
        if da is None or db is None:
            why = words.NO_DIGESTS.format(file=changed, folder="OLD" if da is None else "NEW")
            return base.model_copy(update={"reason": why}), []
        changed_items = {i for i in set(da) & set(db) if da[i] != db[i]}
        if not changed_items:  # the file changed no item nor its prompt: it changes how items are scored or judged
            why = words.NO_ITEM_CHANGED.format(file=changed)
            return base.model_copy(update={"reason": why}), []
    if pa is None and pb is None:  # both made before provenance (schema 2): how the task scores is unknown
        why = words.NO_TASK_OPTIONS
        return base.model_copy(update={"reason": why}), []
    task = recorded_task(task_name, (pb or pa).task_options, str(b.folder))  # type: ignore[union-attr]
    metric = task.noninferiority_metric()
    margin = margins.get(metric.name, metric.margin)
    base = base.model_copy(update={"metric": metric.name, "margin": margin})
    old_recs = [r for r in a.records(o, setting) if str(r.id) not in changed_items]
    new_recs = [r for r in b.records(n, setting) if str(r.id) not in changed_items]
    old_s = item_means(old_recs, task.item_score, task.cluster)
    new_s = item_means(new_recs, task.item_score, task.cluster)
    shared = sorted(set(old_s) & set(new_s))
    if not shared:
        return base.model_copy(update={"verdict": INCONCLUSIVE_V, "reason": words.NONE_SCORED}), []
    statistic = task.paired_statistic()  # the metric over item scores: their mean, or e.g. AdjScore
    of = statistic if statistic is not None else (lambda v: sum(v) / len(v))
    mean_a, mean_b = of([old_s[i][0] for i in shared]), of([new_s[i][0] for i in shared])
    base = base.model_copy(
        update={"n_items": len(shared), "old_mean": mean_a, "new_mean": mean_b, "n_left_out": len(changed_items)}
    )
    if margin is None:
        return base.model_copy(
            update={"verdict": INCONCLUSIVE_V, "reason": words.NO_MARGIN.format(metric=metric.name)}
        ), []
    stats = paired_verdict(task, new_recs, old_recs, margin, seed)
    verdict = {INFERIOR: REGRESSED, NON_INFERIOR: NON_INFERIOR_V}.get(stats.verdict, INCONCLUSIVE_V)
    if verdict == NON_INFERIOR_V and stats.ci_low is not None and stats.ci_low > 0:
        verdict = IMPROVED
    flips = _flips(task, old_recs, new_recs, set(shared), setting, o, n)  # None: graded, nothing flips
    differ = _outputs_differ(old_recs, new_recs, set(shared))
    same = _same_inputs(a, b, o, n, pa, pb)
    got = base.model_copy(
        update={
            "verdict": verdict,
            "reason": stats.reason,
            "statistics": stats,
            "right_to_wrong": None if flips is None else sum(f.direction == "right->wrong" for f in flips),
            "wrong_to_right": None if flips is None else sum(f.direction == "wrong->right" for f in flips),
            "answers_differ": differ,
            "same_inputs": same,
            "engine_or_tool_change": same and differ > 0,
        }
    )
    return got, flips or []


def _first(recs: list[ItemRecord]) -> dict[str, ItemRecord]:
    out: dict[str, ItemRecord] = {}
    for r in recs:
        out.setdefault(str(r.id), r)
    return out


def _flips(
    task: Any, old: list[ItemRecord], new: list[ItemRecord], shared: set[str], setting: str, o: str, n: str
) -> list[Flip] | None:
    """Items right in one and wrong in the other (an item's first sample where it has several); None where the
    paired metric is graded (Metric.paired) or a score is not 0 or 1: those items are not right or wrong."""
    a, b = _first(old), _first(new)
    if task.noninferiority_metric().paired != "binary" or not all(
        task.item_score(r[i]) in (0, 1, None) for r in (a, b) for i in shared
    ):
        return None
    out = []
    for i in sorted(shared):
        sa, sb = task.item_score(a[i]), task.item_score(b[i])
        if sa not in (0, 1) or sb not in (0, 1) or sa == sb:
            continue
        out.append(
            Flip(
                setting=setting,
                old_run=o,
                new_run=n,
                id=i,
                direction="right->wrong" if sa == 1 else "wrong->right",
                gold=b[i].gold,
                old_output=a[i].output or "",
                new_output=b[i].output or "",
            )  # fmt: skip
        )
    return out


def _outputs_differ(old: list[ItemRecord], new: list[ItemRecord], shared: set[str]) -> int:
    a, b = _first(old), _first(new)
    return sum((a[i].output or "") != (b[i].output or "") for i in shared)


def _same_inputs(
    a: Summary, b: Summary, o: str, n: str, pa: SettingProvenance | None, pb: SettingProvenance | None
) -> bool:
    la, lb = _run_load(a, o), _run_load(b, n)
    if la is None or lb is None or pa is None or pb is None or la.weights_digest is None:
        return False
    return (
        la.weights_digest == lb.weights_digest
        and la.chat_template_sha256 == lb.chat_template_sha256
        and la.prompt_format == lb.prompt_format
        and pa.prompt_template_sha256 == pb.prompt_template_sha256
        and la.decoding == lb.decoding
        and la.load_options == lb.load_options
    )


def _diff(scope: str, pairs: list[tuple[str, Any, Any]]) -> list[Change]:
    def text(v: Any) -> str | None:
        return None if v is None else v if isinstance(v, str) else json.dumps(v, sort_keys=True, ensure_ascii=False)

    return [Change(scope=scope, what=w, old=text(x), new=text(y)) for w, x, y in pairs if text(x) != text(y)]


def _sweep_changes(a: Summary, b: Summary) -> list[Change]:
    sa, sb = (s.provenance.sweep if s.provenance else None for s in (a, b))
    if sa is None or sb is None:  # a folder from before provenance (schema 2): nothing to tell what changed
        unknown = words.NONE_RECORDED if sa is not None or sb is not None else words.NONE_RECORDED_EITHER
        return [
            Change(
                scope=words.SWEEP,
                what=N_("provenance"),
                old=words.RECORDED if sa else unknown,
                new=words.RECORDED if sb else unknown,
            )
        ]
    libs = sorted(set(sa.libraries) | set(sb.libraries))
    return _diff(
        words.SWEEP,
        [
            (N_("offline-eval version"), sa.offline_eval_version, sb.offline_eval_version),
            (N_("git revision"), sa.git_revision, sb.git_revision),
            (N_("config sha256"), sa.config_sha256, sb.config_sha256),
            ("python", sa.python, sb.python),
            ("cpu", sa.cpu_model, sb.cpu_model),
            *((words.LIBRARY.format(name=k), sa.libraries.get(k), sb.libraries.get(k)) for k in libs),
        ],
    )


def _load_changes(a: Summary, b: Summary, o: str, n: str) -> list[Change]:
    la, lb = _run_load(a, o), _run_load(b, n)
    if la is None or lb is None:
        return []
    return _diff(
        f"{o} -> {n}",
        [
            (N_("weights digest"), la.weights_digest, lb.weights_digest),
            (N_("engine"), la.engine, lb.engine),
            (N_("engine version"), la.engine_version, lb.engine_version),
            (N_("chat template sha256"), la.chat_template_sha256, lb.chat_template_sha256),
            (N_("prompt format"), la.prompt_format, lb.prompt_format),
            (N_("load options"), la.load_options, lb.load_options),
            (N_("decoding"), la.decoding, lb.decoding),
        ],
    )


def _setting_changes(a: Summary, b: Summary, settings: list[str]) -> list[Change]:
    out = []
    for s in settings:
        pa, pb = _setting_prov(a, s), _setting_prov(b, s)
        if pa is None or pb is None:
            continue
        data = (
            {Path(f.path).name: f.sha256 for f in pa.data_files},
            {Path(f.path).name: f.sha256 for f in pb.data_files},
        )
        out += _diff(
            s,
            [
                (N_("prompt template sha256"), pa.prompt_template_sha256, pb.prompt_template_sha256),
                (N_("data files (name: sha256)"), data[0], data[1]),
                (N_("items"), pa.n_items, pb.n_items),
                (N_("constraint"), pa.constraint, pb.constraint),
            ],
        )
    return out
