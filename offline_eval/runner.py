"""Runs a task phase on a backend: dedupe against the store, check length, sort for prefix reuse,
send the misses in as few engine calls as memory allows, and store each chunk as it returns."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from .backends.base import Backend, LazyBackend
from .errors import InputError
from .requests import Phase, Result, request_json, request_key
from .store import Store


@dataclass
class PhaseStats:
    n_requests: int = 0
    n_cached: int = 0
    n_generated: int = 0
    n_overflow: int = 0
    wall_s: float = 0.0
    prompt_tokens: int = 0
    output_tokens: int = 0
    engine_calls: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def throughput(self) -> dict[str, float]:
        tokens = self.prompt_tokens + self.output_tokens
        return {"items_per_s": round(self.n_requests / self.wall_s, 3) if self.wall_s > 0 else 0.0,
                "tokens_per_s": round(tokens / self.wall_s, 1) if self.wall_s > 0 else 0.0,
                "prompt_tokens": self.prompt_tokens, "output_tokens": self.output_tokens,
                "wall_s": round(self.wall_s, 3), "generated": self.n_generated, "cached": self.n_cached}


class Runner:
    def __init__(self, engine: Backend | LazyBackend, store: Store, variant: str, chunk_size: int = 512,
                 fresh: bool = False, progress: bool | None = None) -> None:
        self.fingerprint = engine.fingerprint
        self._get = engine.get if isinstance(engine, LazyBackend) else (lambda: engine)
        self.store, self.variant = store, variant
        self.chunk_size, self.fresh, self.progress = chunk_size, fresh, progress

    def run(self, phase: Phase) -> tuple[list[Result], PhaseStats]:
        t0 = time.perf_counter()
        fp = self.fingerprint
        rjson = [request_json(r) for r in phase.requests]
        keys = [request_key(fp, self.variant, rj, phase.method, phase.choices) for rj in rjson]
        first: dict[str, int] = {}
        for i, k in enumerate(keys):
            first.setdefault(k, i)
        done: dict[str, Result] = {} if self.fresh else self.store.get_many(list(first))
        stats = PhaseStats(n_requests=len(keys), n_cached=sum(1 for k in keys if k in done))
        misses = [k for k in first if k not in done]

        if misses:
            reqs = [phase.requests[first[k]] for k in misses]
            backend = self._get()
            encoded = backend.encode(reqs)
            limit = backend.max_model_len
            todo = []
            for k, r, ids in zip(misses, reqs, encoded):
                need = len(ids) + (r.sampling.max_tokens if phase.method == "generate" else 1)
                if need <= limit:
                    todo.append((k, r, ids))
                    continue
                if phase.overflow == "fail":
                    raise InputError(f"prompt of {len(ids)} tokens + {need - len(ids)} to generate exceeds "
                                     f"max_model_len {limit} (overflow policy 'fail'; use 'skip' to record and "
                                     f"go on)", record=phase.item_ids[first[k]])
                done[k] = Result(text="", finish_reason="overflow", prompt_tokens=len(ids))
            # Neighbours that share a prefix (few-shot exemplars, the system prompt) reuse the KV cache.
            todo.sort(key=lambda t: t[2])
            bar = tqdm(total=len(todo), desc=phase.name, unit="req", disable=True if self.progress is False else None,
                       mininterval=1.0, dynamic_ncols=True, leave=False)
            try:
                for c in range(0, len(todo), self.chunk_size):
                    chunk = todo[c:c + self.chunk_size]
                    rs = [t[1] for t in chunk]
                    ids = [t[2] for t in chunk]
                    if phase.method == "generate":
                        results = backend.generate(rs, ids, progress=bar.update)
                    else:
                        results = backend.choice_logprobs(rs, phase.choices or (), ids, progress=bar.update)
                    stats.engine_calls += 1
                    self.store.put_many((k, fp, self.variant, rjson[first[k]], res)
                                        for (k, _, _), res in zip(chunk, results))
                    for (k, _, _), res in zip(chunk, results):
                        done[k] = res
                    stats.n_generated += len(chunk)
            finally:
                bar.close()

        results = [done[k] for k in keys]
        stats.n_overflow = sum(1 for r in results if r.finish_reason == "overflow")
        stats.prompt_tokens = sum(r.prompt_tokens for r in results)
        stats.output_tokens = sum(r.output_tokens for r in results)
        stats.wall_s = time.perf_counter() - t0
        return results, stats
