"""The `offline-eval` command: argument parsing and error reporting only; the work lives elsewhere."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from offline_eval.runtime.errors import InputError, OfflineEvalError, described, format_validation_error
from offline_eval.runtime.i18n import add_option, checked
from offline_eval.runtime.preload import rerun_for

if TYPE_CHECKING:
    from offline_eval.pipeline.options import SweepOptions
    from offline_eval.results.summary import Summary

# Engines log every step at INFO; a user wants our progress, not theirs. --debug restores it.
_QUIET_ENV = {
    "VLLM_LOGGING_LEVEL": "WARNING",
    "VLLM_CONFIGURE_LOGGING": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "TRANSFORMERS_VERBOSITY": "error",
}


def _csv(v: str | None, flag: str = "") -> list[str] | None:
    """A comma-separated option: None when not given; a given but empty list is an error, not "all"."""
    if v is None:
        return None
    items = [x.strip() for x in v.split(",") if x.strip()]
    if not items:
        raise InputError(f"empty list {v!r}; give comma-separated names, or leave the option out", field=flag)
    return items


def _limit(n: int | None) -> int | None:
    """--limit, checked here so that a bad value is blamed on the option, not on the config's `limit`."""
    if n is not None and n < 1:
        raise InputError(f"must be at least 1 item, got {n}", field="--limit")
    return n


def cmd_sweep(a: argparse.Namespace) -> int:
    from offline_eval.inference.backends.registry import tcmalloc_with
    from offline_eval.pipeline.config import load_config
    from offline_eval.pipeline.orchestrate import run_sweep
    from offline_eval.runtime.timings import Timings

    timings = Timings()
    checked(a.lang)
    with timings.stage("config"):
        cfg = load_config(a.config)
    only, only_tasks = _csv(a.only, "--only"), _csv(a.tasks, "--tasks")
    rerun_for(None if a.dry_run or a.ray else a.rerun_argv, tcmalloc_with(cfg.backends(a.config, only, only_tasks)))
    options = _options(a, source=a.config, out_dir=a.out, only=only, only_tasks=only_tasks, dry_run=a.dry_run,
                       ray=a.ray, timings=timings, lang=a.lang)  # fmt: skip
    s = run_sweep(cfg, options)
    if not a.dry_run:
        print(f"wrote {a.out or cfg.output_dir}/summary.json and report.md ({len(s.runs)} runs)")
    return _report_failures(s)


def _options(a: argparse.Namespace, **kw: Any) -> SweepOptions:
    """The engines' output to OUT/engines.log unless -v or --debug; --debug raises a run's unexpected error."""
    from offline_eval.pipeline.options import SweepOptions

    loud = a.verbose or a.debug
    return SweepOptions(limit=_limit(a.limit), fresh=a.fresh, engine_log=not loud, debug=a.debug, **kw)


def _report_failures(summary: Summary) -> int:
    for f in summary.failures:
        print(f"offline-eval: error: {f.run}: {f.reason}", file=sys.stderr)
    return 1 if summary.failures else 0


