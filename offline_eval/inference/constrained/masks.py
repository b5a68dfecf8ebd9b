"""Token masks from llguidance and outlines-core, for the engines that mask tokens themselves (transformers,
llama.cpp, each applying them in its own masks.py): one vocabulary per load, one compiled grammar per constraint, one
matcher per sequence.

Both read each token's exact bytes (llguidance from the tokenizer or llama.cpp's vocabulary, outlines-core from the
byte table we give it), so a token that holds part of a UTF-8 character is matched as those bytes. JSON is compiled
with no whitespace and "," / ":" separators, as our xgrammar and GBNF grammars are."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from offline_eval.inference.constrained.grammars import guidance_grammar, outlines_regex
from offline_eval.inference.constraints import Constraint
from offline_eval.runtime.errors import EngineError


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
