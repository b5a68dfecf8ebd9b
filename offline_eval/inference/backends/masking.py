"""Token masks from llguidance and outlines-core, for the engines that mask tokens themselves (transformers,
llama.cpp): one vocabulary per load, one compiled grammar per constraint, one matcher per sequence.

Both read each token's exact bytes (llguidance from the tokenizer or llama.cpp's vocabulary, outlines-core from the
byte table we give it), so a token that holds part of a UTF-8 character is matched as those bytes. JSON is compiled
with no whitespace and "," / ":" separators, as our xgrammar and GBNF grammars are."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from offline_eval.inference.constraints import Constraint
from offline_eval.runtime.errors import EngineError

from .grammars import guidance_grammar, outlines_regex


class Matcher(Protocol):
    def reset(self) -> None: ...

    def bitmask(self) -> np.ndarray: ...  # int32 words, bit i of the whole: token i is allowed

    def accept(self, token: int) -> None: ...


class Masks:
    """One backend over one vocabulary: `matcher(constraint)` starts a sequence."""

    def __init__(self, backend: str, n_vocab: int, eos: int, token_bytes: Sequence[bytes] | None, special: set[int],
                 lltokenizer: Any = None) -> None:  # fmt: skip
        self.backend, self.n_vocab = backend, n_vocab
        self._compiled: dict[Constraint, Any] = {}
        if backend == "guidance":
            self._tok = lltokenizer
        elif backend == "outlines":
            import outlines_core as oc

            table: dict[bytes, list[int]] = {}
            for i, b in enumerate(token_bytes or ()):
                if b and i != eos and i not in special:
                    table.setdefault(bytes(b), []).append(i)
            self._vocab = oc.Vocabulary(eos, table)
        else:
            raise ValueError(f"no token masks from {backend}")

    def _compile(self, c: Constraint) -> Any:
        if c not in self._compiled:
            try:
                self._compiled[c] = self._guidance(c) if self.backend == "guidance" else self._outlines(c)
            except (ValueError, RuntimeError) as e:
                kind = type(c).__name__
                why = " ".join(str(e).split())  # one line: the libraries' messages span several
                if self.backend == "outlines" and "DFA" in why:  # outlines-core does not say what it could not build
                    why += " (its regular expressions have no look-around and no backreferences)"
                raise EngineError(f"{self.backend} cannot compile this {kind} constraint: {why[:400]}") from None
        return self._compiled[c]

    def _guidance(self, c: Constraint) -> str:
        import llguidance as llg

        grammar = guidance_grammar(c)
        failed, messages = llg.LLMatcher.validate_grammar_with_warnings(grammar, self._tok)
        if failed:
            raise ValueError("; ".join(messages))
        return grammar

    def _outlines(self, c: Constraint) -> Any:
        import outlines_core as oc

        return oc.Index(outlines_regex(c), self._vocab)

    def matcher(self, c: Constraint) -> Matcher:
        compiled = self._compile(c)
        if self.backend == "guidance":
            return _Guidance(self._tok, compiled)
        return _Outlines(compiled, self.n_vocab)


class _Guidance:
    def __init__(self, tokenizer: Any, grammar: str) -> None:
        import llguidance as llg

        self._m = llg.LLMatcher(tokenizer, grammar, log_level=0)

    def reset(self) -> None:
        self._m.reset()

    def bitmask(self) -> np.ndarray:
        return np.frombuffer(self._m.compute_bitmask(), dtype=np.int32)

    def accept(self, token: int) -> None:
        if not self._m.consume_token(token):  # a token its own mask refused: never answer past it
            raise EngineError(f"llguidance refused token {token} that its mask allowed: {self._m.get_error()[:300]}")


class _Outlines:
    def __init__(self, index: Any, n_vocab: int) -> None:
        import outlines_core as oc

        self._g = oc.Guide(index)
        self._words = np.zeros((n_vocab + 31) // 32, dtype=np.int32)

    def reset(self) -> None:
        self._g.reset()

    def bitmask(self) -> np.ndarray:
        self._g.write_mask_into(self._words.ctypes.data, self._words.size, self._words.itemsize)
        return self._words

    def accept(self, token: int) -> None:
        if not self._g.is_finished():  # outlines-core never advances on the EOS its final state allows
            self._g.advance(token)


def allowed(words: np.ndarray, n: int) -> np.ndarray:
    """A bitmask's first `n` bits as booleans."""
    return np.unpackbits(words.view(np.uint8), bitorder="little")[:n].astype(bool)


