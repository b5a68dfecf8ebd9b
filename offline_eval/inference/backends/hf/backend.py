"""transformers: batched, left-padded greedy generation; constraints through an xgrammar logits processor."""

from __future__ import annotations

import importlib.util
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from offline_eval.inference.backends.base import (
    NonFiniteLogits,
    Progress,
    TokenizingBackend,
    check_engine_args,
    faithful_ids,
    finite_logprobs,
)
from offline_eval.inference.backends.chat import choose_template, hf_encode, hf_own_template
from offline_eval.inference.backends.declare import Declared
from offline_eval.inference.backends.hf.peft import with_peft
from offline_eval.inference.backends.hf_tokenizer import CountsWithHFTokenizer, HFTokenized
from offline_eval.inference.backends.spec import LoadSpec, PromptCount
from offline_eval.inference.constrained.grammars import xgrammar_ebnf
from offline_eval.inference.requests import Request, Result
from offline_eval.modelfiles.quantization import checked
from offline_eval.runtime.errors import InputError

_DTYPES = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "float32": "float32",
    "fp32": "float32",
    "auto": "auto",
}


# from_pretrained passes unknown keywords on to the model config, so only the clashes can be caught here.
_RESERVED = {
    "pretrained_model_name_or_path": "path (or a variant's file)",
    "trust_remote_code": "trust_remote_code",
    "dtype": "a variant's dtype",
    "torch_dtype": "a variant's dtype",
    "quantization_config": "a variant's quantization",
}


ENGINE = Declared(
    name="transformers",
    backend_class="HFBackend",
    requires="transformers",
    extra="hf",
    dists=("transformers",),
    weights="hf",
    constraint_backends=("xgrammar", "guidance", "outlines"),
    libraries=("torch", "peft", "xgrammar", "llguidance", "outlines-core", "compressed-tensors"),
)


