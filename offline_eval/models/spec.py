"""A model as models.yaml declares it (under `models:`, or as a task's judge or evaluator): its variants, context
lengths and engine options, validated; and the one rule that resolves its relative paths."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    Field,
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

from offline_eval.inference.backends.chat import checked_setting, spec_template
from offline_eval.inference.backends.registry import engine_names, get_engine
from offline_eval.inference.backends.spec import LoadSpec
from offline_eval.inference.constrained.libraries import backend_problem, normalized
from offline_eval.modelfiles.peft import SERVED
from offline_eval.modelfiles.quantization import quantization_problem
from offline_eval.runtime.errors import InputError, is_url, missing

from .adapter_pairs import adapter_group
from .decoding import SEED_MAX, ReasoningSpec, SamplingSpec, Strict, checked_seed, first_seeds, seed_problem

_NAME = r"^[A-Za-z0-9][A-Za-z0-9._+-]*$"
_FULL_PRECISION = {"bf16", "f16", "fp16", "bfloat16", "float16", "half"}


def greedy(s: SamplingSpec | Literal["model"] | None) -> bool:
    """Decoding that gives one answer whatever the seed ('model': the weights' files say, when the run starts)."""
    return s is None or (isinstance(s, SamplingSpec) and s.temperature == 0)


def _budget_variants(model: ModelSpec) -> dict[str, VariantSpec]:
    """Each variant whose thinking has a list of budgets, as one variant per budget: `VARIANT.thinkN`."""
    out: dict[str, VariantSpec] = {}
    for name, v in model.variants.items():
        r = model.reasoning_of(name)
        if r is None or not r.think or len(r.budgets()) == 1:
            out[name] = v
            continue
        for b in r.budgets():
            out[f"{name}.think{b}"] = v.model_copy(update={"reasoning": {**(v.reasoning or {}), "budget": b}})
    return out


class VariantSpec(Strict):
    """One way of loading the model: a different file (GGUF, pre-quantized folder) and/or load options."""

    file: str | None = Field(None, description="weights file or folder replacing the model's `path`")
    dtype: str | None = None
    quantization: str | None = Field(None, description="vllm: awq, gptq, fp8, ...; transformers: int8, int4")
    options: dict[str, Any] = Field(default_factory=dict, description="extra engine constructor arguments")
    same_weights_as: str | None = Field(
        None, description="another model of this config with the same weights (GGUF and HF folder): consistency table"
    )
    reasoning: dict[str, Any] | None = Field(None, description="keys of the model's `reasoning` this variant changes")
    sampling: dict[str, Any] | None = Field(None, description="keys of the model's `sampling` this variant changes")
    adapter: str | None = Field(None, description="a LoRA adapter over the weights: a PEFT folder (llama.cpp: .gguf)")
    # past 100 the model has diverged, not been tuned (1e308 overflows every engine's logits to NaN)
    adapter_scale: float | None = Field(None, gt=0, le=100, allow_inf_nan=False, description="the adapter's strength")

    @model_validator(mode="after")
    def _scale_of_an_adapter(self) -> VariantSpec:
        if self.adapter_scale is not None and self.adapter is None:  # said, not ignored
            raise ValueError(f"adapter_scale {self.adapter_scale} without an adapter scales nothing: give adapter")
        return self


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
    seed: StrictInt = Field(0, description=f"0..{SEED_MAX}: the engine's, and the first sample's")
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
    constraint_backend: str | None = Field(
        None, description="auto (default) | xgrammar | guidance | outlines | gbnf: the library that masks tokens"
    )
    reasoning: ReasoningSpec | None = None
    sampling: SamplingSpec | Literal["model"] | None = Field(
        None, description="absent: greedy; model: the model's own recommended settings (generation_config.json, GGUF)"
    )
    samples: StrictInt | None = Field(
        None, ge=1, description="answers drawn per item (seeds seed..seed+k-1); needs sampling at temperature > 0"
    )
    reference: str | None = Field(
        None,
        description="the run every other run of this model is tested against for "
        "non-inferiority: VARIANT or VARIANT.ctxN (default: the bf16/f16 "
        "variant, else the first, at the longest context)",
    )

    @field_validator("sampling", mode="before")
    @classmethod
    def _sampling(cls, v: Any) -> Any:
        """A block is validated as a block: its errors name sampling.seed, not sampling.SamplingSpec.seed."""
        return SamplingSpec.model_validate(v) if isinstance(v, dict) else v

    @field_validator("constraint_backend")
    @classmethod
    def _constraint_backend(cls, v: str | None, info: ValidationInfo) -> str | None:
        engines = {e: get_engine(e).constraint_backends for e in engine_names()}
        if info.data.get("backend") not in engines:
            return v  # the backend validator names the problem
        if problem := backend_problem(info.data["backend"], v, engines):
            raise PydanticCustomError("constraint_backend", "{problem}", {"problem": problem})
        return v

    @field_validator("seed")
    @classmethod
    def _seed(cls, v: int) -> int:
        return checked_seed(v) or 0

    @field_validator("samples")
    @classmethod
    def _samples_seeds(cls, v: int | None, info: ValidationInfo) -> int | None:
        """Sample i is seeded seed + i: the last seed must still be one the engines run as given."""
        if v is None or "seed" not in info.data:
            return v
        for where, seed in first_seeds(info.data.get("sampling"), info.data["seed"], info.data.get("variants")):
            if problem := seed_problem(seed, v):
                raise PydanticCustomError("seed", "{problem}", {"problem": f"{problem} (the first seed: {where})"})
        return v

    @model_validator(mode="after")
    def _reference(self) -> ModelSpec:
        for name in self.variants:  # a variant's changes must make a valid block
            if self.variants[name].adapter is not None and get_engine(self.backend).remote:
                raise ValueError(f"variants.{name}.adapter: {SERVED}")
            self.reasoning_of(name)
            sampling = self.sampling_of(name)  # validated whether or not it samples several times
            if (self.samples or 1) > 1 and greedy(sampling):
                raise ValueError(
                    f"samples: {self.samples} draws the same greedy answer {self.samples} times"
                    + (f" (variant {name})" if len(self.variants) > 1 else "")
                    + ": give sampling a temperature above 0"
                )
        self.variants = _budget_variants(self)
        for name, ctx in self.runs():
            if problem := self.budget_problem(name, ctx):
                raise PydanticCustomError("budget", "{problem}", {"problem": problem})
        if self.reference is not None:
            self.reference_run()  # raises naming what exists
        return self

    def first_seed(self, variant: str) -> int:
        """The seed of the variant's first sample (its sampling's, else the model's)."""
        s = self.sampling_of(variant)
        return s.seed if isinstance(s, SamplingSpec) and s.seed is not None else self.seed

    def budget_problem(self, variant: str, ctx: int) -> str | None:
        """Why the variant's thinking budget cannot fit any prompt in context length `ctx`, whatever the prompt
        (the fit rule's least: an empty prompt, one answer token, the closing delimiter); None: it may.
        A tokenizer counts the prompts themselves in the plan (thinking_checks.check_thinking)."""
        r = self.reasoning_of(variant)
        if r is None or not r.think or not ctx:  # 0: the server's length, unknown here
            return None
        remote = get_engine(self.backend).remote
        close = 0 if remote else len(r.close)  # the fit rule's reserve for it (thinking._think)
        least = r.budgets()[0] + 1 + close
        if least <= ctx:
            return None
        run = f" (variant {variant})" if len(self.variants) > 1 else ""
        return (
            f"model '{self.name}'{run}: a thinking budget of {r.budgets()[0]} tokens cannot fit in max_model_len "
            f"{ctx}: even an empty prompt needs {least} tokens (the budget, one answer token"
            + (f", {close} for the closing delimiter" if close else "")
            + "): give a smaller budget or a longer max_model_len"
        )

    def reasoning_of(self, variant: str) -> ReasoningSpec | None:
        """The variant's thinking settings (the model's, with the variant's changes); None: not a reasoning run."""
        over = self.variants[variant].reasoning
        if over is None:
            return self.reasoning
        base = self.reasoning.model_dump() if self.reasoning else {}
        return _block(ReasoningSpec, {**base, **over}, f"variants.{variant}.reasoning")

    def sampling_of(self, variant: str) -> SamplingSpec | Literal["model"] | None:
        """The variant's sampling ('model': read from its weights' files when it runs)."""
        over = self.variants[variant].sampling
        if over is None:
            return self.sampling
        base = self.sampling.model_dump(exclude_unset=True) if isinstance(self.sampling, SamplingSpec) else {}
        return _block(SamplingSpec, {**base, **over}, f"variants.{variant}.sampling")

    def reference_run(self) -> tuple[str, int]:
        """(variant, context length) of the run the others are compared against."""
        longest = max(self.contexts())
        ref = self.reference
        if ref is None:
            full = [
                k
                for k, v in self.variants.items()
                if re.sub(r"\.think\d+$", "", k).lower() in _FULL_PRECISION
                or (v.dtype or "").lower() in _FULL_PRECISION
            ]
            candidates = full or list(self.variants)
            # Of one variant's thinking budgets, the largest: the most thinking is what the others are held to.
            budget = {k: r.budgets()[0] if (r := self.reasoning_of(k)) and r.think else 0 for k in candidates}
            first = re.sub(r"\.think\d+$", "", candidates[0])
            same = [k for k in candidates if re.sub(r"\.think\d+$", "", k) == first]
            return max(same, key=lambda k: budget[k]), longest
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
        # absent is not-a-reasoning-model, no adapter: a config as it was before them
        for block in ("reasoning", "sampling", "samples", "adapter", "adapter_scale", "constraint_backend"):
            if data.get(block) is None:
                data.pop(block, None)
            for v in (data.get("variants") or {}).values():
                if isinstance(v, dict) and v.get(block) is None:
                    v.pop(block, None)
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
            adapter=v.adapter,
            adapter_scale=v.adapter_scale if v.adapter_scale is not None else 1.0,
            adapter_group=adapter_group(self.variants, variant),
            constraint_backend=normalized(get_engine(self.backend).constraint_backends, self.constraint_backend),
        )

    def run_name(self, variant: str, ctx: int | None = None) -> str:
        """Says what the run was: model, engine, variant (quantization), context length."""
        length = ctx or self.contexts()[0]
        return f"{self.name}.{self.backend}.{variant}.ctx{length or 'server'}"

    def path_problem(self, variant: str, source: str, index: int) -> str | None:
        """Why this variant's weights cannot be loaded, naming the config field; None if they look fine."""
        v = self.variants[variant]
        if get_engine(self.backend).remote:  # no local weights: the server is reached (and checked) at the run
            return None
        field, value = (
            (f"models.{index}.variants.{variant}.file", v.file) if v.file else (f"models.{index}.path", self.path)
        )
        if is_url(value):
            return f"{source}: field '{field}': URLs are refused, give a local path: {value}"
        if why := missing(value):
            return f"{source}: field '{field}': path {why}: {value}"
        if problem := get_engine(self.backend).path_problem(value) or quantization_problem(value, v.quantization):
            return f"{source}: field '{field}': {problem}: {value}"
        if why := get_engine(self.backend).load_quantization_problem(value, v.quantization):
            return f"{source}: field 'models.{index}.variants.{variant}.quantization': {why}"
        if v.adapter is None:
            return None
        field = f"models.{index}.variants.{variant}.adapter"
        if why := missing(v.adapter):
            return f"{source}: field '{field}': path {why}: {v.adapter}"
        return get_engine(self.backend).adapter_problem(v.adapter, value)


def _block(cls: type[Any], data: dict[str, Any], where: str) -> Any:
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        raise ValueError(f"{where}.{key}: {err['msg']}") from None


def one_load(spec: ModelSpec) -> ModelSpec:
    """An evaluator or judge is loaded once: it must name one variant and one context length."""
    if len(spec.runs()) != 1:
        raise ValueError(
            f"evaluator '{spec.name}' must have one variant and one max_model_len (it is loaded once, "
            f"to score every candidate); it has {len(spec.variants)} variant(s) x "
            f"{len(spec.contexts())} context length(s)"
        )
    return spec
