"""models.yaml: pydantic models, and errors that name the file, the field and what was expected."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .backends.base import LoadSpec
from .backends.chat import checked_setting, normalize_setting, spec_template
from .backends.registry import engine_names, get_engine
from .errors import InputError, format_validation_error, is_url, missing


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


_NAME = r"^[A-Za-z0-9][A-Za-z0-9._+-]*$"
_FULL_PRECISION = {"bf16", "f16", "fp16", "bfloat16", "float16", "half"}


class VariantSpec(Strict):
    """One way of loading the model: a different file (GGUF, pre-quantized folder) and/or load options."""

    file: str | None = Field(None, description="weights file or folder replacing the model's `path`")
    dtype: str | None = None
    quantization: str | None = Field(None, description="vllm: awq, gptq, fp8, ...; transformers: int8, int4")
    options: dict[str, Any] = Field(default_factory=dict, description="extra engine constructor arguments")
    same_weights_as: str | None = Field(
        None,
        description="another model of this config with the same weights "
        "(e.g. a GGUF and its HF folder): the consistency table",
    )


class ModelSpec(Strict):
    name: str = Field(pattern=_NAME)
    backend: str = Field(description="an engine name: see `offline-eval run --help`")
    path: str = Field(description="the weights (a served model has none: its engine's keys say where it is)")
    variants: dict[str, VariantSpec] = Field(default_factory=lambda: {"default": VariantSpec()})
    # Strict: YAML's `true` must not become context length 1, nor "8192" a number by accident.
    max_model_len: StrictInt | list[StrictInt] | None = Field(
        None, description="context length, or a list: one run per length (default 4096; a served model: the server's)"
    )
    tensor_parallel_size: StrictInt = Field(1, ge=1)
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    n_gpu_layers: StrictInt | None = None
    threads: StrictInt | None = Field(None, ge=1)
    batch_size: StrictInt = Field(16, ge=1)
    enable_prefix_caching: StrictBool = True
    chat_template: str | None = Field(
        None,
        description="auto (default): the model's own, or the plain format "
        "if it has none; none: always plain; a file; template text",
    )
    trust_remote_code: StrictBool = False
    seed: StrictInt = 0
    engine_args: dict[str, Any] = Field(default_factory=dict)
    same_weights_as: str | None = Field(
        None,
        description="another model of this config with the same weights, "
        "on another engine or format: the consistency table",
    )
    data_parallel_size: StrictInt = Field(
        1, ge=1, description="under --ray: engines (replicas) that share one load's requests"
    )
    resources: dict[str, float] | None = Field(
        None,
        description="under --ray: what one replica reserves "
        "(CPU, GPU, custom resources), replacing the "
        "engine's own estimate",
    )
    reference: str | None = Field(
        None,
        description="the run every other run of this model is tested against for "
        "non-inferiority: VARIANT or VARIANT.ctxN (default: the bf16/f16 "
        "variant, else the first, at the longest context)",
    )

    @model_validator(mode="after")
    def _reference(self) -> ModelSpec:
        if self.reference is not None:
            self.reference_run()  # raises naming what exists
        return self

    def reference_run(self) -> tuple[str, int]:
        """(variant, context length) of the run the others are compared against."""
        longest = max(self.contexts())
        ref = self.reference
        if ref is None:
            full = [
                k
                for k, v in self.variants.items()
                if k.lower() in _FULL_PRECISION or (v.dtype or "").lower() in _FULL_PRECISION
            ]
            return (full or list(self.variants))[0], longest
        m = re.match(r"^(.+)\.ctx(\d+)$", ref)
        if m and m.group(1) in self.variants:
            if int(m.group(2)) not in self.contexts():
                raise ValueError(
                    f"reference '{ref}': context length {m.group(2)} is not one of max_model_len {self.contexts()}"
                )
            return m.group(1), int(m.group(2))
        if ref not in self.variants:
            raise ValueError(
                f"reference '{ref}' must name a variant ({', '.join(self.variants)}), optionally with .ctxN"
            )
        return ref, longest

    # The keys the engine declares for itself (Engine.options, e.g. a server's base_url), gathered from the
    # model's own level by _engine_keys and validated against the engine's model by _engine_options.
    engine_options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _engine_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if "engine_options" in data:
            raise PydanticCustomError(
                "engine_option",
                "unknown key (give the engine's keys at the model's own level)",
                {"key": "engine_options"},
            )
        try:
            engine = get_engine(str(data.get("backend")))
        except InputError:
            return data  # the backend validator names the problem
        data = dict(data)
        if engine.options is not None:
            data["engine_options"] = {k: data.pop(k) for k in list(data) if k in engine.options.model_fields}
        if engine.remote:
            if "path" in data:
                raise PydanticCustomError(
                    "engine_option",
                    "backend '{b}' evaluates a served model and takes no `path` (give base_url and model)",
                    {"b": engine.name, "key": "path"},
                )
            data["path"] = ""
        return data

    @field_validator("engine_options")
    @classmethod
    def _engine_options(cls, v: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        backend = info.data.get("backend")
        declared = get_engine(backend).options if backend else None
        if declared is None:
            return v
        try:
            return declared.model_validate(v).model_dump()
        except ValidationError as e:
            err = e.errors()[0]
            msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
            raise PydanticCustomError(
                "engine_option", "{problem}", {"problem": msg, "key": ".".join(str(p) for p in err["loc"])}
            ) from None

    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Dumped as models.yaml holds it (the engine's own keys at the model's level, no `path` for a served
        model), so that a dump validates again: the provenance keeps task options that `verify` re-reads."""
        data: dict[str, Any] = handler(self)
        data.update(data.pop("engine_options", None) or {})
        if get_engine(self.backend).remote:
            data.pop("path", None)
        return data

    def server_urls(self) -> list[str]:
        """The URLs this model is reached at (its engine's options say; none for local weights)."""
        return get_engine(self.backend).connects_to(self.engine_options)

    def declared_twin(self, variant: str) -> str | None:
        """The model this variant declares the same weights as (its own setting first, then the model's)."""
        return self.variants[variant].same_weights_as or self.same_weights_as

    @field_validator("backend")
    @classmethod
    def _backend(cls, v: str) -> str:
        names = engine_names()
        if v not in names:
            listed = ", ".join(f"'{n}'" for n in names[:-1]) + f" or '{names[-1]}'"
            raise PydanticCustomError("backend", "Input should be {listed}", {"listed": listed})
        return v

    @field_validator("max_model_len")
    @classmethod
    def _contexts(cls, v: int | list[int] | None) -> int | list[int] | None:
        if v is None:
            return v
        values = v if isinstance(v, list) else [v]
        if not values or any(x <= 0 for x in values) or len(set(values)) != len(values):
            raise ValueError("context lengths must be positive and distinct")
        return v

    @field_validator("chat_template")
    @classmethod
    def _chat_template(cls, v: str | None, info: ValidationInfo) -> str | None:
        # A missing file or a broken template fails here, before any engine starts, never becoming the prompt.
        try:
            return checked_setting(v, (info.context or {}).get("base"))
        except ValueError as e:
            raise PydanticCustomError("chat_template", "{problem}", {"problem": str(e)}) from None

    def contexts(self) -> list[int]:
        """Context lengths, one run each; 0: the length the server reports (a served model's default)."""
        if self.max_model_len is None:
            return [0 if get_engine(self.backend).remote else 4096]
        return list(self.max_model_len) if isinstance(self.max_model_len, list) else [self.max_model_len]

    def runs(self) -> list[tuple[str, int]]:
        """(variant, context length) pairs: each is one engine load."""
        return [(v, c) for v in self.variants for c in self.contexts()]

    @field_validator("variants")
    @classmethod
    def _variant_names(cls, v: dict[str, VariantSpec]) -> dict[str, VariantSpec]:
        for k in v:
            if not re.match(_NAME, k):
                raise ValueError(f"variant name '{k}' must match {_NAME}")
        if not v:
            raise ValueError("at least one variant is needed (or leave `variants` out)")
        return v

    def load_spec(self, variant: str, ctx: int | None = None) -> LoadSpec:
        v = self.variants[variant]
        return LoadSpec(
            name=self.name,
            backend=self.backend,
            path=v.file or self.path,
            variant=variant,
            max_model_len=ctx or self.contexts()[0],
            dtype=v.dtype,
            quantization=v.quantization,
            chat_template=spec_template(self.chat_template),
            trust_remote_code=self.trust_remote_code,
            seed=self.seed,
            tensor_parallel_size=self.tensor_parallel_size,
            gpu_memory_utilization=self.gpu_memory_utilization,
            n_gpu_layers=self.n_gpu_layers,
            threads=self.threads,
            batch_size=self.batch_size,
            enable_prefix_caching=self.enable_prefix_caching,
            engine_args={**self.engine_args, **v.options},
            engine_options=dict(self.engine_options),
        )

    def run_name(self, variant: str, ctx: int | None = None) -> str:
        """Says what the run was: model, engine, variant (quantization), context length."""
        length = ctx or self.contexts()[0]
        return f"{self.name}.{self.backend}.{variant}.ctx{length or 'server'}"

    def path_problem(self, variant: str, source: str, index: int) -> str | None:
        """Why this variant's weights cannot be loaded, naming the config field; None if they look fine."""
        v = self.variants[variant]
        if get_engine(self.backend).remote:
            return None  # no local weights: the server is reached (and checked) when the run starts
        field, value = (
            (f"models.{index}.variants.{variant}.file", v.file) if v.file else (f"models.{index}.path", self.path)
        )
        if is_url(value):
            return f"{source}: field '{field}': URLs are refused, give a local path: {value}"
        if why := missing(value):
            return f"{source}: field '{field}': path {why}: {value}"
        problem = get_engine(self.backend).path_problem(value)
        return f"{source}: field '{field}': {problem}: {value}" if problem else None


