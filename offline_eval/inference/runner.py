"""Runs a task phase on a backend: dedupe against the store, check length, sort for prefix reuse,
send the misses in as few engine calls as memory allows, and store each chunk as it returns."""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from offline_eval.inference.backends.base import Backend, TokenizingBackend
from offline_eval.inference.backends.lazy import LazyBackend
from offline_eval.inference.backends.registry import get_engine, spec_fingerprint
from offline_eval.inference.constrained.grammars import keyed_before_digests
from offline_eval.inference.constrained.libraries import resolved
from offline_eval.runtime.enginelog import terminal
from offline_eval.runtime.errors import EngineError, InputError, OfflineEvalError, PartialFailure, described

from .constraints import Constraint, violation
from .fit import fits, place, tokens_needed
from .requests import Phase, Request, Result, legacy_request_key, request_json, request_key
from .store import Row, Store


@contextmanager
def engine_errors(phase: str) -> Iterator[None]:
    """An exception from inside an engine fails this run in one line; the sweep goes on with the next."""
    try:
        yield
    except (OfflineEvalError, MemoryError):
        raise
    except Exception as e:  # noqa: BLE001 - engines raise anything (numpy, CUDA, ValueError); keep it one line
        raise EngineError(f"the engine failed in {phase}: {described(e, 300)}") from e


@dataclass
class PhaseStats:
    n_requests: int = 0
    n_cached: int = 0
    n_generated: int = 0
    n_overflow: int = 0
    n_violations: int = 0  # answers that broke their constraint: parse failures, never accepted
    wall_s: float = 0.0  # the phase itself: an engine start it triggered is in load_s, not here
    load_s: float = 0.0
    prompt_tokens: int = 0
    output_tokens: int = 0
    engine_calls: int = 0
    # Prompt tokens handed to the engine and those it computed (the rest its prefix cache served); None: the
    # engine cannot say, or nothing ran.
    prompt_submitted: int | None = None
    prompt_computed: int | None = None
    # A reasoning model's: the items that thought, their thinking tokens, and those the budget cut off.
    n_thought: int = 0
    thinking_tokens: int = 0
    n_thinking_cut: int = 0
    # The answer phase's prompt tokens submitted and computed (None: no answer phase ran, or the engine cannot say)
    answer_submitted: int | None = None
    answer_computed: int | None = None

    def prefix_reuse(self) -> dict[str, Any] | None:
        if self.prompt_submitted is None or self.prompt_computed is None:
            return None
        ratio = self.prompt_submitted / self.prompt_computed if self.prompt_computed else None
        return {
            "submitted": self.prompt_submitted,
            "computed": self.prompt_computed,
            "ratio": round(ratio, 2) if ratio is not None else None,
        }

    def throughput(self) -> dict[str, Any]:
        tokens = self.prompt_tokens + self.output_tokens
        return {
            "items_per_s": round(self.n_requests / self.wall_s, 3) if self.wall_s > 0 else 0.0,
            "tokens_per_s": round(tokens / self.wall_s, 1) if self.wall_s > 0 else 0.0,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "wall_s": round(self.wall_s, 3),
            "load_s": round(self.load_s, 3),
            "generated": self.n_generated,
            "cached": self.n_cached,
            **({"prefix_reuse": r} if (r := self.prefix_reuse()) else {}),
            **({"reasoning": self.reasoning()} if self.n_thought else {}),
        }

    def reasoning(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "items": self.n_thought,
            "thinking_tokens": self.thinking_tokens,
            "thinking_tokens_per_item": round(self.thinking_tokens / self.n_thought, 1),
            "cut_by_budget": self.n_thinking_cut,
        }
        if self.answer_submitted and self.answer_computed is not None:
            out["answer_prompt_computed"] = round(self.answer_computed / self.answer_submitted, 3)
        return out


@dataclass(frozen=True)
class Work:
    """A request the engine must answer: its key, its token ids where counted (None: the engine counts), and
    `primaries`: the keys of the requests it stands in for as their fallback (overflow policy 'focus')."""

    key: str
    request: Request
    ids: list[int] | None
    request_json: str
    primaries: tuple[str, ...] = ()


