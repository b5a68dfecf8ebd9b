"""How a model decodes, as models.yaml declares it: its sampling, and for a reasoning model its thinking (budget,
delimiters, a named format's preset)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, field_validator, model_validator
from pydantic_core import PydanticCustomError

# llama.cpp and vLLM take a seed mod 2^32 (4294967296 runs as 0) and llama.cpp reads -1 (0xFFFFFFFF) as "draw a random
# seed": a seed that is stored and reported must be one the engines run as given.
SEED_MAX = 2**32 - 1


def seed_problem(seed: int, samples: int = 1) -> str | None:
    """Why a seed (the first of `samples` draws, seeded seed..seed+samples-1) would not run as given; None: fine."""
    if not 0 <= seed <= SEED_MAX:
        return (
            f"seed {seed} is not a seed the engines run as given: give a whole number from 0 to {SEED_MAX} "
            "(they take a seed mod 2^32, and llama.cpp reads -1 as a random seed)"
        )
    if seed + samples - 1 > SEED_MAX:
        return (
            f"samples: {samples} draws seeds {seed}..{seed + samples - 1}, past the largest seed, {SEED_MAX} "
            f"(the engines take a seed mod 2^32, so a later sample would repeat seed {seed + samples - 1 - 2**32}'s "
            f"answers): give a seed of at most {SEED_MAX - samples + 1}, or fewer samples"
        )
    return None


def checked_seed(seed: int | None) -> int | None:
    """A pydantic field validator's body: the seed, or a one-line error naming the field."""
    if seed is not None and (problem := seed_problem(seed)):
        raise PydanticCustomError("seed", "{problem}", {"problem": problem})
    return seed


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SamplingSpec(Strict):
    """How a model's answers are drawn. The default is greedy, as every task asks, so that runs are reproducible
    and comparable across engines. `seed`: the first sample's (default: the model's `seed`)."""

    temperature: float = Field(0.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: StrictInt = Field(0, ge=0, description="0: off")
    min_p: float = Field(0.0, ge=0, le=1)
    seed: StrictInt | None = Field(None, description=f"0..{SEED_MAX}")

    @field_validator("seed")
    @classmethod
    def _seed(cls, v: int | None) -> int | None:
        return checked_seed(v)


class ReasoningSpec(Strict):
    """A reasoning model: it thinks (phase 1, up to `budget` tokens, between `open` and `close`), then answers
    under the task's own constraint (phase 2). `think: false`: the template's no-thinking form (template_kwargs,
    e.g. enable_thinking: false), answered in one phase. A list of budgets: one run per budget."""

    think: StrictBool = False
    budget: StrictInt | list[StrictInt] = 1024
    open: str = Field("<think>", min_length=1)
    close: str = Field("</think>", min_length=1)
    stop: str | None = Field(None, min_length=1, description="where the thinking ends (default: close)")
    run_out: Literal["force", "no-answer"] | None = Field(
        None,
        description="a thinking the budget ends: force (default) closes it and asks for the answer (budget forcing, "
        "ours); no-answer leaves the item unanswered, scored as no answer (a paper's reasoning protocol)",
    )
    template_kwargs: dict[str, Any] = Field(default_factory=dict)
    preset: Literal["harmony"] | None = Field(None, description="delimiters of a named format (gpt-oss: harmony)")

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("preset") in PRESETS:
            data = {**PRESETS[data["preset"]], **data}
        return data

    @field_validator("budget")
    @classmethod
    def _budgets(cls, v: int | list[int]) -> int | list[int]:
        values = v if isinstance(v, list) else [v]
        if not values or any(x <= 0 for x in values) or len(set(values)) != len(values):
            raise ValueError("thinking budgets must be positive and distinct")
        return v

    @model_validator(mode="after")
    def _harmony_thinks(self) -> ReasoningSpec:
        if self.preset == "harmony" and not self.think:
            raise ValueError("gpt-oss (preset: harmony) always thinks: give think: true, and reasoning_effort: low "
                             "in template_kwargs for the least thinking")  # fmt: skip
        return self

    def budgets(self) -> list[int]:
        return list(self.budget) if isinstance(self.budget, list) else [self.budget]


# gpt-oss: the thinking is the analysis channel's message, which ends at <|end|>; the answer is the final channel's.
PRESETS: dict[str, dict[str, Any]] = {
    "harmony": {
        "think": True,
        "open": "<|channel|>analysis<|message|>",
        "close": "<|end|><|start|>assistant<|channel|>final<|message|>",
        "stop": "<|end|>",
    }
}


def first_seeds(sampling: Any, seed: int, variants: Any) -> list[tuple[str, int]]:
    """(where it is set, the first sample's seed) of a model and of each of its variants that sets its own."""
    own = sampling.seed if isinstance(sampling, SamplingSpec) else None
    out = [("sampling.seed", own) if own is not None else ("seed", seed)]
    for name, v in (variants or {}).items():
        own = (getattr(v, "sampling", None) or {}).get("seed")
        if type(own) is int:
            out.append((f"variants.{name}.sampling.seed", own))
    return out
