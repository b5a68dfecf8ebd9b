"""The plain values an engine is loaded from and reports with: nothing here imports the rest of offline-eval, so
any layer may hold them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from offline_eval.inference.requests import Request


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
    engine_options: dict[str, Any] = field(default_factory=dict)  # the engine's own models.yaml keys
    # The prompt tokens the load is planned to submit (None: unknown), for an engine that chooses how to start from
    # it (vLLM compiles or not); neither an option nor part of the store key.
    planned_prompt_tokens: int | None = None
    adapter: str | None = None  # a LoRA adapter over the weights (a PEFT folder; llama.cpp: a GGUF adapter)
    adapter_scale: float = 1.0
    # Every adapter the sweep runs over these same weights and options (this one included): an engine that swaps
    # adapters starts once for all of them. How the work is grouped, not part of the store key.
    adapter_group: tuple[str, ...] = ()
    # The library that masks constrained tokens, where it is not the engine's own default (None: the default).
    constraint_backend: str | None = None

    def describe(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d.pop("name")
        d.pop("planned_prompt_tokens")
        d.pop("adapter_group")
        if self.adapter is None:  # a load without one is described as before adapters existed
            d.pop("adapter")
            d.pop("adapter_scale")
        if self.constraint_backend is None:  # the engine's default: described as before backends could be chosen
            d.pop("constraint_backend")
        return d


@dataclass(frozen=True)
class Reservation:
    """What one replica of an engine reserves on a Ray cluster. `engine_places_workers`: the engine starts
    its own Ray workers (vLLM's distributed_executor_backend: ray), so the unit reserves a placement group of
    `gpus` one-GPU bundles for them and its own process takes no GPU."""

    cpus: float = 1
    gpus: float = 0
    engine_places_workers: bool = False


class PromptCounter(Protocol):
    def encode(self, requests: Sequence[Request]) -> list[list[int]]: ...

    def close(self) -> None: ...


@dataclass
class PromptCount:
    """Prompt tokens handed to the engine and those it actually computed (the rest came from its prefix cache),
    counted since the engine started."""

    submitted: int = 0
    computed: int = 0

    def add(self, submitted: int, computed: int) -> None:
        self.submitted += submitted
        self.computed += computed
