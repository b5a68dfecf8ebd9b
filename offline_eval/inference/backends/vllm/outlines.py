"""vLLM's outlines backend spells tokens with its own vocabulary table (`_reduced_vocabulary`). In vLLM 0.32 that
table adds a space before every SentencePiece token that begins with one ('▁the' becomes two spaces and 'the'):
137,542 of Gemma 3's 262,144 tokens. outlines then counts characters wrongly and refuses a single space
wherever a pattern needs one. A load is refused while the table disagrees with the tokens' own bytes (xgrammar's
byte table, which our other backends read); a vLLM whose table agrees runs it."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from offline_eval.runtime.errors import EngineError


def misspelled(tokenizer: Any) -> tuple[int, int, str]:
    """(tokens vLLM's outlines table spells with other bytes than the tokenizer's, tokens compared, an example)."""
    import xgrammar as xgr
    from vllm.v1.structured_output.utils import _reduced_vocabulary

    own = xgr.TokenizerInfo.from_huggingface(tokenizer).decoded_vocab
    theirs = {i: b for b, ids in _reduced_vocabulary(tokenizer).items() for i in ids}
    wrong = [i for i, b in theirs.items() if i < len(own) and b != own[i]]
    example = f"token {wrong[0]}: {own[wrong[0]]!r} as {theirs[wrong[0]]!r}" if wrong else ""
    return len(wrong), len(theirs), example


@lru_cache(maxsize=8)
def _misspelled_at(path: str) -> tuple[int, int, str]:
    from transformers import AutoTokenizer

    return misspelled(AutoTokenizer.from_pretrained(path))


def refuse_misspelled(path: str) -> None:
    """Checked once per model folder in a process (Gemma 3's table takes seconds), not once per load."""
    wrong, n, example = _misspelled_at(path)
    if wrong:
        raise EngineError(
            f"vLLM's outlines backend spells {wrong} of this model's {n} tokens with other bytes ({example}: its "
            f"vocabulary table adds a space to SentencePiece tokens), so its matches would be wrong; use "
            f"constraint_backend guidance or xgrammar on vLLM, or outlines on transformers or llama.cpp"
        )
