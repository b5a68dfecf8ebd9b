"""Which protocol a task runs: `paper`, the authors' own (their prompts byte for byte, their item set, exemplars
and decoding, each piece pinned to their code by tests), or `offline-eval`, ours (constrained and logprob modes,
Japanese evaluator prompts, and the other choices each task's docs list). Every number is labelled with the
protocol it comes from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Protocol = Literal["paper", "offline-eval"]
PROTOCOLS: tuple[str, ...] = get_args(Protocol)
# The default stays ours while the sample data in data/ holds instructions outside the JBE-QA authors' table (the
# paper's protocol refuses those) and no release-sized train split for their exemplar rows.
DEFAULT_PROTOCOL: Protocol = "offline-eval"
# What a run recorded before protocols existed ran, and what a task that declares no protocol runs: our own.
OURS: Protocol = "offline-eval"


@dataclass(frozen=True)
class Source:
    """Where a piece of an authors' protocol (a prompt string, a table, an id list) was taken from."""

    repo: str
    commit: str
    path: str
    lines: str

    def __str__(self) -> str:
        return f"{self.repo}@{self.commit[:7]}:{self.path}:{self.lines}"
