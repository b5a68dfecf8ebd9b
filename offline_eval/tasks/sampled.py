"""Statistics over an item's k samples (a sampled model answering each item k times, `samples: k`).

The run's metrics are the task's own aggregate over every sample: each item weighs the same, so a mean is the mean
of per-item means and a sum-based metric (F1) is pooled over the samples. Besides it:
- samples: k;
- run_to_run_sd: the SD, across sample index, of the primary metric computed on one sample of every item: how
  far one run of the model (what a user who runs once gets) may land from another;
- for 0/1 item scores, majority_vote (the share of items whose most frequent answer is right; a tie between
  answers counts the mean of the tied answers' scores, the expected score of a random tie-break) and
  samples_disagree (the share of items whose samples do not all give the same answer).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from offline_eval.metrics.values import Count
from offline_eval.results.records import ItemRecord, sample_of

if TYPE_CHECKING:
    from offline_eval.metrics.values import RunMetrics


class Sampled(Protocol):
    """What the samples' statistics read of a task (tasks.base.Task), named here so that neither imports the other."""

    @property
    def primary_metric(self) -> str: ...

    def declared_metrics(self, records: Sequence[Any], setting: dict[str, Any]) -> RunMetrics: ...

    def item_score(self, record: Any) -> float | None: ...

    def item_answer(self, record: Any) -> Any: ...


SAMPLES = Count("samples", "answers per item")
RUN_TO_RUN_SD = Count("run_to_run_sd", "the primary metric's sd over the samples")
MAJORITY_VOTE = Count("majority_vote", "majority-vote score")
SAMPLES_DISAGREE = Count("samples_disagree", "share of items whose samples disagree")
SAMPLED = (SAMPLES, RUN_TO_RUN_SD, MAJORITY_VOTE, SAMPLES_DISAGREE)


def sample_metrics(
    task: Sampled, records: Sequence[ItemRecord], setting: dict[str, Any]
) -> dict[str, float | int | None]:
    """The samples' statistics of a run's records ({} where each item was answered once)."""
    by_sample: dict[int, list[ItemRecord]] = {}
    for r in records:
        s = sample_of(r)
        if s is None:
            return {}
        by_sample.setdefault(s, []).append(r)
    if len(by_sample) < 2:
        return {}
    out: dict[str, float | int | None] = {SAMPLES.name: len(by_sample)}
    primary = [task.declared_metrics(rs, setting).get(task.primary_metric) for _, rs in sorted(by_sample.items())]
    values = [float(v) for v in primary if isinstance(v, (int, float)) and math.isfinite(v)]
    out[RUN_TO_RUN_SD.name] = round(statistics.stdev(values), 6) if len(values) == len(primary) else None
    votes = majority(task, records)
    if votes is not None:
        out[MAJORITY_VOTE.name], out[SAMPLES_DISAGREE.name] = votes
    return out


def majority(task: Sampled, records: Sequence[ItemRecord]) -> tuple[float | None, float | None] | None:
    """(majority-vote score, share of items whose samples disagree), where item scores are 0/1 (None: graded)."""
    answers: dict[str, list[tuple[Any, float]]] = {}
    for r in records:
        s = task.item_score(r)
        if s is None:
            continue
        if s not in (0, 1):
            return None
        a = task.item_answer(r)
        if a is None:  # the task has no comparable answer: no vote to take
            return None
        answers.setdefault(str(r.id), []).append((_hashable(a), float(s)))
    if not answers:
        return None, None
    votes, split = [], 0
    for got in answers.values():
        counts = Counter(a for a, _ in got)
        top = max(counts.values())
        tied = {a for a, c in counts.items() if c == top}
        score = {a: s for a, s in got}
        votes.append(math.fsum(score[a] for a in tied) / len(tied))
        split += len(counts) > 1
    n = len(answers)
    return round(math.fsum(votes) / n, 6), round(split / n, 6)


def _hashable(answer: Any) -> Any:
    return repr(answer) if isinstance(answer, (dict, list)) else answer
