"""How a model decodes, as models.yaml declares it: its sampling, and for a reasoning model its thinking (budget,
delimiters, a named format's preset)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, field_validator, model_validator


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SamplingSpec(Strict):
    """How a model's answers are drawn. The default is greedy, as every task asks, so that runs are reproducible
    and comparable across engines. `seed`: the first sample's (default: the model's `seed`)."""

    temperature: float = Field(0.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: StrictInt = Field(0, ge=0, description="0: off")
    min_p: float = Field(0.0, ge=0, le=1)
    seed: StrictInt | None = None


class ReasoningSpec(Strict):
    """A reasoning model: it thinks (phase 1, up to `budget` tokens, between `open` and `close`), then answers
    under the task's own constraint (phase 2). `think: false`: the template's no-thinking form (template_kwargs,
    e.g. enable_thinking: false), answered in one phase. A list of budgets: one run per budget."""

    think: StrictBool = False
    budget: StrictInt | list[StrictInt] = 1024
    open: str = Field("<think>", min_length=1)
    close: str = Field("</think>", min_length=1)
    stop: str | None = Field(None, min_length=1, description="where the thinking ends (default: close)")
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
