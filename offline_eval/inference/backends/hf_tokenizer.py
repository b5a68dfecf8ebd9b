"""What engines that read HF model folders (vLLM, transformers) share: prompts rendered and encoded through the
folder's tokenizer and chat template, and the dry-run planner's counter, which renders exactly as they do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from offline_eval.inference.backends.base import carried_ids, hf_spelling, hf_vocab_bytes
from offline_eval.inference.backends.chat import (
    adds_special_tokens,
    choose_template,
    hf_encode,
    hf_own_template,
    hf_render,
)
from offline_eval.inference.backends.spec import LoadSpec, PromptCounter
from offline_eval.inference.requests import Request


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


class HFTokenized:
    """An engine's prompt text and token ids through its HF tokenizer and chosen chat template."""

    tokenizer: Any
    chat_template: str | None

    def render(self, r: Request) -> str:
        return hf_render(self.tokenizer, self.chat_template, r)

    def encode_text(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def encode_one(self, r: Request) -> list[int]:
        """One prompt's ids, a part carried from an earlier phase as its own ids."""
        full, s = self.render(r), adds_special_tokens(r, self.chat_template)
        got = carried_ids(full, r, lambda t: list(self.tokenizer.encode(t, add_special_tokens=s)), self.encode_text)
        return got if got is not None else list(self.tokenizer.encode(full, add_special_tokens=s))

    def decode_ids(self, ids: Sequence[int]) -> str:
        """Generated ids as the engine writes their text."""
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))

    def vocab_bytes(self) -> list[bytes]:
        return hf_vocab_bytes(self.tokenizer)

    def spelling(self, want: bytes) -> list[int]:
        """The tokens whose bytes are `want`, looked up by the forms a vocabulary writes them in rather than by
        decoding every token (xgrammar's table of Gemma 3's 262,144 took 4-8 s before the first logprob answer):
        the text itself, SentencePiece's ▁ for a space, a byte-fallback <0xNN>, byte-level BPE's characters
        (tests/test_engines.py: the same ids as the full scan, on the tiny model and Gemma 3)."""
        if "_vocab" not in self.__dict__:
            self._vocab: dict[str, int] = self.tokenizer.get_vocab()
        return hf_spelling(self._vocab, want)

    def special_stop_ids(self, stop: Sequence[str]) -> list[int]:
        """The ids of the stop strings that are one special token (gpt-oss's <|end|>): the text a stop string is
        matched in leaves them out, so the engine stops on the token."""
        out = []
        for x in stop:
            ids = self.encode_text(x)
            if len(ids) == 1 and not self.decode_ids(ids):
                out.append(ids[0])
        return out