def one_load(spec: ModelSpec) -> ModelSpec:
    """An evaluator or judge is loaded once: it must name one variant and one context length."""
    if len(spec.runs()) != 1:
        raise ValueError(
            f"evaluator '{spec.name}' must have one variant and one max_model_len (it is loaded once, "
            f"to score every candidate); it has {len(spec.variants)} variant(s) x "
            f"{len(spec.contexts())} context length(s)"
        )
    return spec


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
    margin: dict[str, PositiveFloat] = Field(
        default_factory=dict, description="non-inferiority margin per task metric, in its units: {accuracy: 0.02}"
    )

    @field_validator("models")
    @classmethod
    def _unique(cls, v: list[ModelSpec]) -> list[ModelSpec]:
        names = [m.name for m in v]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"model names must be unique; repeated: {', '.join(sorted(dup))}")
        for m in v:
            for twin in {m.declared_twin(k) for k in m.variants} - {None}:
                if twin == m.name or twin not in names:
                    raise ValueError(
                        f"model '{m.name}': same_weights_as '{twin}' must name another model of "
                        f"this config ({', '.join(n for n in names if n != m.name)})"
                    )
        return v


class DuplicateKeyError(yaml.YAMLError):
    def __init__(self, key: str, first: int, again: int, field: str) -> None:
        super().__init__(f"duplicate key '{key}' (lines {first} and {again}); YAML would keep only the last one")
        self.line, self.field = again, field