class Runner:
    def __init__(
        self,
        engine: Backend | LazyBackend,
        store: Store,
        variant: str,
        chunk_size: int = 512,
        fresh: bool = False,
        progress: bool | None = None,
    ) -> None:
        self.fingerprint = engine.fingerprint if isinstance(engine, LazyBackend) else spec_fingerprint(engine.spec)
        self._engine = engine
        self._get = engine.get if isinstance(engine, LazyBackend) else (lambda: engine)
        self.store, self.variant = store, variant
        self.chunk_size, self.fresh, self.progress = chunk_size, fresh, progress
        self._grammars: dict[Constraint, str | None] = {}

    def _declared(self, name: str, default: Any) -> Any:
        """What the engine's class declares (nothing is loaded; an engine on a Ray worker is read by its name)."""
        e = self._engine
        cls = get_engine(e.spec.backend).declared_class() if isinstance(e, LazyBackend) else type(e)
        return getattr(cls, name, default)

    @property
    def library(self) -> str | None:
        """The constraint library the engine runs (`auto` resolved; None: a server chooses)."""
        spec = self._engine.spec
        return resolved(get_engine(spec.backend).constraint_backends, spec.constraint_backend)

    def grammar(self, c: Constraint | None) -> str | None:
        """sha256 of the text the engine's library compiles `c` from (None: unconstrained, or none of ours)."""
        if c is None:
            return None
        if c not in self._grammars:
            text_of = self._declared("constraint_text", None)
            try:
                text = text_of(c, self.library) if text_of else None
            except Exception as e:  # noqa: BLE001 - the engine says why in one line when it is asked to compile it
                text = f"not compiled here: {type(e).__name__}: {e}"
            self._grammars[c] = None if text is None else hashlib.sha256(text.encode()).hexdigest()
        return self._grammars[c]

    def key(self, request: Request, rj: str, phase: Phase) -> str:
        return request_key(self.fingerprint, rj, phase.method, phase.choices, self.grammar(request.constraint))

    def _older_keys(self, request: Request, rj: str, phase: Phase) -> list[str]:
        """Where an older store holds this request's output: without the grammar's digest (before 2026-12-07, where
        the text compiled then is today's) and with the variant's name (before 2026-12-05)."""
        grammar = self.grammar(request.constraint)
        if grammar is not None and not keyed_before_digests(request.constraint, self.library):  # type: ignore[arg-type]
            return []
        older = [request_key(self.fingerprint, rj, phase.method, phase.choices)] if grammar is not None else []
        return [*older, legacy_request_key(self.fingerprint, self.variant, rj, phase.method, phase.choices)]

    @property
    def cached_sequences(self) -> int | None:
        """How many sequences the engine's prefix cache keeps."""
        got: int | None = self._declared("cached_sequences", None)
        return got

    def quiet(self) -> Runner:
        """This runner without its own progress bar (a caller that runs many small phases shows one)."""
        return Runner(self._engine, self.store, self.variant, self.chunk_size, self.fresh, progress=False)

    def bar(self, total: int, desc: str) -> tqdm:
        return _Bar(
            total=total,
            file=terminal(),
            desc=desc,
            unit="req",
            disable=True if self.progress is False else None,
            mininterval=1.0,
            dynamic_ncols=True,
            leave=False,
        )

    def run(self, phase: Phase) -> tuple[list[Result], PhaseStats]:
        t0 = time.perf_counter()
        rjson = [request_json(r) for r in phase.requests]
        keys = [self.key(r, rj, phase) for r, rj in zip(phase.requests, rjson)]
        first: dict[str, int] = {}
        for i, k in enumerate(keys):
            first.setdefault(k, i)
        done: dict[str, Result] = {} if self.fresh else self._stored(phase, list(first), first)
        stats = PhaseStats(n_requests=len(keys), n_cached=sum(1 for k in keys if k in done))
        misses = [k for k in first if k not in done]

        if misses:
            before = time.perf_counter()
            was_loaded = not isinstance(self._engine, LazyBackend) or self._engine.loaded
            backend = self._get()
            if not was_loaded:
                stats.load_s = time.perf_counter() - before
            count = backend.prompt_count
            start = (count.submitted, count.computed) if count is not None else None
            with engine_errors(phase.name):
                todo = self._fitting(
                    phase,
                    backend,
                    [Work(k, phase.requests[first[k]], None, rjson[first[k]]) for k in misses],
                    done,
                    first,
                )
            # Neighbours that share a prefix (few-shot exemplars, the system prompt) reuse the KV cache; an engine
            # that pads its batches gets them by length instead.
            by_length = bool(self._declared("batches_by_length", False))
            todo.sort(key=lambda w: _order(w, by_length))
            bar = self.bar(len(todo), phase.name)
            try:
                for c in range(0, len(todo), self.chunk_size):
                    chunk = todo[c : c + self.chunk_size]
                    rs = [w.request for w in chunk]
                    ids = [w.ids for w in chunk]
                    encoded = None if any(i is None for i in ids) else [i for i in ids if i is not None]
                    try:
                        with engine_errors(phase.name):
                            if phase.method == "generate":
                                results = backend.generate(rs, encoded, progress=bar.update)
                            else:
                                results = backend.choice_logprobs(rs, phase.choices or (), encoded, progress=bar.update)
                    except PartialFailure as e:  # keep what was answered: a re-run sends only the rest
                        part = sorted(e.done)
                        self._keep(
                            [chunk[i] for i in part],
                            [checked(rs[i], e.done[i]) for i in part],  # type: ignore[arg-type]
                            done,
                            rjson,
                            first,
                        )
                        raise
                    stats.engine_calls += 1
                    self._keep(chunk, [checked(r, res) for r, res in zip(rs, results)], done, rjson, first)
                    stats.n_generated += len(chunk)
            finally:
                bar.close()
                if count is not None and start is not None:
                    stats.prompt_submitted = count.submitted - start[0]
                    stats.prompt_computed = count.computed - start[1]

        results = [done[k] for k in keys]
        stats.n_overflow = sum(1 for r in results if r.finish_reason == "overflow")
        stats.n_violations = sum(1 for r in results if r.finish_reason == "violation")
        stats.prompt_tokens = sum(r.prompt_tokens for r in results)
        stats.output_tokens = sum(r.output_tokens for r in results)
        stats.wall_s = time.perf_counter() - t0 - stats.load_s
        return results, stats

    def _keep(
        self,
        chunk: list[Work],
        results: list[Result],
        done: dict[str, Result],
        rjson: list[str],
        first: dict[str, int],
    ) -> None:
        fp = self.fingerprint
        rows: list[Row] = []
        for w, res in zip(chunk, results):
            done[w.key] = res
            rows.append(Row(w.key, fp, self.variant, w.request_json, res))
            for pk in w.primaries:  # stored under the original request too: a re-run needs no engine
                done[pk] = Result(**{**res.__dict__, "focused": True})
                rows.append(Row(pk, fp, self.variant, rjson[first[pk]], done[pk]))
        self.store.put_many(rows)

    def _lookup(self, keys: list[str], requests: list[Request], rjson: list[str], phase: Phase) -> dict[str, Result]:
        """Stored results by key; a key not found is looked up as older stores keyed it (_older_keys), so those
        outputs are served too, returned under the new key."""
        found = self.store.get_many(keys)
        rest = [(k, self._older_keys(r, rj, phase)) for k, r, rj in zip(keys, requests, rjson) if k not in found]
        if rest:
            old = self.store.get_many([ok for _, oks in rest for ok in oks])
            moved = []
            for k, oks in rest:
                if hit := next((ok for ok in oks if ok in old), None):
                    found[k] = old[hit]
                    moved.append((hit, k))
            self.store.rekey(moved)
        return found

    def _stored(self, phase: Phase, keys: list[str], first: dict[str, int]) -> dict[str, Result]:
        """Stored results, except those another overflow policy produced: a fallback's answer (or overflow)
        only serves 'focus'; a plain overflow must fail again under 'fail' and is retried with the item's
        fallback under 'focus'."""
        out = {}
        requests = [phase.requests[first[k]] for k in keys]
        for k, r in self._lookup(keys, requests, [request_json(q) for q in requests], phase).items():
            if r.focused and phase.overflow != "focus":
                continue
            if r.finish_reason == "overflow" and not r.focused:
                fb = phase.fallbacks[first[k]] if phase.fallbacks else None
                if phase.overflow == "fail" or (phase.overflow == "focus" and fb is not None):
                    continue
            out[k] = r
        return out

    def _fitting(
        self,
        phase: Phase,
        backend: Any,
        todo: list[Work],
        done: dict[str, Result],
        first: dict[str, int],
    ) -> list[Work]:
        """The requests that fit the context. One that does
        not is failed, recorded as an overflow, or (policy 'focus') replaced by its fallback; a fallback's
        result is also answered under the keys of the requests it stands in for (`primaries`)."""
        tokenizing = isinstance(backend, TokenizingBackend)
        if not tokenizing and backend.prompt_lengths([]) is None:  # no counts at all: the engine enforces it
            return todo

        def encode(rs: list[Request]) -> list[list[int] | None] | list[int]:
            if tokenizing:
                return backend.encode(rs)
            return backend.prompt_lengths(rs)

        def length(ids: list[int] | int) -> int:
            return ids if isinstance(ids, int) else len(ids)

        limit = backend.max_model_len
        out: list[Work] = []
        retry: dict[str, tuple[Request, str, list[str]]] = {}
        rj_of = {w.key: w.request_json for w in todo}
        rows: list[Row] = []  # overflows are stored too (the key holds the context length): a re-run needs no engine
        for w, got in zip(todo, encode([w.request for w in todo])):
            k, r, rj = w.key, w.request, w.request_json
            n = length(got)  # type: ignore[arg-type]
            ids = got if tokenizing else None
            fb = phase.fallbacks[first[k]] if phase.fallbacks else None
            placement = place(n, r, phase.method, limit, phase.overflow, fb)
            if placement == "fits":
                out.append(Work(k, r, ids, rj))  # type: ignore[arg-type]
                continue
            if placement == "fallback" and fb is not None:
                fj = request_json(fb)
                fk = self.key(fb, fj, phase)
                retry.setdefault(fk, (fb, fj, []))[2].append(k)
                continue
            if placement == "fail":
                need = tokens_needed(n, r, phase.method)
                raise InputError(
                    f"prompt of {n} tokens + {need - n} to generate exceeds "
                    f"max_model_len {limit} (overflow policy 'fail'; use 'skip' to record and "
                    f"go on)",
                    record=phase.item_ids[first[k]],
                )
            done[k] = Result(text="", finish_reason="overflow", prompt_tokens=n)
            rows.append(Row(k, self.fingerprint, self.variant, rj, done[k]))
        hits = (
            self._lookup(list(retry), [v[0] for v in retry.values()], [v[1] for v in retry.values()], phase)
            if retry and not self.fresh
            else {}
        )
        for fk, res in hits.items():
            for pk in retry[fk][2]:
                done[pk] = Result(**{**res.__dict__, "focused": True})
                rows.append(Row(pk, self.fingerprint, self.variant, rj_of[pk], done[pk]))
        rest = [(fk, fb, fj) for fk, (fb, fj, _) in retry.items() if fk not in hits]
        for (fk, fb, fj), got in zip(rest, encode([fb for _, fb, _ in rest]) if rest else []):
            n = length(got)  # type: ignore[arg-type]
            if fits(n, fb, phase.method, limit):
                out.append(Work(fk, fb, got if tokenizing else None, fj, tuple(retry[fk][2])))  # type: ignore[arg-type]
            else:
                for pk in retry[fk][2]:
                    done[pk] = Result(text="", finish_reason="overflow", prompt_tokens=n, focused=True)
                    rows.append(Row(pk, self.fingerprint, self.variant, rj_of[pk], done[pk]))
        if rows:
            self.store.put_many(rows)
        return out


