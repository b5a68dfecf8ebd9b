"""The four LegalRikai tasks' record schemas, and a loader that maps a local copy's field names onto ours.

The gated dataset's field names are not public: `field_map` (our name -> their name) lets a user's copy
load without code changes. Contracts must parse into articles (the Japanese toolkit's parser), since diffs
and structure checks run on them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ...datafiles import read_records
from ...errors import InputError


class _Item(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


class AmendExpItem(_Item):
    law_name: str = Field(min_length=1)
    statute_pre: str = Field(min_length=1)
    statute_post: str = Field(min_length=1)
    promulgation_date: str | None = None
    enforcement_date: str = Field(min_length=1)
    gold_summary: str = Field(min_length=1)
    gold_impact: str = Field(min_length=1)


class StatRevItem(_Item):
    statute_pre: str = Field(min_length=1)
    statute_post: str = Field(min_length=1)
    contract: str = Field(min_length=1)
    gold: str = Field(min_length=1)


class RevisionItem(_Item):
    """ReqRev and RiskRev: the same input contracts; explicit vs risk-driven instructions."""

    contract: str = Field(min_length=1)
    instructions: list[str] = Field(min_length=1)
    gold: str = Field(min_length=1)

    @field_validator("instructions")
    @classmethod
    def _non_empty(cls, v: list[str]) -> list[str]:
        if any(not s.strip() for s in v):
            raise ValueError("an instruction is empty")
        return v


SCHEMAS: dict[str, type[_Item]] = {
    "amendexp": AmendExpItem,
    "statrev": StatRevItem,
    "reqrev": RevisionItem,
    "riskrev": RevisionItem,
}
_CONTRACT_FIELDS = ("contract", "gold")


def load_items(
    task: str, path: str, split: str = "test", field_map: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    from ...ja.contract import parse

    schema = SCHEMAS[task]
    fmap = field_map or {}
    unknown = sorted(set(fmap) - set(schema.model_fields))
    if unknown:
        raise InputError(
            f"unknown field(s) {', '.join(unknown)} for {task}; map some of {', '.join(schema.model_fields)}",
            field="field_map",
        )
    items, seen = [], set()
    for where, raw in read_records(path, split):
        rec = {ours: raw[theirs] for ours, theirs in fmap.items() if theirs in raw}
        rec.update({k: v for k, v in raw.items() if k not in rec and k not in fmap.values()})
        try:
            it = schema.model_validate(rec).model_dump()
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(x) for x in err["loc"])
            field = fmap.get(field, field)
            msg = "missing" if err["type"] == "missing" else str(err["msg"])
            raise InputError(msg, file=path, record=_rec(where, rec), field=field) from None
        for f in _CONTRACT_FIELDS:
            if f in it and not parse(it[f]).articles:
                raise InputError(
                    "the contract does not parse: no article headings (第N条 / Article N) found",
                    file=path,
                    record=_rec(where, rec),
                    field=fmap.get(f, f),
                )
        if it["id"] in seen:
            raise InputError("duplicate id", file=path, record=_rec(where, rec), field=fmap.get("id", "id"))
        seen.add(it["id"])
        items.append(it)
    return items


def _rec(where: str, rec: dict[str, Any]) -> str:
    return f"{where} (id {rec['id']})" if rec.get("id") is not None else where
