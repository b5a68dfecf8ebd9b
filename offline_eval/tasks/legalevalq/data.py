"""LegalEval-Q files: query lists in the authors' public format, and annotated training tuples."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from offline_eval.tasks.kit import InputError, TaskItem, read_items


class Query(BaseModel):
    model_config = ConfigDict(extra="ignore")
    query: str = Field(min_length=1)
    resource: str | None = None
    datasets_id: str | int
    datasets_ans: str | None = None


class Annotated(BaseModel):
    model_config = ConfigDict(extra="ignore")
    query: str = Field(min_length=1)
    answer: str
    comment: str
    conclusion: str
    score: float = Field(ge=0, le=100)


class LegalEvalQItem(Query, TaskItem):
    """A query as the task asks it: its id in the results files (query_ids: the datasets_id, or
    "resource:datasets_id" in a file where datasets_ids repeat; prefixed "val:" in the validation set) and its
    split."""

    split: Literal["train", "validation"]


def load_queries(path: str) -> list[Query]:
    """Query records (checked as query_ids checks them)."""
    return [q for _, q in query_ids(path)]


def query_ids(path: str) -> list[tuple[str, Query]]:
    """Each query record with its id. The id is the datasets_id where every record of the file has its own; in a
    file where a datasets_id repeats (the authors' 60- and 600-query files: their sources number their items
    separately), every id is "resource:datasets_id". A record that repeats another's (resource, datasets_id), or
    that has no resource in such a file, is an error naming the file, the record and the field."""
    rows = read_items(path, "train", Query, unique=None)
    seen: dict[str, str] = {}
    repeat = ""  # the first datasets_id that repeats, and where
    for label, q in rows:
        key = str(q.datasets_id)
        if key in seen and not repeat:
            repeat = f"datasets_id {key!r} in {seen[key]} and {label}"
        seen.setdefault(key, label)
    if not repeat:
        return [(str(q.datasets_id), q) for _, q in rows]
    first: dict[str, str] = {}
    out: list[tuple[str, Query]] = []
    for label, q in rows:
        if not q.resource:
            raise InputError(
                f"datasets_id values repeat in this file ({repeat}), so its records are told apart by their "
                "resource: this record has none",
                file=path,
                record=label,
                field="resource",
            )
        id_ = f"{q.resource}:{q.datasets_id}"
        if id_ in first:  # the same (resource, datasets_id), or a colon inside one making two pairs one id
            raise InputError(
                f"duplicate datasets_id {str(q.datasets_id)!r} in resource {q.resource!r} (id {id_!r}, first in "
                f"{first[id_]})",
                file=path,
                record=label,
                field="datasets_id",
            )
        first[id_] = label
        out.append((id_, q))
    return out


def load_annotated(path: str) -> list[dict[str, Any]]:
    """The scorer's training tuples, as the scorer reads them (it reads the evaluator's answers the same way)."""
    return [a.model_dump() for _, a in read_items(path, "train", Annotated, unique=None)]
