"""The models.yaml keys of `backend: vllm`, and what they decide before the engine starts: compiled or eager."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, StrictInt, model_serializer

from offline_eval.inference.backends.spec import LoadSpec

# Prompt tokens submitted from which a compiled load finishes before an eager one, on CPU: Gemma 3 270M, JBE-QA at
# 0 and 4 shots, with the compiled model in the cache (it loads in seconds) and without it (the piecewise compile
# takes about half a minute on 2 cores): scripts/bench_compile_crossover.py, docs/benchmarks.md.
COMPILE_ABOVE_TOKENS_CACHED = 250_000
COMPILE_ABOVE_TOKENS = 1_300_000


class VLLMOptions(BaseModel):
    """The models.yaml keys of `backend: vllm`."""

    model_config = ConfigDict(extra="forbid")

    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Only the keys the user wrote: a config without them dumps, and hashes, as it did before they existed."""
        return {k: v for k, v in handler(self).items() if k in self.model_fields_set}

    compile: Literal["auto", "always", "never"] = Field(
        "auto",
        description="torch.compile the model (always), run it eager (never), or (auto) on CPU compile only a load "
        "planned for at least compile_above_tokens prompt tokens; on a GPU auto compiles",
    )
    compile_above_tokens: StrictInt | None = Field(
        None,
        ge=0,
        description=f"auto: the planned prompt tokens from which a CPU load compiles; unset, {COMPILE_ABOVE_TOKENS:,} "
        f"or, where the cache holds the load's compiled model, {COMPILE_ABOVE_TOKENS_CACHED:,}",
    )
    cpu_compile: Literal["piecewise", "whole"] = Field(
        "piecewise",
        description="on CPU, how a compiled load compiles: piecewise (the pieces between attention calls, compiled "
        "once and reused by every layer, as vLLM compiles on a GPU; about half the first compile) or whole (vLLM's "
        "CPU default, the model as one graph). Piecewise needs the engine core in this process (one shard, vLLM's "
        "own executor); elsewhere the load compiles whole",
    )


def compile_choice(spec: LoadSpec, on_cpu: bool, cached: bool = False) -> tuple[bool, str]:
    """(eager, why): what the load's options and planned work say, and whether the compile cache holds the load's
    compiled model (`cached`: it then loads in seconds, so a smaller load pays it back). `enforce_eager` in
    engine_args is the user's (and part of the store key); the choice here is not, as batch size is not: it changes
    the speed, not the model."""
    if "enforce_eager" in spec.engine_args:
        return bool(spec.engine_args["enforce_eager"]), "engine_args.enforce_eager"
    o = VLLMOptions.model_validate(spec.engine_options)
    if o.compile != "auto":
        return o.compile == "never", f"compile: {o.compile}"
    if on_cpu and spec.adapter:
        return True, "a LoRA adapter: vLLM's CPU build runs LoRA eager"
    if not on_cpu:
        return False, "compile: auto, on a GPU"
    planned = spec.planned_prompt_tokens
    if planned is None:
        return False, "compile: auto, no planned work given"
    if o.compile_above_tokens is not None:
        above, where = o.compile_above_tokens, "compile_above_tokens"
    elif cached:
        above, where = COMPILE_ABOVE_TOKENS_CACHED, "the compiled model is in the cache"
    else:
        above, where = COMPILE_ABOVE_TOKENS, "the compiled model is not in the cache"
    eager = planned < above
    return eager, f"compile: auto, {planned:,} prompt tokens planned {'<' if eager else '>='} {above:,} ({where})"
