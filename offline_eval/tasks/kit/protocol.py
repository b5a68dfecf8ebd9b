"""Which protocol a task runs: `paper`, the authors' own (their prompts byte for byte, their item set, exemplars
and decoding, each piece pinned to their code by tests), or `offline-eval`, ours (constrained and logprob modes,
Japanese evaluator prompts, and the other choices each task's docs list). Every number is labelled with the
protocol it comes from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from pydantic import Field
from pydantic.fields import FieldInfo

Protocol = Literal["paper", "offline-eval"]
PROTOCOLS: tuple[str, ...] = get_args(Protocol)
# What a task runs unless its config says otherwise: the authors' protocol, so that a number sits beside the paper's.
DEFAULT_PROTOCOL: Protocol = "paper"
# What a run recorded before protocols existed ran, and what a task that declares no protocol runs: our own.
OURS: Protocol = "offline-eval"
UNRECORDED = "unrecorded"  # an option's json_schema_extra key: the value runs had before the option existed


@dataclass(frozen=True)
class Source:
    """Where a piece of an authors' protocol (a prompt string, a table, an id list) was taken from."""

    repo: str
    commit: str
    path: str
    lines: str

    def __str__(self) -> str:
        return f"{self.repo}@{self.commit[:7]}:{self.path}:{self.lines}"


def protocol_field(description: str = "paper: the authors' protocol; offline-eval: ours (docs/tasks/<task>.md)") -> Any:
    """A task's `protocol` option: the papers' by default; a run recorded before the option existed ran ours."""
    return Field(DEFAULT_PROTOCOL, description=description, json_schema_extra={UNRECORDED: OURS})


def unrecorded(field: FieldInfo) -> Any:
    """What a run recorded before a task option existed ran with: what the option declares, else its default."""
    return declared_before({"f": field}).get("f", field.get_default(call_default_factory=True))


def declared_before(fields: dict[str, FieldInfo]) -> dict[str, Any]:
    """The options that declare what runs had before they existed, with that value."""
    return {k: f.json_schema_extra[UNRECORDED] for k, f in fields.items() if _declares(f)}  # type: ignore[index]


def _declares(f: FieldInfo) -> bool:
    return isinstance(f.json_schema_extra, dict) and UNRECORDED in f.json_schema_extra