class _Bar(tqdm):
    """A progress bar that starts no monitor thread: a sweep leaves no thread behind in a notebook."""

    monitor_interval = 0


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _order(w: Work, by_length: bool) -> Any:
    key = w.ids if w.ids is not None else w.request_json
    return (len(key), key) if by_length else key


def checked(request: Request, result: Result) -> Result:
    """A constrained answer is validated on our side, whatever the engine claims to enforce: one that breaks
    its constraint is marked a violation (kept for inspection, scored as a parse failure, counted per run). A
    logprob that is NaN, infinite or missing makes the answer malformed: a parse failure, never a confident
    answer."""
    if result.logprobs is not None and not all(
        isinstance(v, int | float) and math.isfinite(v) for v in result.logprobs.values()
    ):
        return Result(**{**result.__dict__, "text": "", "finish_reason": "malformed", "logprobs": None})
    if _LONE_SURROGATE.search(result.text):  # not a character: no store or file can hold it, so it is U+FFFD
        result = Result(**{**result.__dict__, "text": _LONE_SURROGATE.sub("\ufffd", result.text)})
    if request.constraint is None or result.finish_reason != "stop":
        return result
    why = violation(request.constraint, result.text)
    if why is None:
        return result
    return Result(**{**result.__dict__, "finish_reason": "violation"})