class HFBackend(HFTokenized, CountsWithHFTokenizer, TokenizingBackend):
    name = "transformers"

    batches_by_length = True

    def __init__(self, spec: LoadSpec) -> None:
        super().__init__(spec)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.manual_seed(spec.seed)
        if spec.threads:
            torch.set_num_threads(spec.threads)
        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(spec.path, trust_remote_code=spec.trust_remote_code)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        kwargs: dict[str, Any] = {"trust_remote_code": spec.trust_remote_code, "use_safetensors": True}
        dtype = _DTYPES.get((spec.dtype or "auto").lower())
        if dtype is None:
            raise InputError(f"unknown dtype '{spec.dtype}', expected one of {', '.join(_DTYPES)}", field="dtype")
        kwargs["dtype"] = dtype if dtype == "auto" else getattr(torch, dtype)
        folder_q = checked(spec.path, spec.quantization)  # a quantized folder: its own config.json says how
        if spec.quantization and folder_q is None:
            kwargs["quantization_config"] = _quantization_config(spec.quantization)
        if folder_q is not None and folder_q.method in _NEEDS:
            module, dist = _NEEDS[folder_q.method]
            if importlib.util.find_spec(module) is None:
                raise InputError(
                    f"transformers loads {folder_q.label} folders through {dist}, which is not installed here; "
                    "run the folder on vLLM",
                    file=str(Path(spec.path) / "config.json"),
                    field="quantization_config.quant_method",
                )
        check_engine_args(spec, None, _RESERVED)
        kwargs.update(spec.engine_args)
        self.model = AutoModelForCausalLM.from_pretrained(spec.path, **kwargs).eval()
        if spec.adapter:
            self.model = with_peft(self.model, spec.adapter, spec.adapter_scale)
        self.chat_template = choose_template(spec.chat_template, hf_own_template(self.tokenizer))  # None: plain
        self._compiler: Any = None
        self._masks: Any = None  # llguidance's or outlines-core's, where the model names one
        self._grammars: dict[Any, Any] = {}  # constraint -> its compiled grammar (a phase's batches share one)
        self.prompt_count = self._count = PromptCount()  # no cache across calls: every prompt token is computed

    def encode(self, requests: Sequence[Request]) -> list[list[int]]:
        if any(r.carried is not None for r in requests):
            return [self.encode_one(r) for r in requests]
        return hf_encode(self.tokenizer, self.chat_template, requests)

    def _batches(self, requests: Sequence[Request], encoded: Sequence[list[int]]):
        """Batches of one sampling + constraint each, so one logits processor serves the whole batch."""
        groups: dict[Any, list[int]] = defaultdict(list)
        for i, r in enumerate(requests):
            groups[(r.sampling, r.constraint)].append(i)
        bs = max(1, self.spec.batch_size)
        for (sampling, constraint), idx in groups.items():
            for k in range(0, len(idx), bs):
                yield sampling, constraint, idx[k : k + bs]

    def _pad(self, seqs: list[list[int]]) -> tuple[Any, Any]:
        width = max(len(s) for s in seqs)
        pad = self.tokenizer.pad_token_id
        ids = self.torch.tensor([[pad] * (width - len(s)) + s for s in seqs])
        mask = self.torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in seqs])
        return ids, mask

    def _eos_ids(self) -> set[int]:
        eos = self.model.generation_config.eos_token_id
        return set(eos if isinstance(eos, list) else [eos]) | {self.tokenizer.eos_token_id}

    @classmethod
    def load_quantization_problem(cls, quantization: str) -> str | None:
        if quantization in ("int8", "int4"):
            return None
        return f"quantization '{quantization}': transformers quantizes unquantized weights as int8 or int4 (torchao)"

    def _finite(self, input_ids: Any, scores: Any) -> Any:
        """The first logits processor: NaN or +inf logits fail the call (a grammar would make noise parse)."""
        if bool(self.torch.isnan(scores).any()) or bool(self.torch.isposinf(scores).any()):
            raise NonFiniteLogits(self.name)
        return scores

    def _processor(self, constraint: Any, n: int) -> list[Any]:
        if constraint is None:
            return []
        if (backend := self.spec.constraint_backend) is not None:
            from offline_eval.inference.backends.hf.masks import HFProcessor, hf_masks

            if self._masks is None:
                self._masks = hf_masks(backend, self.tokenizer)
            return [HFProcessor(self._masks, constraint, n, self._eos_ids())]
        import xgrammar as xgr
        from xgrammar.contrib.hf import LogitsProcessor

        if self._compiler is None:
            info = xgr.TokenizerInfo.from_huggingface(self.tokenizer, vocab_size=self.model.config.vocab_size)
            self._compiler = xgr.GrammarCompiler(info)
        if constraint not in self._grammars:
            self._grammars[constraint] = self._compiler.compile_grammar(xgrammar_ebnf(constraint))
        return [LogitsProcessor([self._grammars[constraint]] * n)]

    def generate(
        self, requests: Sequence[Request], encoded: Sequence[list[int]] | None = None, progress: Progress = None
    ) -> list[Result]:
        from transformers import LogitsProcessorList

        encoded = encoded if encoded is not None else self.encode(requests)
        out: list[Result | None] = [None] * len(requests)
        eos_ids = self._eos_ids()
        for s, constraint, idx in self._batches(requests, encoded):
            ids, mask = self._pad([list(encoded[i]) for i in idx])
            n = sum(len(encoded[i]) for i in idx)
            self._count.add(n, n)
            t0 = time.perf_counter()
            kw: dict[str, Any] = dict(
                max_new_tokens=s.max_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
                eos_token_id=list(eos_ids),
                logits_processor=LogitsProcessorList([self._finite, *self._processor(constraint, len(idx))]),
            )
            if s.stop:
                kw.update(stop_strings=list(s.stop), tokenizer=self.tokenizer)
            if s.temperature > 0:
                self.torch.manual_seed(s.seed)
                kw.update(do_sample=True, temperature=s.temperature, top_p=s.top_p)
                kw.update({k: v for k, v in (("top_k", s.top_k), ("min_p", s.min_p)) if v})
            else:
                kw.update(do_sample=False, temperature=None, top_p=None, top_k=None)
            with self.torch.inference_mode():
                gen = self.model.generate(input_ids=ids, attention_mask=mask, **kw)
            per = (time.perf_counter() - t0) / len(idx)
            for row, i in enumerate(idx):
                new = gen[row, ids.shape[1] :].tolist()
                n_out = next((k + 1 for k, t in enumerate(new) if t in eos_ids), None)
                finish = "stop" if n_out is not None else "length"
                toks = new[: n_out - 1] if n_out is not None else new
                text, n_tokens = str(self.tokenizer.decode(toks, skip_special_tokens=True)), n_out or len(new)
                if s.stop and (cut := self._stopped(toks, s.stop)) is not None:
                    (text, n_tokens), finish = cut, "stop"
                    toks = toks[:n_tokens]  # what a finished row's batch-mates went on to make is not its own
                out[i] = Result(
                    text=text,
                    finish_reason=finish,
                    prompt_tokens=len(encoded[i]),
                    output_tokens=n_tokens,
                    latency_s=round(per, 6),
                    token_ids=faithful_ids(toks, text, self.decode_ids, requests[i].sampling.stop, finish == "stop")
                    if requests[i].carry
                    else None,
                )
            if progress:
                progress(len(idx))
        return [r for r in out if r is not None]

    def _stopped(self, tokens: list[int], stop: Sequence[str]) -> tuple[str, int] | None:
        """(the text before the first stop string, the tokens generated up to the one that completed it), or None
        where no stop string was generated. Containment only grows with the prefix: a binary search finds it."""

        def first(k: int) -> int | None:
            text = str(self.tokenizer.decode(tokens[:k], skip_special_tokens=False))
            at = [j for j in (text.find(x) for x in stop if x) if j >= 0]
            return min(at) if at else None

        if first(len(tokens)) is None:
            return None
        lo, hi = 1, len(tokens)
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if first(mid) is not None else (mid + 1, hi)
        # The tokens before the one that completed the stop, decoded as answers are: never encoded again. A stop
        # spelled by several tokens leaves its start at the end of that text; it is cut off.
        text = str(self.tokenizer.decode(tokens[: lo - 1], skip_special_tokens=True))
        part = max((n for x in stop for n in range(1, len(x)) if text.endswith(x[:n])), default=0)
        return text[: len(text) - part], lo

    def choice_logprobs(
        self,
        requests: Sequence[Request],
        choices: Sequence[str],
        encoded: Sequence[list[int]] | None = None,
        progress: Progress = None,
    ) -> list[Result]:
        encoded = encoded if encoded is not None else self.encode(requests)
        groups = self.label_token_ids(requests[0], choices)
        out: list[Result] = []
        bs = max(1, self.spec.batch_size)
        for k in range(0, len(encoded), bs):
            chunk = [list(e) for e in encoded[k : k + bs]]
            ids, mask = self._pad(chunk)
            n = sum(len(e) for e in chunk)
            self._count.add(n, n)
            t0 = time.perf_counter()
            with self.torch.inference_mode():
                logits = self.model(input_ids=ids, attention_mask=mask).logits[:, -1, :].float()
            lp = self.torch.log_softmax(logits, dim=-1)
            per = (time.perf_counter() - t0) / len(chunk)
            for row, e in enumerate(chunk):
                scores = {c: float(self.torch.logsumexp(lp[row, g], dim=0)) for c, g in zip(choices, groups)}
                finite_logprobs(self.name, scores.values())
                out.append(
                    Result(
                        text=max(choices, key=lambda c: scores[c]),
                        prompt_tokens=len(e),
                        latency_s=round(per, 6),
                        logprobs=scores,
                    )
                )
            if progress:
                progress(len(chunk))
        return out

    def close(self) -> None:
        self.model = None


# Quantized folders transformers reads only through another library (compressed-tensors comes with vLLM).
_NEEDS = {"gptq": ("optimum", "optimum and gptqmodel"), "awq": ("gptqmodel", "gptqmodel")}


def _quantization_config(name: str) -> Any:
    """int8 / int4 weight-only quantization that runs on CPU as well as GPU (torchao)."""
    from transformers import TorchAoConfig

    try:
        from torchao.quantization import Int8WeightOnlyConfig, IntxWeightOnlyConfig, PerGroup
    except ImportError as e:
        raise InputError("quantization needs torchao: pip install torchao", field="quantization") from e
    import torch

    if name == "int8":
        return TorchAoConfig(quant_type=Int8WeightOnlyConfig())
    if name == "int4":
        return TorchAoConfig(
            quant_type=IntxWeightOnlyConfig(
                weight_dtype=torch.int4,  # type: ignore[attr-defined]
                granularity=PerGroup(32),
            )
        )
    raise InputError(f"unknown quantization '{name}' for transformers, expected int8 or int4", field="quantization")
