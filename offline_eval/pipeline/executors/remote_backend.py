"""An engine on a Ray worker, seen from the driver as a Backend: the runner's bookkeeping (dedupe, fitting,
overflow fallbacks, storing) stays in the driver, and only generate / choice_logprobs / encode cross over.

With data_parallel_size N the unit has N replicas: each call's requests are cut into N contiguous slices
(neighbours share prefixes), run at once, and put back in order, so results line up with the requests.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import Any

from offline_eval.inference.backends.base import Backend, Progress, TokenizingBackend
from offline_eval.inference.backends.registry import get_engine, load_backend
from offline_eval.inference.backends.spec import LoadSpec
from offline_eval.inference.requests import Request, Result
from offline_eval.runtime.errors import EngineError, OfflineEvalError, described
from offline_eval.runtime.netguard import allow_only

Reply = tuple[Any, ...]  # ("ok", value) or ("err", pickled exception or None, type name, message, ours)


def _safely(fn: Callable[[], Any]) -> Reply:
    """An engine's exception travels back as itself where it pickles, else as its type name and message, so
    the driver words a failure exactly as a serial sweep would."""
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001 - every engine error goes back to the driver, which decides
        blob: bytes | None = None
        try:
            pickle.loads(pickle.dumps(e))
            blob = pickle.dumps(e)
        except Exception:  # noqa: BLE001 - an exception class that does not round-trip
            pass
        return ("err", blob, type(e).__name__, str(e), isinstance(e, OfflineEvalError))


class EngineReplica:
    """The Ray actor's body: one engine, loaded in the worker process."""

    def __init__(self, spec: LoadSpec) -> None:
        self.spec = spec
        self.backend: Backend | None = None
        self._guard = ExitStack()

    def load(self) -> Reply:
        def go() -> dict[str, Any]:
            import ray

            urls = get_engine(self.spec.backend).connects_to(self.spec.engine_options)
            if urls:  # this worker talks to the served model: to its host and nowhere else, as the driver does
                self._guard.enter_context(allow_only(urls))
            self.backend = load_backend(self.spec)
            return {
                "tokenizing": isinstance(self.backend, TokenizingBackend),
                "max_model_len": self.backend.max_model_len,
                "node": ray.util.get_node_ip_address(),
                "pid": os.getpid(),
            }

        return _safely(go)

    def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Reply:
        return _safely(lambda: getattr(self.backend, method)(*args, **kwargs))

    def close(self) -> None:
        try:
            if self.backend is not None:
                self.backend.close()
                self.backend = None
        finally:
            self._guard.close()


def unwrap(reply: Reply) -> Any:
    if reply[0] == "ok":
        return reply[1]
    _, blob, name, message, ours = reply
    if blob is not None:
        raise pickle.loads(blob)
    raise type(name, (OfflineEvalError if ours else Exception,), {})(message)


def get(refs: Any) -> Any:
    """ray.get, with a lost worker (crash, OOM kill, node gone) turned into one line that fails this unit."""
    import ray

    try:
        return ray.get(refs)
    except ray.exceptions.RayError as e:
        raise EngineError(f"the Ray worker running this engine was lost ({described(e, 200)})") from None


class RemoteBackend(Backend):
    name = "ray"

    def __init__(
        self,
        spec: LoadSpec,
        replicas: list[Any],
        max_model_len: int,
        on_done: Callable[[int], None],
        release: Callable[[], None],
    ) -> None:
        super().__init__(spec)
        self.max_model_len = max_model_len
        self.replicas, self._on_done, self._release = replicas, on_done, release

    def _one(self, method: str, *args: Any) -> Any:
        return unwrap(get(self.replicas[0].call.remote(method, args, {})))

    def _split(
        self,
        method: str,
        requests: Sequence[Request],
        extra: tuple[Any, ...],
        encoded: Sequence[list[int]] | None,
        progress: Progress,
    ) -> list[Result]:
        import ray

        n = min(len(self.replicas), max(1, len(requests)))
        bounds = [len(requests) * i // n for i in range(n + 1)]
        refs = []
        for i in range(n):
            a, b = bounds[i], bounds[i + 1]
            enc = list(encoded[a:b]) if encoded is not None else None
            refs.append(self.replicas[i].call.remote(method, (list(requests[a:b]), *extra), {"encoded": enc}))
        parts: dict[Any, list[Result]] = {}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            part = unwrap(get(ready[0]))
            parts[ready[0]] = part
            self._on_done(len(part))
            if progress is not None:
                progress(len(part))
        return [r for ref in refs for r in parts[ref]]

    def generate(
        self, requests: Sequence[Request], encoded: Sequence[list[int]] | None = None, progress: Progress = None
    ) -> list[Result]:
        return self._split("generate", requests, (), encoded, progress)

    def choice_logprobs(
        self,
        requests: Sequence[Request],
        choices: Sequence[str],
        encoded: Sequence[list[int]] | None = None,
        progress: Progress = None,
    ) -> list[Result]:
        return self._split("choice_logprobs", requests, (list(choices),), encoded, progress)

    def close(self) -> None:
        self._release()


class RemoteTokenizingBackend(RemoteBackend, TokenizingBackend):
    """The worker's engine has a local tokenizer: the driver's runner checks prompt lengths through it."""

    def encode(self, requests: Sequence[Request]) -> list[list[int]]:
        return self._one("encode", list(requests))

    def render(self, request: Request) -> str:
        return self._one("render", request)

    def encode_text(self, text: str) -> list[int]:
        return self._one("encode_text", text)

    def vocab_bytes(self) -> Sequence[bytes]:
        return self._one("vocab_bytes")
