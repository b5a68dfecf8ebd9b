"""models.yaml: the sweep's configuration (models, tasks, runner, margins) validated, with errors that name the
file, the field and what was expected."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Field, StrictFloat, StrictInt, ValidationError, field_validator

from offline_eval.inference.backends.registry import get_engine
from offline_eval.models.decoding import seed_problem
from offline_eval.models.paths import resolve_model_paths, resolve_path
from offline_eval.models.spec import ModelSpec, Strict, VariantSpec, greedy
from offline_eval.runtime.errors import InputError, format_validation_error, is_url, missing
from offline_eval.tasks import get_task_class, make_task
from offline_eval.tasks.kit.sections import Metric


class RunnerSpec(Strict):
    chunk_size: StrictInt = Field(
        512, ge=1, description="requests per engine call; bounds memory, and a crash loses at most one chunk"
    )
    executor: Literal["serial", "ray"] = Field("serial", description="ray: engine loads run on a Ray cluster")
    address: str | None = Field(
        None, description="the Ray cluster (executor: ray); auto: a running one, or a local one"
    )


class SweepConfig(Strict):
    output_dir: str = "runs/default"
    models: list[ModelSpec] = Field(min_length=1)
    tasks: dict[str, dict[str, Any]] = Field(min_length=1)
    runner: RunnerSpec = Field(default_factory=RunnerSpec)
    margin: dict[str, Annotated[StrictFloat, Field(gt=0)]] = Field(
        default_factory=dict,
        description="non-inferiority margin per task metric, in its units and inside its range: {accuracy: 0.02}",
    )
    # The report's language changes no number, so it is kept out of the config's digest (exclude).
    lang: Literal["en", "ja"] | None = Field(
        None, exclude=True, description="the report's language: en (default) or ja; `--lang` overrides it"
    )

    @field_validator("models")
    @classmethod
    def _unique(cls, v: list[ModelSpec]) -> list[ModelSpec]:
        names = [m.name for m in v]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"model names must be unique; repeated: {', '.join(sorted(dup))}")
        made: dict[str, str] = {}  # run name -> the model and variant that make it
        for i, m in enumerate(v):
            for variant, ctx in m.runs():
                run, who = m.run_name(variant, ctx), f"models.{i} ('{m.name}') variant '{variant}'"
                if run in made:
                    raise ValueError(
                        f"{made[run]} and {who} both make the run name '{run}': one run's results would replace "
                        "the other's; rename a model or a variant"
                    )
                made[run] = who
        for m in v:
            for twin in {m.declared_twin(k) for k in m.variants} - {None}:
                if twin == m.name or twin not in names:
                    raise ValueError(
                        f"model '{m.name}': same_weights_as '{twin}' must name another model of "
                        f"this config ({', '.join(n for n in names if n != m.name)})"
                    )
        return v

    def output_inside_input(self, out: Path) -> str | None:
        """Why `out` cannot be the output folder: it lies inside a model folder or an adapter the sweep reads (the
        store would be hashed as the model's weights, so every sweep would generate again and verify never pass)."""
        where = out.resolve()
        for i, m in enumerate(self.models):
            if get_engine(m.backend).remote:  # its path names the server's model
                continue
            reads = [(f"models.{i}.path", m.path)]
            for name, v in m.variants.items():
                reads += [(f"models.{i}.variants.{name}.{k}", getattr(v, k)) for k in ("file", "adapter")]
            for field, value in reads:
                folder = Path(value).resolve() if isinstance(value, str) and not is_url(value) else None
                if folder is not None and folder.is_dir() and where.is_relative_to(folder):
                    return f"the output folder {out} is inside {field} ({folder}): give a folder outside it"
        return None

    def backends(
        self, source: str | None = None, only: list[str] | None = None, only_tasks: list[str] | None = None
    ) -> set[str]:
        """The engines a sweep of it loads: its models' (those named by --only) and its tasks' evaluators'. A task's
        bad options are an error naming `source`, the config file."""

        wanted = {m.backend for m in self.models if not only or m.name in only}
        for name, options in self.tasks.items():
            stage = make_task(name, options, source).evaluation() if not only_tasks or name in only_tasks else None
            wanted |= {ev.backend for ev in stage.models()} if stage else set()
        return wanted


class DuplicateKeyError(yaml.YAMLError):
    def __init__(self, key: str, first: int, again: int, field: str) -> None:
        super().__init__(f"duplicate key '{key}' (lines {first} and {again}); YAML would keep only the last one")
        self.line, self.field = again, field


class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a repeated key in any mapping instead of silently keeping the last."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        own = [(k, v) for k, v in node.value if k.tag != "tag:yaml.org,2002:merge"]
        self.flatten_mapping(node)  # merge keys (<<: *base): the mapping's own keys override what they bring
        for key_node, _ in own:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                hash(key)
            except TypeError:
                continue  # an unhashable key: SafeLoader refuses it with its own message
            if key in seen:
                raise DuplicateKeyError(str(key), seen[key], line, str(key))
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def load_config(path: str | Path) -> SweepConfig:
    """Read and validate models.yaml; relative paths resolve against the file's folder."""
    p = Path(path)
    if is_url(str(path)):
        raise InputError("URLs are refused; give a local path", file=str(path))
    if not p.is_file():
        raise InputError("config file not found", file=str(path))
    try:
        raw = yaml.load(p.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", file=str(path)) from None
    except DuplicateKeyError as e:
        raise InputError(str(e), file=str(path), record=f"line {e.line}", field=e.field) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else None
        raise InputError(f"invalid YAML: {getattr(e, 'problem', e)}", file=str(path), record=where) from None
    if expanded_size(raw, MAX_CONFIG_VALUES) > MAX_CONFIG_VALUES:
        raise InputError(
            f"expands to more than {MAX_CONFIG_VALUES:,} values (YAML aliases repeated inside aliases?): a config "
            "that large would exhaust memory before it is read; write it out without nested aliases",
            file=str(path),
        )
    return parse_config(raw, p.resolve().parent, str(path))


# A config's values with every alias expanded: a real one holds hundreds, an alias bomb billions.
MAX_CONFIG_VALUES = 200_000


def expanded_size(raw: Any, limit: int) -> int:
    """How many values `raw` holds once its aliases are expanded (YAML shares an alias's object; whatever walks the
    config, validation included, visits it once per reference), counted only up to just past `limit`."""
    count, stack = 0, [raw]
    while stack and count <= limit:
        x = stack.pop()
        count += 1
        if isinstance(x, dict):
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return count


def parse_config(raw: Any, base: Path, source: str) -> SweepConfig:
    """A config as models.yaml would hold it, validated; relative paths resolve against `base`, by one rule
    (resolve_model_paths) for every model, top-level or a task's judge or evaluator."""

    if not isinstance(raw, dict):
        raise InputError("expected a mapping with `models` and `tasks`", file=source)
    raw = copy.deepcopy(raw)
    if isinstance(raw.get("output_dir"), str):
        raw["output_dir"] = resolve_path(base, raw["output_dir"])
    if isinstance(raw.get("models"), list):
        raw["models"] = [resolve_model_paths(m, base) for m in raw["models"]]
    declared: dict[str, Metric] = {}
    for name, opts in (raw.get("tasks") or {}).items() if isinstance(raw.get("tasks"), dict) else ():
        if not isinstance(opts, dict):
            continue
        try:
            task = get_task_class(name)
        except InputError as e:
            raise InputError(e.detail, file=source, field=f"tasks.{name}") from None
        metric = task.noninferiority_metric()
        declared[metric.name] = metric
        for key in task.path_options:
            if isinstance(opts.get(key), str):
                opts[key] = resolve_path(base, opts[key])
            elif isinstance(opts.get(key), list):  # several files (one per annotator)
                opts[key] = [resolve_path(base, v) if isinstance(v, str) else v for v in opts[key]]
            elif isinstance(opts.get(key), dict):  # one path per sub-task
                opts[key] = {k: resolve_path(base, v) if isinstance(v, str) else v for k, v in opts[key].items()}
        for key in task.model_options:  # an evaluation model, a list of LLM judges: resolved as under `models:`
            if key in opts:
                value = opts[key]
                opts[key] = (
                    [resolve_model_paths(m, base) for m in value]
                    if isinstance(value, list)
                    else resolve_model_paths(value, base)
                )
    try:
        cfg = SweepConfig.model_validate(raw)
    except ValidationError as e:
        raise format_validation_error(e, source) from None
    if problem := cfg.output_inside_input(Path(cfg.output_dir)):
        raise InputError(problem, file=source, field="output_dir")
    check_task_seeds(cfg, source)
    for key, value in cfg.margin.items():
        if why := margin_problem(key, value, declared):
            raise InputError(why, file=source, field=f"margin.{key}")
    return cfg


def margin_problem(metric: str, value: float, declared: dict[str, Metric], whose: str = "this config") -> str | None:
    """Why `value` cannot be `metric`'s non-inferiority margin, or None: a metric `whose` tasks test, a finite
    number above 0 and inside the metric's range. The one rule for models.yaml's `margin:` and compare's
    `--margin`."""
    if metric not in declared:
        return (
            f"no task of {whose} tests '{metric}' for non-inferiority (its tasks test: "
            f"{', '.join(sorted(declared)) or 'nothing'})"
        )
    if not math.isfinite(value) or not value > 0:
        return f"a margin of {value:g} is not a finite number above 0"
    bounds = declared[metric].bounds
    if bounds is not None and not value < bounds[1] - bounds[0]:
        return f"a margin of {value:g} is not inside {metric}'s range: it must lie in (0, {bounds[1] - bounds[0]:g})"
    return None


def check_task_seeds(cfg: SweepConfig, source: str) -> None:
    """A task's `seed` goes into every request it makes (the engines' seed where its model keeps the task's
    decoding), and its `samples` seeds a sampled model's answers seed..seed+k-1: each must be a seed the engines
    run as given (0..2^32-1, none past it), as a model's own `seed` and `sampling.seed` are."""
    for name, opts in cfg.tasks.items():
        seed = opts.get("seed") if isinstance(opts, dict) else None
        if type(seed) is int and (problem := seed_problem(seed)):
            raise InputError(problem, file=source, field=f"tasks.{name}.seed")
        k = opts.get("samples") if isinstance(opts, dict) else None
        if type(k) is not int or k < 2:
            continue  # answered once, or not a count (the task names that)
        for m in cfg.models:
            for v in m.variants:
                if not greedy(m.sampling_of(v)) and (problem := seed_problem(m.first_seed(v), k)):
                    raise InputError(f"model '{m.name}': {problem}", file=source, field=f"tasks.{name}.samples")


def check_paths(cfg: SweepConfig, source: str) -> list[str]:
    """Everything `models check` verifies beyond the schema. Returns a list of problems (empty = fine)."""
    problems = [
        p for i, m in enumerate(cfg.models) for v in m.variants if (p := m.path_problem(v, source, i)) is not None
    ]
    return problems + data_path_problems(cfg, source)


def data_path_problems(cfg: SweepConfig, source: str) -> list[str]:
    problems = []
    for name, opts in cfg.tasks.items():
        data = opts.get("data") if isinstance(opts, dict) else None
        paths = data.items() if isinstance(data, dict) else [(None, data)]
        for sub, value in paths:
            if not isinstance(value, str):
                continue
            field = f"tasks.{name}.data" + (f".{sub}" if sub else "")
            if is_url(value):
                problems.append(f"{source}: field '{field}': URLs are refused, give a local path")
            elif why := missing(value):
                problems.append(f"{source}: field '{field}': path {why}: {value}")
    return problems


__all__ = [
    "ModelSpec",
    "SweepConfig",
    "VariantSpec",
    "check_paths",
    "check_task_seeds",
    "data_path_problems",
    "load_config",
    "parse_config",
]