def cmd_run(a: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from offline_eval.inference.backends.registry import tcmalloc_with
    from offline_eval.pipeline.config import SweepConfig
    from offline_eval.pipeline.orchestrate import run_sweep

    model: dict[str, Any] = {"name": a.name or "model", "backend": a.backend, "path": a.model,
                             "max_model_len": a.max_model_len, "variants": {"default": {"file": None}}}  # fmt: skip
    if a.adapter or a.adapter_scale is not None:  # a scale alone is refused as the config refuses it
        model["variants"]["default"] |= {"adapter": a.adapter, "adapter_scale": a.adapter_scale}
    if a.constraint_backend:
        model["constraint_backend"] = a.constraint_backend
    if a.chat_template:
        from offline_eval.inference.backends.chat import checked_setting

        try:
            model["chat_template"] = checked_setting(a.chat_template)
        except ValueError as e:
            raise InputError(str(e), field="--chat-template") from None
    opts: dict[str, Any] = {"data": a.data}
    opts |= {k: v for k, v in (("shots", a.shots), ("mode", a.mode), ("protocol", a.protocol)) if v is not None}
    try:
        cfg = SweepConfig.model_validate({"output_dir": a.out, "models": [model], "tasks": {a.task: opts}})
    except ValidationError as e:
        raise format_validation_error(e, "command line") from None
    rerun_for(a.rerun_argv, tcmalloc_with({a.backend}))
    s = run_sweep(cfg, _options(a, source="command line"))
    print(f"wrote {a.out}/summary.json and report.md")
    return _report_failures(s)


def cmd_report(a: argparse.Namespace) -> int:
    from offline_eval.report import write_report

    print(f"wrote {write_report(a.dir, lang=a.lang)}")
    return 0


def cmd_annotate(a: argparse.Namespace) -> int:
    from offline_eval.annotate import annotate

    w = annotate(a.dir, a.task, n=a.sample, seed=a.seed, runs=_csv(a.runs, "--runs"), items=a.items, out=a.out,
                 annotator=a.annotator or "", blind=not a.unblind, resume=a.resume,
                 allow_changed_data=a.allow_changed_data, config=a.config, lang=checked(a.lang))  # fmt: skip
    for line in w.warnings:
        print(f"offline-eval: warning: {line}", file=sys.stderr)
    print(f"wrote {w.page}: {w.n} outputs to score (sample {w.sample}); open it in a browser, no server needed")
    print(
        f"wrote {w.reveal}: which run wrote each output and the sweep's scores; give it to annotators only when "
        "they may see them"
    )
    return 0


def cmd_verify(a: argparse.Namespace) -> int:
    from offline_eval.verify import CLAIMED, OK, verify

    problems = verify(a.dir)
    print("\n".join([*problems, "claimed, not checked (nothing can recompute them):", *(f"  - {x}" for x in CLAIMED)]))
    if problems:
        print(f"offline-eval: {len(problems)} mismatch(es): the folder does not match its summary", file=sys.stderr)
        return 1
    print(f"{a.dir}: {OK}")
    return 0


def cmd_schema(a: argparse.Namespace) -> int:
    import json

    from offline_eval.results.summary import json_schema

    print(json.dumps(json_schema(), indent=2, ensure_ascii=False, sort_keys=True))
    return 0


def _field_map(text: str | None) -> dict[str, Any] | None:
    import json

    if not text:
        return None
    try:
        fmap = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(
            f'not valid JSON ({e.msg}); e.g. \'{{"contract": "their_name"}}\'', field="--field-map"
        ) from None
    if not isinstance(fmap, dict):
        raise InputError('expected a JSON object {"our_field": "their_field"}', field="--field-map")
    return fmap


def cmd_data_validate(a: argparse.Namespace) -> int:
    """The task's own loaders and checks, so a file that validates is a file the sweep accepts."""
    from offline_eval.tasks import data_kinds, task_classes

    owner = next((cls for cls in task_classes() if a.task == cls.name or a.task in cls.data_kinds), None)
    if owner is None:
        raise InputError(f"unknown task '{a.task}', expected one of {', '.join(data_kinds())}", field="task")
    print(f"{a.path}: OK ({owner.validate_path(a.task, a.path, a.split, _field_map(a.field_map), a.protocol)})")
    return 0


def cmd_models_check(a: argparse.Namespace) -> int:
    from offline_eval.pipeline.config import check_paths, load_config
    from offline_eval.tasks import load_items, make_task

    cfg = load_config(a.config)
    problems = check_paths(cfg, a.config)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 2
    for name, opts in cfg.tasks.items():
        load_items(make_task(name, opts, a.config), a.config)  # reads the data; checks evaluator and scorer paths
    n = sum(len(m.variants) for m in cfg.models)
    print(f"{a.config}: OK ({len(cfg.models)} models, {n} variants, tasks: {', '.join(cfg.tasks)})")
    return 0


PROTOCOLS = ("paper", "offline-eval")
_VERBOSE = "show the engines' own output (library warnings, native logs) here, not only in OUT/engines.log"


def build_parser() -> argparse.ArgumentParser:
    from offline_eval.inference.backends.registry import engine_names
    from offline_eval.models.commands import add_commands
    from offline_eval.tasks import data_kinds, task_classes

    p = argparse.ArgumentParser(
        prog="offline-eval", description="Japanese legal benchmarks on local models, with no network."
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks and engine logs")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("sweep", help="run every model x variant x task setting in a models.yaml")
    s.add_argument("config")
    s.add_argument("--out", help="output folder (default: output_dir in the config)")
    s.add_argument("--only", help="comma-separated model names to run")
    s.add_argument("--tasks", help="comma-separated task names to run")
    s.add_argument("--limit", type=int, help="evaluate at most N items per task")
    s.add_argument("--fresh", action="store_true", help="ignore stored outputs and regenerate everything")
    s.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    s.add_argument("-v", "--verbose", action="store_true", help=_VERBOSE)
    s.add_argument(
        "--ray",
        metavar="auto|ADDRESS",
        help="run the engine loads on a Ray cluster (auto: a running one, else a local one); needs offline-eval[ray]",
    )
    add_option(s, "the report")
    s.set_defaults(func=cmd_sweep)

    _add_run(sub, engine_names())

    rep = sub.add_parser("report", help="write report.md and report.html for an output folder")
    rep.add_argument("dir")
    add_option(rep, "the report")
    rep.set_defaults(func=cmd_report)

    ann = sub.add_parser("annotate", help="a page on which people score a sweep's outputs (blind), offline")
    ann.add_argument("dir", help="the sweep's output folder")
    ann.add_argument("--task", required=True, choices=[c.name for c in task_classes() if c.annotation_form is not None])
    ann.add_argument("--sample", type=int, default=30, help="outputs to score, stratified over sub-task and run")
    ann.add_argument("--seed", type=int, default=0)
    ann.add_argument("--runs", help="comma-separated run names: sample from these only")
    ann.add_argument("--items", help="a CSV of run,item_id lines: these outputs instead of a sample")
    ann.add_argument("--annotator", help="your name, as every exported row will carry it (editable on the page)")
    ann.add_argument("--out", help="the page's path (default: DIR/annotate-TASK-SAMPLE.html)")
    ann.add_argument("--unblind", action="store_true", help="show each output's run and judge scores from the start")
    ann.add_argument("--resume", nargs="+", help="an earlier export of this sample: the page starts from its scores")
    ann.add_argument("--allow-changed-data", action="store_true", help="go on though the data changed since the sweep")
    ann.add_argument(
        "--config", help="the sweep's config, for a folder made before summary.json recorded its data (schema 2)"
    )
    add_option(ann, "the page")
    ann.set_defaults(func=cmd_annotate)

    from offline_eval.annotate.plan import add_command as add_plan

    add_plan(sub)

    ver = sub.add_parser(
        "verify",
        help="rebuild a sweep folder's summary and results from its store, data, config and weights, and compare",
    )
    ver.add_argument("dir")
    ver.set_defaults(func=cmd_verify)

    from offline_eval.comparison.command import add_command

    add_command(sub)
    sch = sub.add_parser("schema", help="print the JSON Schema of an output file")
    sch.add_argument("which", choices=["summary"], help="summary: summary.json")
    sch.set_defaults(func=cmd_schema)

    _add_tools(sub, data_kinds())

    add_commands(sub)  # quantize, adapter gguf

    for cls in task_classes():  # a task's own tools (e.g. training its scorer): adding a task touches no file here
        cls.add_commands(sub)

    return p


def _add_run(sub: Any, engines: tuple[str, ...]) -> None:
    r = sub.add_parser("run", help="run one model on one task")
    r.add_argument("--backend", required=True, choices=engines)
    r.add_argument("--model", required=True, help="model folder (vllm, transformers) or .gguf file (llamacpp)")
    r.add_argument("--name", help="name for the results folder (default: model)")
    r.add_argument("--task", required=True)
    r.add_argument("--data", required=True)
    r.add_argument("--shots", type=int)
    r.add_argument("--mode", choices=["constrained", "free", "logprob"])
    r.add_argument("--limit", type=int)
    r.add_argument("--protocol", choices=PROTOCOLS, help="the task's protocol (default: paper, the authors')")
    r.add_argument("--max-model-len", type=int, default=4096)
    r.add_argument(
        "--chat-template",
        metavar="auto|none|FILE|TEXT",
        help="auto (default): the model's own chat template, or the plain prompt format if it has none; "
        "none: always the plain format (base models); or a Jinja template file or text",
    )
    r.add_argument("--adapter", help="a LoRA adapter over the model: a PEFT folder (llamacpp: a GGUF adapter)")
    r.add_argument("--adapter-scale", type=float, help="the adapter's strength (default 1)")
    r.add_argument(
        "--constraint-backend",
        metavar="NAME",
        help="the library that masks constrained tokens: auto (default), xgrammar, guidance, outlines, gbnf "
        "(docs/constrained-decoding.md)",
    )
    r.add_argument("--fresh", action="store_true")
    r.add_argument("--out", required=True)
    r.add_argument("-v", "--verbose", action="store_true", help=_VERBOSE)
    r.set_defaults(func=cmd_run)


def _add_tools(sub: Any, kinds: list[str]) -> None:
    """data validate, models check and the Japanese text tools."""
    d = sub.add_parser("data", help="dataset tools")
    dsub = d.add_subparsers(dest="data_command", required=True)
    dv = dsub.add_parser("validate", help="check a dataset file or folder against a task's schema")
    dv.add_argument("task", help=f"a task or a part of one: {', '.join(kinds)}")
    dv.add_argument("path")
    dv.add_argument("--split", help="for a folder of splits: the split to check (default: the task's)")
    dv.add_argument("--protocol", choices=PROTOCOLS, help="the task's protocol, as a sweep runs it (default: paper)")
    dv.add_argument(
        "--field-map",
        help='JSON {"our_field": "their_field", ...}, for tasks that rename fields (per part of a task: '
        '{"part": {...}})',
    )
    dv.set_defaults(func=cmd_data_validate)

    m = sub.add_parser("models", help="models.yaml tools")
    msub = m.add_subparsers(dest="models_command", required=True)
    mc = msub.add_parser("check", help="validate models.yaml and check that every path exists")
    mc.add_argument("config")
    mc.set_defaults(func=cmd_models_check)

    from offline_eval.ja.command import add_command as add_ja

    add_ja(sub)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    from offline_eval.annotate.plan import plan_argv

    args = parser.parse_args(plan_argv(list(sys.argv[1:] if argv is None else argv)))
    args.rerun_argv = sys.argv[1:] if argv is None else None  # only a command of its own may start again
    if not args.debug:
        for k, v in _QUIET_ENV.items():
            os.environ.setdefault(k, v)
    else:
        os.environ["OFFLINE_EVAL_DEBUG"] = "1"
    try:
        return int(args.func(args) or 0)
    except OfflineEvalError as e:
        if args.debug:
            raise
        print(f"offline-eval: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("offline-eval: interrupted; finished outputs are in the store, re-run to resume", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - the contract is one line, no traceback, unless --debug
        if args.debug:
            raise
        print(f"offline-eval: error: {described(e)} (re-run with --debug for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
