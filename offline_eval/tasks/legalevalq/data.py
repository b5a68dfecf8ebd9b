"""LegalEval-Q files: query lists in the authors' public format, and annotated training tuples."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...datafiles import read_records
from ...errors import InputError


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


def _load(path: str, model: type[BaseModel]) -> list[dict[str, Any]]:
    out = []
    for where, raw in read_records(path, split="train"):
        try:
            out.append(model.model_validate(raw).model_dump())
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(x) for x in err["loc"])
            msg = "missing" if err["type"] == "missing" else f"{err['msg']}, got {err.get('input')!r}"[:200]
            raise InputError(msg, file=path, record=where, field=field) from None
    return out


def load_queries(path: str) -> list[dict[str, Any]]:
    """Query records; a datasets_id that repeats is an error naming both records."""
    out = _load(path, Query)
    first: dict[str, int] = {}
    for i, q in enumerate(out):
        key = str(q["datasets_id"])
        if key in first:
            raise InputError(
                f"duplicate datasets_id {key!r} (first in record {first[key] + 1})",
                file=path,
                record=i + 1,
                field="datasets_id",
            )
        first[key] = i
    return out


def load_annotated(path: str) -> list[dict[str, Any]]:
    return _load(path, Annotated)
