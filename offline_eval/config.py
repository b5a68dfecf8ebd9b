"""models.yaml: pydantic models, and errors that name the file, the field and what was expected."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .backends.base import BACKEND_NAMES, LoadSpec
from .errors import InputError, is_url


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


_NAME = r"^[A-Za-z0-9][A-Za-z0-9._+-]*$"


class VariantSpec(Strict):
    """One way of loading the model: a different file (GGUF, pre-quantized folder) and/or load options."""

    file: str | None = Field(None, description="weights file or folder replacing the model's `path`")
    dtype: str | None = None
    quantization: str | None = Field(None, description="vllm: awq, gptq, fp8, ...; transformers: int8, int4")
    options: dict[str, Any] = Field(default_factory=dict, description="extra engine constructor arguments")


class ModelSpec(Strict):
    name: str = Field(pattern=_NAME)
    backend: Literal["vllm", "llamacpp", "transformers"]
    path: str
    variants: dict[str, VariantSpec] = Field(default_factory=lambda: {"default": VariantSpec()})
    max_model_len: int | list[int] = Field(4096, description="context length, or a list: one run per length")
    tensor_parallel_size: int = Field(1, ge=1)
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    n_gpu_layers: int | None = None
    threads: int | None = Field(None, ge=1)
    batch_size: int = Field(16, ge=1)
    enable_prefix_caching: bool = True
    chat_template: str | None = None
    trust_remote_code: bool = False
    seed: int = 0
    engine_args: dict[str, Any] = Field(default_factory=dict)

    @field_validator("max_model_len")
    @classmethod
    def _contexts(cls, v: int | list[int]) -> int | list[int]:
        values = v if isinstance(v, list) else [v]
        if not values or any(x <= 0 for x in values) or len(set(values)) != len(values):
            raise ValueError("context lengths must be positive and distinct")
        return v

    def contexts(self) -> list[int]:
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
            name=self.name, backend=self.backend, path=v.file or self.path, variant=variant,
            max_model_len=ctx or self.contexts()[0], dtype=v.dtype, quantization=v.quantization,
            chat_template=self.chat_template, trust_remote_code=self.trust_remote_code, seed=self.seed,
            tensor_parallel_size=self.tensor_parallel_size, gpu_memory_utilization=self.gpu_memory_utilization,
            n_gpu_layers=self.n_gpu_layers, threads=self.threads, batch_size=self.batch_size,
            enable_prefix_caching=self.enable_prefix_caching, engine_args={**self.engine_args, **v.options})

    def run_name(self, variant: str, ctx: int | None = None) -> str:
        """Says what the run was: model, engine, variant (quantization), context length."""
        return f"{self.name}.{self.backend}.{variant}.ctx{ctx or self.contexts()[0]}"

    def path_problem(self, variant: str, source: str, index: int) -> str | None:
        """Why this variant's weights cannot be loaded, naming the config field; None if they look fine."""
        v = self.variants[variant]
        field, value = ((f"models.{index}.variants.{variant}.file", v.file) if v.file
                        else (f"models.{index}.path", self.path))
        if is_url(value):
            return f"{source}: field '{field}': URLs are refused, give a local path: {value}"
        if not Path(value).exists():
            return f"{source}: field '{field}': path does not exist: {value}"
        if self.backend == "llamacpp" and not Path(value).is_file():
            return f"{source}: field '{field}': llamacpp needs a .gguf file: {value}"
        if self.backend != "llamacpp" and not Path(value).is_dir():
            return f"{source}: field '{field}': {self.backend} needs a model folder: {value}"
        return None


class RunnerSpec(Strict):
    chunk_size: int = Field(512, ge=1, description="requests per engine call; bounds memory, and a crash "
                                                    "loses at most one chunk")


class SweepConfig(Strict):
    output_dir: str = "runs/default"
    models: list[ModelSpec] = Field(min_length=1)
    tasks: dict[str, dict[str, Any]] = Field(min_length=1)
    runner: RunnerSpec = Field(default_factory=RunnerSpec)

    @field_validator("models")
    @classmethod
    def _unique(cls, v: list[ModelSpec]) -> list[ModelSpec]:
        names = [m.name for m in v]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"model names must be unique; repeated: {', '.join(sorted(dup))}")
        return v


def format_validation_error(e: ValidationError, file: str | None, prefix: str = "") -> InputError:
    err = e.errors()[0]
    loc = ".".join(str(p) for p in (prefix.split(".") if prefix else []) + list(err["loc"]))
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown key (check the spelling; see the README's models.yaml reference)"
    more = f" (and {len(e.errors()) - 1} more)" if len(e.errors()) > 1 else ""
    return InputError(msg + more, file=file, field=loc or None)


def load_config(path: str | Path) -> SweepConfig:
    """Read and validate models.yaml; relative paths resolve against the file's folder."""
    p = Path(path)
    if is_url(str(path)):
        raise InputError("URLs are refused; give a local path", file=str(path))
    if not p.is_file():
        raise InputError("config file not found", file=str(path))
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", file=str(path)) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else None
        raise InputError(f"invalid YAML: {getattr(e, 'problem', e)}", file=str(path), record=where) from None
    if not isinstance(raw, dict):
        raise InputError("expected a mapping with `models` and `tasks`", file=str(path))
    try:
        cfg = SweepConfig.model_validate(raw)
    except ValidationError as e:
        raise format_validation_error(e, str(path)) from None
    base = p.resolve().parent
    cfg.output_dir = str(_resolve(base, cfg.output_dir))
    for m in cfg.models:
        m.path = _resolve(base, m.path)
        for v in m.variants.values():
            if v.file:
                v.file = _resolve(base, v.file)
        if m.chat_template and "{" not in m.chat_template:
            m.chat_template = _resolve(base, m.chat_template)
    for name, opts in cfg.tasks.items():
        if not isinstance(opts, dict):
            continue
        for key in ("data", "validation_data", "scorer", "human_scores"):
            if isinstance(opts.get(key), str):
                opts[key] = _resolve(base, opts[key])
            elif isinstance(opts.get(key), dict):  # one path per sub-task
                opts[key] = {k: _resolve(base, v) if isinstance(v, str) else v for k, v in opts[key].items()}
        # Model specs inside a task: an evaluation model, or a list of LLM judges.
        specs = [opts.get("evaluator")] + (opts["judges"] if isinstance(opts.get("judges"), list) else [])
        for ev in specs:
            if isinstance(ev, dict):
                if isinstance(ev.get("path"), str):
                    ev["path"] = _resolve(base, ev["path"])
                for v in (ev.get("variants") or {}).values():
                    if isinstance(v, dict) and isinstance(v.get("file"), str):
                        v["file"] = _resolve(base, v["file"])
    cfg._source = str(path)  # type: ignore[attr-defined]
    return cfg


def _resolve(base: Path, value: str) -> str:
    if is_url(value):
        return value  # refused with a clear message by check_paths / the loaders
    v = Path(value).expanduser()
    return str(v if v.is_absolute() else (base / v))


def check_paths(cfg: SweepConfig, source: str) -> list[str]:
    """Everything `models check` verifies beyond the schema. Returns a list of problems (empty = fine)."""
    problems = [p for i, m in enumerate(cfg.models) for v in m.variants
                if (p := m.path_problem(v, source, i)) is not None]
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
            elif not Path(value).exists():
                problems.append(f"{source}: field '{field}': path does not exist: {value}")
    return problems


__all__ = ["BACKEND_NAMES", "ModelSpec", "SweepConfig", "VariantSpec", "check_paths", "data_path_problems",
           "load_config"]
