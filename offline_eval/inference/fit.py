"""The one rule for whether a request fits a context length, used by the runner and by `sweep --dry-run`."""

from __future__ import annotations

from typing import Literal

from .requests import Request


def tokens_needed(prompt_tokens: int, request: Request, method: str) -> int:
    """The prompt plus what the request may generate (a logprob request scores one next token), plus what a later
    phase will generate after it (a thinking phase reserves its answer's tokens)."""
    return prompt_tokens + (request.sampling.max_tokens if method == "generate" else 1) + request.reserve


def fits(prompt_tokens: int, request: Request, method: str, max_model_len: int) -> bool:
    return tokens_needed(prompt_tokens, request, method) <= max_model_len


Placement = Literal["fits", "fallback", "fail", "overflow"]


def place(
    prompt_tokens: int, request: Request, method: str, max_model_len: int, policy: str, fallback: Request | None
) -> Placement:
    """What happens to a request under the task's overflow policy: it fits; its shorter fallback is tried
    (policy 'focus'; the fallback must fit in turn, else the item overflows); the run stops ('fail'); or the
    item is recorded as an overflow ('skip', or 'focus' without a fallback)."""
    if fits(prompt_tokens, request, method, max_model_len):
        return "fits"
    if policy == "focus" and fallback is not None:
        return "fallback"
    return "fail" if policy == "fail" else "overflow"
