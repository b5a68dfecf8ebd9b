"""An HF tokenizer folder's prompt ids without an engine: the dry-run planner's counter for engines that read
HF folders (vLLM, transformers), rendered exactly as they render."""

from __future__ import annotations

from collections.abc import Sequence

from ..requests import Request
from .chat import choose_template, hf_encode, hf_own_template
from .spec import LoadSpec, PromptCounter


class HFPromptCounter:
    def __init__(self, spec: LoadSpec) -> None:
        from transformers import AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(spec.path, trust_remote_code=spec.trust_remote_code)
        self.template = choose_template(spec.chat_template, hf_own_template(self.tok))

    def encode(self, requests: Sequence[Request]) -> list[list[int]]:
        return hf_encode(self.tok, self.template, requests)

    def close(self) -> None:
        pass


class CountsWithHFTokenizer:
    """For engines that read HF model folders: the dry-run planner counts prompts with the folder's tokenizer."""

    @classmethod
    def prompt_counter(cls, spec: LoadSpec) -> PromptCounter:
        return HFPromptCounter(spec)
