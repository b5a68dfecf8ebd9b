"""LegalEval-Q files: query lists in the authors' public format, and annotated training tuples."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ...datafiles import TaskItem, read_items


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
    """A query as the task asks it: its id in the results files (the datasets_id, prefixed "val:" in the
    validation set) and its split."""

    split: Literal["train", "validation"]


def load_queries(path: str) -> list[Query]:
    """Query records; a datasets_id that repeats is an error naming both records."""
    return [q for _, q in read_items(path, "train", Query, unique="datasets_id")]


def load_annotated(path: str) -> list[dict[str, Any]]:
    """The scorer's training tuples, as the scorer reads them (it reads the evaluator's answers the same way)."""
    return [a.model_dump() for _, a in read_items(path, "train", Annotated, unique=None)]