class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a repeated key in any mapping instead of silently keeping the last."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
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
    return parse_config(raw, p.resolve().parent, str(path))


def parse_config(raw: Any, base: Path, source: str) -> SweepConfig:
    """A config as models.yaml would hold it, validated; relative paths resolve against `base`."""
    if not isinstance(raw, dict):
        raise InputError("expected a mapping with `models` and `tasks`", file=source)
    raw = copy.deepcopy(raw)
    path = source
    try:
        cfg = SweepConfig.model_validate(raw, context={"base": base})
    except ValidationError as e:
        raise format_validation_error(e, source) from None
    cfg.output_dir = str(_resolve(base, cfg.output_dir))
    for m in cfg.models:
        m.path = _resolve(base, m.path) if m.path else m.path
        if isinstance(m.engine_options.get("tokenizer"), str):
            m.engine_options["tokenizer"] = _resolve(base, m.engine_options["tokenizer"])
        for v in m.variants.values():
            if v.file:
                v.file = _resolve(base, v.file)
    from .tasks import get_task_class

    declared: set[str] = set()
    for name, opts in cfg.tasks.items():
        if not isinstance(opts, dict):
            continue
        try:
            task = get_task_class(name)
        except InputError as e:
            raise InputError(e.detail, file=str(path), field=f"tasks.{name}") from None
        declared.add(task.noninferiority_metric().name)
        for key in task.path_options:
            if isinstance(opts.get(key), str):
                opts[key] = _resolve(base, opts[key])
            elif isinstance(opts.get(key), dict):  # one path per sub-task
                opts[key] = {k: _resolve(base, v) if isinstance(v, str) else v for k, v in opts[key].items()}
        # Model specs inside a task (an evaluation model, a list of LLM judges) resolve like `models:`.
        specs = [
            s for key in task.model_options for s in (opts[key] if isinstance(opts.get(key), list) else [opts.get(key)])
        ]
        for ev in specs:
            if isinstance(ev, dict):
                if isinstance(ev.get("path"), str):
                    ev["path"] = _resolve(base, ev["path"])
                tpl = ev.get("chat_template")
                if isinstance(tpl, str) and normalize_setting(tpl) not in (None, "none") and "{" not in tpl:
                    ev["chat_template"] = _resolve(base, tpl)
                for v in (ev.get("variants") or {}).values():
                    if isinstance(v, dict) and isinstance(v.get("file"), str):
                        v["file"] = _resolve(base, v["file"])
    for key in cfg.margin:
        if key not in declared:
            raise InputError(
                f"no task of this config tests '{key}' for non-inferiority (its tasks test: "
                f"{', '.join(sorted(declared))})",
                file=str(path),
                field=f"margin.{key}",
            )
    return cfg


def _resolve(base: Path, value: str) -> str:
    if is_url(value):
        return value  # refused with a clear message by check_paths / the loaders
    v = Path(value).expanduser()
    return str(v if v.is_absolute() else (base / v))


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
    "data_path_problems",
    "load_config",
    "parse_config",
]
