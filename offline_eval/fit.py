"""The one rule for whether a request fits a context length, used by the runner and by `sweep --dry-run`."""

from __future__ import annotations

from .requests import Request


def tokens_needed(prompt_tokens: int, request: Request, method: str) -> int:
    """The prompt plus what the request may generate (a logprob request scores one next token)."""
    return prompt_tokens + (request.sampling.max_tokens if method == "generate" else 1)


def fits(prompt_tokens: int, request: Request, method: str, max_model_len: int) -> bool:
    return tokens_needed(prompt_tokens, request, method) <= max_model_len