class HFProcessor:
    """transformers' logits processor: one matcher per row of the batch, advanced by the token each row took."""

    def __init__(self, masks: Masks, c: Constraint, rows: int, eos_ids: set[int]) -> None:
        self._m = [masks.matcher(c) for _ in range(rows)]
        self._n, self._eos = masks.n_vocab, eos_ids
        self._start: int | None = None
        self._done = [False] * rows

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self._start is None:
            self._start = input_ids.shape[1]
        elif input_ids.shape[1] > self._start:
            for row, token in enumerate(input_ids[:, -1].tolist()):
                if not self._done[row]:
                    self._done[row] = token in self._eos
                    if not self._done[row]:
                        self._m[row].accept(int(token))
        keep = torch.zeros(scores.shape, dtype=torch.bool)
        for row, m in enumerate(self._m):
            if self._done[row]:
                keep[row] = True
            else:
                keep[row, : self._n] = torch.from_numpy(allowed(m.bitmask(), self._n))
        return scores.masked_fill(~keep.to(scores.device), float("-inf"))


class MaskCheck:
    """llama.cpp's greedy loop asks its grammar `allows`, `best`, `accept` (llamacpp_greedy.GrammarCheck): the same
    questions answered from a matcher's mask."""

    def __init__(self, matcher: Matcher, n_vocab: int) -> None:
        self._m, self._n = matcher, n_vocab
        self._mask: np.ndarray | None = None
        self._prompt = 0  # the prompt's length, under llama-cpp-python's logits_processor

    def _allowed(self) -> np.ndarray:
        if self._mask is None:
            self._mask = allowed(self._m.bitmask(), self._n)
        return self._mask

    def reset(self) -> None:
        self._m.reset()
        self._mask = None

    def allows(self, token: int) -> bool:
        return bool(self._allowed()[token])

    def best(self, logits: np.ndarray) -> int:
        return int(np.argmax(np.where(self._allowed(), logits[: self._n], -np.inf)))

    def accept(self, token: int) -> None:
        self._m.accept(token)
        self._mask = None

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """llama-cpp-python's logits_processor (sampling): the prompt is set by `start`."""
        if len(input_ids) > self._prompt:
            self.accept(int(input_ids[-1]))
        self._prompt = len(input_ids)
        out = np.full_like(scores, -np.inf)
        keep = self._allowed()
        out[: self._n][keep] = scores[: self._n][keep]
        return out

    def close(self) -> None:
        self._mask = None

    def start(self, prompt_len: int) -> MaskCheck:
        self.reset()
        self._prompt = prompt_len
        return self


def hf_masks(backend: str, tokenizer: Any) -> Masks:
    """Masks over a transformers tokenizer's vocabulary (xgrammar's byte table: the same bytes it matches)."""
    eos = int(tokenizer.eos_token_id)
    if backend == "guidance":
        import llguidance.hf

        tok = llguidance.hf.from_tokenizer(tokenizer)
        return Masks(backend, tok.vocab_size, eos, None, set(), tok)
    import xgrammar as xgr

    info = xgr.TokenizerInfo.from_huggingface(tokenizer)
    table = list(info.decoded_vocab)
    return Masks(backend, len(table), eos, table, set(info.special_token_ids))


def llamacpp_masks(backend: str, llm: Any) -> Masks:
    """Masks over a GGUF's vocabulary, each token's bytes as llama.cpp detokenizes them (control tokens left out)."""
    import llama_cpp

    vocab = llm._model.vocab
    eos = int(llama_cpp.llama_vocab_eos(vocab))
    if backend == "guidance":
        import warnings

        from llguidance.llamacpp import lltokenizer_from_vocab

        with warnings.catch_warnings():  # it asks llama_token_get_attr, deprecated, once per token
            warnings.simplefilter("ignore", DeprecationWarning)
            tok = lltokenizer_from_vocab(vocab)
        return Masks(backend, tok.vocab_size, eos, None, set(), tok)
    n = llm.n_vocab()
    control = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL
    special = {i for i in range(n) if llama_cpp.llama_vocab_get_attr(vocab, i) & control}
    table = [llm.detokenize([i], special=False) for i in range(n)]
    return Masks(backend, n, eos, table, special)
