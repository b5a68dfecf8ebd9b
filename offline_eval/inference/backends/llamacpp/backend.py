"""llama.cpp through llama-cpp-python: GGUF files, GBNF grammars, one sequence at a time.

llama.cpp keeps the KV cache of the previous prompt and re-evaluates only what differs, so the runner's
prefix-sorted order (shared few-shot exemplars next to each other) is what makes it fast.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np

from offline_eval.inference.backends.base import (
    Progress,
    TokenizingBackend,
    carried_ids,
    check_engine_args,
    faithful_ids,
    finite_logprobs,
    signature_params,
)
from offline_eval.inference.backends.chat import adds_special_tokens, choose_template, render_request
from offline_eval.inference.backends.declare import Declared
from offline_eval.inference.backends.llamacpp.greedy import GrammarCheck, check_finite, greedy
from offline_eval.inference.backends.llamacpp.prefill import PromptCache, last_logits
from offline_eval.inference.backends.spec import LoadSpec, PromptCount, PromptCounter, Reservation
from offline_eval.inference.constrained.grammars import gbnf
from offline_eval.inference.requests import Request, Result
from offline_eval.runtime.errors import EngineError

_RESERVED = {
    "model_path": "path (or a variant's file)",
    "n_ctx": "max_model_len",
    "seed": "seed",
    "n_gpu_layers": "n_gpu_layers",
    "n_threads": "threads",
    "chat_format": "chat_template",
    "lora_path": "a variant's adapter",
    "lora_scale": "a variant's adapter_scale",
}


def physical_cores() -> int:
    """Cores (not hardware threads) this process may run on: llama.cpp generates fastest with one thread per core.
    llama-cpp-python's own default, half the logical CPUs, guesses two threads per core and so leaves half the
    machine idle where there is one (1 of 2 CPUs here: generation 1.4x slower)."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    cores = set()
    for c in cpus:
        topology = f"/sys/devices/system/cpu/cpu{c}/topology/"
        try:
            with open(topology + "physical_package_id") as pkg, open(topology + "core_id") as core:
                cores.add((pkg.read().strip(), core.read().strip()))
        except OSError:
            return max(len(cpus) // 2, 1)
    return max(len(cores), 1)


ENGINE = Declared(
    name="llamacpp",
    backend_class="LlamaCppBackend",
    requires="llama_cpp",
    extra="llamacpp",
    dists=("llama-cpp-python",),
    weights="gguf",
    constraint_backends=("gbnf", "guidance", "outlines"),
    libraries=("llguidance", "outlines-core"),
)


class LlamaCppBackend(TokenizingBackend):
    name = "llamacpp"
    # False: every request goes through create_completion with llama-cpp-python's own prefix reuse and sampler chain
    # (the reference the tests and benchmarks compare with)
    fast_greedy = True
    cached_sequences = 1
    # Flash attention on, as llama.cpp's own tools (llama-cpp-python leaves it off): 1.2x faster on Gemma 3 270M judge
    # prompts. Physical batches of 128 tokens, not 512: a prompt's reused prefix is cut back to a batch boundary
    # (llamacpp_prefill), and on CPUs 128-token batches evaluate as fast as 512-token ones (Gemma: 450 vs 425 tokens/s).
    load_defaults: ClassVar[dict[str, Any]] = {"flash_attn": True, "n_ubatch": 128}

    @classmethod
    def reservation(cls, spec: LoadSpec) -> Reservation:
        return Reservation(cpus=spec.threads or 1, gpus=1 if spec.n_gpu_layers else 0)

    @classmethod
    def prompt_counter(cls, spec: LoadSpec) -> PromptCounter:
        """The GGUF opened vocab-only: its tokenizer and template, no weights."""
        from offline_eval.runtime.quiet import native_stderr_silenced

        with native_stderr_silenced():
            return cls(replace(spec, engine_args={**spec.engine_args, "vocab_only": True}))

    def __init__(self, spec: LoadSpec) -> None:
        super().__init__(spec)
        from llama_cpp import Llama

        kwargs: dict[str, Any] = dict(
            model_path=spec.path,
            n_ctx=spec.max_model_len,
            seed=spec.seed,
            n_gpu_layers=spec.n_gpu_layers or 0,
            verbose=False,
            n_batch=min(512, spec.max_model_len),
        )
        kwargs["n_threads"] = spec.threads or physical_cores()
        if spec.adapter:
            kwargs.update(lora_path=spec.adapter, lora_scale=spec.adapter_scale)
        check_engine_args(spec, signature_params(Llama.__init__), _RESERVED)
        kwargs.update(self.load_defaults)
        kwargs.update(spec.engine_args)
        self.llm = Llama(**kwargs)
        self.prompt_count = self._count = PromptCount()
        self._evaluated: list[int] = []  # tokens per eval() call: a completion's first call is its prompt suffix
        evaluate = self.llm.eval

        def counting_eval(tokens: Sequence[int]) -> None:
            self._evaluated.append(len(tokens))
            evaluate(tokens)

        setattr(self.llm, "eval", counting_eval)  # noqa: B010 - an instance attribute shadows the method
        self._cache = PromptCache(self.llm)
        self._head: tuple[Any, list[int], int] | None = None  # the last shared head: key, tokens, tokens it fixes
        meta = self.llm.metadata
        # None: the plain prompt format (chat_template none, or auto on a GGUF without a template)
        self.chat_template = choose_template(spec.chat_template, meta.get("tokenizer.chat_template"))
        self._bos = self._piece(self.llm.token_bos())
        self._eos = self._piece(self.llm.token_eos())
        self._grammars: dict[str, Any] = {}
        self._checks: dict[Any, Any] = {}  # GBNF text (or, masked by another library, the constraint) -> its check
        self._masks: Any = None  # llguidance's or outlines-core's, where the model names one

    def _piece(self, tid: int) -> str:
        return self.llm.detokenize([tid], special=True).decode("utf-8", errors="replace") if tid >= 0 else ""

    def render(self, r: Request) -> str:
        return render_request(r, self.chat_template, self._bos, self._eos)

    def encode_text(self, text: str, add_bos: bool = False) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)

    def encode(self, requests: Sequence[Request]) -> list[list[int]]:
        # add_bos adds BOS only where the GGUF's tokenizer.ggml.add_bos_token asks for it.
        out = []
        for r in requests:
            full, bos = self.render(r), adds_special_tokens(r, self.chat_template)

            def head(text: str, bos: bool = bos) -> list[int]:
                return self.encode_text(text, add_bos=bos)

            got = carried_ids(full, r, head, self.encode_text)
            out.append(got if got is not None else head(full))
        return out

    def _span(self, r: Request, ids: Sequence[int]) -> tuple[int, int] | None:
        """Where the carried generated tokens sit in the prompt's ids (None: it carries none)."""
        c = r.carried
        if c is None:
            return None
        full = self.render(r)
        start = len(full) - len(r.prefill or "") + c.at
        n = len(self.encode_text(full[:start], add_bos=adds_special_tokens(r, self.chat_template)))
        return (n, n + len(c.ids)) if list(ids[n : n + len(c.ids)]) == list(c.ids) else None

    def _decode(self, ids: Sequence[int]) -> str:
        return self.llm.detokenize(list(ids)).decode("utf-8", errors="ignore")

    def _grammar(self, r: Request) -> Any:
        if r.constraint is None:
            return None
        from llama_cpp import LlamaGrammar

        text = gbnf(r.constraint)
        if text not in self._grammars:
            self._check_grammar(text, r)
            self._grammars[text] = LlamaGrammar.from_string(text, verbose=False)
        return self._grammars[text]

    def _mask_check(self, r: Request) -> Any:
        from offline_eval.inference.backends.llamacpp.masks import MaskCheck, llamacpp_masks

        if self._masks is None:
            self._masks = llamacpp_masks(str(self.spec.constraint_backend), self.llm)
        if r.constraint not in self._checks:
            self._checks[r.constraint] = MaskCheck(self._masks.matcher(r.constraint), self._masks.n_vocab)
        return self._checks[r.constraint]

    def _grammar_check(self, r: Request) -> Any:
        if r.constraint is None:
            return None
        if self.spec.constraint_backend is not None:
            return self._mask_check(r)
        text = gbnf(r.constraint)
        if text not in self._checks:
            self._check_grammar(text, r)
            self._checks[text] = GrammarCheck(self.llm, text)
        return self._checks[text]

    def _check_grammar(self, text: str, r: Request) -> None:
        """Parse the grammar with llama.cpp's own parser first: llama-cpp-python would put the NULL sampler
        that a refused grammar gives into its chain, and the process would die with SIGSEGV."""
        import llama_cpp

        from offline_eval.runtime.quiet import native_stderr_silenced

        with native_stderr_silenced():
            sampler = llama_cpp.llama_sampler_init_grammar(self.llm._model.vocab, text.encode("utf-8"), b"root")
        if not sampler:
            kind = type(r.constraint).__name__
            raise EngineError(
                f"llama.cpp refused the grammar for a {kind} constraint ({len(text)} characters of "
                f"GBNF); run with --debug to see llama.cpp's parse error"
            )
        llama_cpp.llama_sampler_free(sampler)

    def generate(
        self, requests: Sequence[Request], encoded: Sequence[list[int]] | None = None, progress: Progress = None
    ) -> list[Result]:
        encoded = encoded if encoded is not None else self.encode(requests)
        out = []
        for r, ids in zip(requests, encoded):
            s = r.sampling
            t0 = time.perf_counter()
            self._evaluated.clear()
            made: list[int] | None = None  # the generated ids, where this engine has them (greedy)
            if self.fast_greedy and ids:
                computed = self._cache.prefill(ids, self._split_token(r, ids), self._span(r, ids))
                if s.temperature == 0:
                    text, finish, made = greedy(self.llm, ids, s.max_tokens, self._grammar_check(r), s.stop)
                    n_out = len(made)
                    self._cache.extend(made[: self.llm.n_tokens - len(ids)])  # those it evaluated
                else:  # the whole prompt is in the cache now: create_completion samples from its logits
                    text, finish, n_out = self._complete(ids, r)
            else:
                self._cache.forget()  # llama-cpp-python's own reuse batches the cache differently
                text, finish, n_out = self._complete(ids, r)
                # llama-cpp-python re-evaluates only what follows the prefix shared with the previous prompt
                computed = self._evaluated[0] if self._evaluated else len(ids)
            t1 = time.perf_counter()
            self._count.add(len(ids), computed)
            out.append(
                Result(
                    text=text,
                    finish_reason=finish,
                    prompt_tokens=len(ids),
                    output_tokens=n_out,
                    latency_s=round(t1 - t0, 6),
                    token_ids=faithful_ids(made, text, self._decode, s.stop, finish == "stop")
                    if r.carry and made is not None
                    else None,
                )
            )
            if progress:
                progress(1)
        return out

    def _constrained(self, r: Request, prompt_len: int) -> dict[str, Any]:
        """The sampler's constraint, after a processor that fails the call on NaN or +inf logits."""
        from llama_cpp import LogitsProcessorList

        finite = [lambda _ids, scores: check_finite(scores)]
        if r.constraint is not None and self.spec.constraint_backend is not None:
            return {"logits_processor": LogitsProcessorList([*finite, self._mask_check(r).start(prompt_len)])}
        return {"grammar": self._grammar(r), "logits_processor": LogitsProcessorList(finite)}

    def _complete(self, ids: Sequence[int], r: Request) -> tuple[str, str, int]:
        s = r.sampling
        resp = self.llm.create_completion(
            prompt=list(ids),
            max_tokens=s.max_tokens,
            temperature=s.temperature,
            top_p=s.top_p,
            top_k=s.top_k,
            min_p=s.min_p,
            seed=s.seed,
            stop=list(s.stop) or None,
            **self._constrained(r, len(ids)),
        )
        ch, usage = resp["choices"][0], resp["usage"]  # type: ignore[index]
        return ch["text"], ch.get("finish_reason") or "stop", usage["completion_tokens"]

    def choice_logprobs(
        self,
        requests: Sequence[Request],
        choices: Sequence[str],
        encoded: Sequence[list[int]] | None = None,
        progress: Progress = None,
    ) -> list[Result]:
        encoded = encoded if encoded is not None else self.encode(requests)
        groups = self.label_token_ids(requests[0], choices)
        out = []
        for r, ids_prompt in zip(requests, encoded):
            t0 = time.perf_counter()
            self._count.add(len(ids_prompt), self._cache.prefill(ids_prompt, self._split_token(r, ids_prompt)))
            logits = last_logits(self.llm).copy()
            lse = float(np.logaddexp.reduce(logits.astype(np.float64)))
            scores = {
                c: float(np.logaddexp.reduce(logits[g].astype(np.float64))) - lse for c, g in zip(choices, groups)
            }
            finite_logprobs(self.name, scores.values())
            out.append(
                Result(
                    text=max(choices, key=lambda c: scores[c]),
                    prompt_tokens=len(ids_prompt),
                    latency_s=round(time.perf_counter() - t0, 6),
                    logprobs=scores,
                )
            )
            if progress:
                progress(1)
        return out

    def vocab_bytes(self) -> list[bytes]:
        import ctypes

        import llama_cpp

        vocab = self.llm._model.vocab
        buf = ctypes.create_string_buffer(256)
        out = []
        for tid in range(self.llm.n_vocab()):
            n = llama_cpp.llama_token_to_piece(vocab, tid, buf, len(buf), 0, False)
            out.append(buf.raw[:n] if n > 0 else b"")
        return out

    def _split_token(self, r: Request, ids: Sequence[int]) -> int:
        """The token where the part of `r` that differs from its neighbours begins (0: not said): where the shared
        text's tokens end whatever follows it (two different characters tried after it), and not past where `ids`
        itself still agrees (a response whose first character merges with the last shared token). Sorted
        neighbours share their head, so the last head's tokens are kept."""
        head = r.shared_head()
        if head is None:
            return 0
        key = (head.messages, head.prompt)
        if self._head is None or self._head[0] != key:
            try:
                a, b = self.encode([r.shared_head("\x00"), r.shared_head("\x01")])  # type: ignore[list-item]
                self._head = (key, a, self.llm.longest_token_prefix(a, b))
            except Exception:  # a chat template that refuses the cut message: the hint only saves time
                self._head = (key, [], 0)
        _, a, shared = self._head
        return min(shared, self.llm.longest_token_prefix(a, ids))

    def close(self) -> None:
        for check in getattr(self, "_checks", {}).values():
            check.close()
        llm = getattr(self, "llm", None)
        if llm is not None:
            llm.close()
            del self.llm
