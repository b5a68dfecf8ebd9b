"""An OpenAI-compatible server's reply, read field by field: a field it lacks or holds in the wrong form is named
in one line (BadReply), and a logprob that is not a number is NaN, which the runner takes for a parse failure."""

from __future__ import annotations

import math
from typing import Any

from offline_eval.inference.backends.openai.client import BadReply


class Reply:
    """A server's reply, read field by field: what it lacks or holds in the wrong form is named in one line."""

    def __init__(self, data: dict[str, Any], base_url: str, path: str) -> None:
        self.data, self.base_url, self.path = data, base_url, path

    def bad(self, what: str, got: Any) -> BadReply:
        import json

        shown = json.dumps(got, ensure_ascii=False, default=str)
        return BadReply(f"the server at {self.base_url} answered {self.path} with a reply that is not an answer: "
                        f"{what} (got {shown[:200]})")  # fmt: skip

    def choice(self) -> dict[str, Any]:
        choices = self.data.get("choices")
        if not isinstance(choices, list):
            raise self.bad("no 'choices' list", self.data)
        if not choices:
            raise self.bad("'choices' is empty", self.data)
        if not isinstance(choices[0], dict):
            raise self.bad("choices[0] is not an object", choices[0])
        return choices[0]

    def tokens(self, key: str) -> int:
        usage = self.data.get("usage")
        if usage is None:
            return 0
        if not isinstance(usage, dict):
            raise self.bad("'usage' is not an object", usage)
        v = usage.get(key)
        if v is None:
            return 0
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0 or v != int(v):
            raise self.bad(f"usage.{key} is not a count of tokens", v)
        return int(v)

    def answer(self, ch: dict[str, Any]) -> tuple[str | None, str | None]:
        """(the answer's text, the thinking a server with a reasoning parser returned apart: vLLM as `reasoning`,
        before 0.10 `reasoning_content`, llama.cpp as `reasoning_content`; None: none)."""
        reasoning = None
        if "message" in ch:
            message = ch["message"]
            if not isinstance(message, dict):
                raise self.bad("choices[0].message is not an object", message)
            text = message.get("content")
            reasoning = message.get("reasoning_content", message.get("reasoning"))
            if reasoning is not None and not isinstance(reasoning, str):
                raise self.bad("the message's reasoning is not a string", reasoning)
        else:
            text = ch.get("text")
        if text is not None and not isinstance(text, str):
            raise self.bad("the answer's text is not a string", text)
        return text, reasoning

    def reasoning_tokens(self) -> int:
        """usage.completion_tokens_details.reasoning_tokens where the server gives it (0: it does not)."""
        details = (self.data.get("usage") or {}).get("completion_tokens_details")
        v = details.get("reasoning_tokens") if isinstance(details, dict) else None
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            return 0
        return v


def number(v: Any) -> float:
    """A logprob as the server sent it; NaN where it is not a number (null, a string, a boolean), which the
    runner then takes for what it is: a parse failure, never an answer."""
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan


def top_alternatives(choice: dict[str, Any]) -> list[tuple[str, float]]:
    """(token text, logprob) for the first generated position: chat logprobs carry the exact bytes (so a
    byte-fallback token and a piece that spell the same label both count); completions give a string map."""
    lp = choice.get("logprobs") or {}
    if not isinstance(lp, dict):
        return []
    content = lp.get("content")
    if isinstance(content, list) and content and isinstance(content[0], dict):
        out = []
        for alt in content[0].get("top_logprobs") or []:
            if not isinstance(alt, dict):
                continue
            raw = alt.get("bytes")
            try:
                text = bytes(raw).decode("utf-8", errors="replace") if raw else str(alt.get("token", ""))
            except (TypeError, ValueError):
                text = str(alt.get("token", ""))
            out.append((text, number(alt.get("logprob"))))
        return out
    tops = lp.get("top_logprobs")
    if isinstance(tops, list) and tops and isinstance(tops[0], dict):
        return [(str(t), number(v)) for t, v in tops[0].items()]
    return []
