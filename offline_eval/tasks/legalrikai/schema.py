"""The four LegalRikai tasks' record schemas, and a loader that maps a local copy's field names onto ours.

The gated dataset's field names are not public: `field_map` (our name -> their name) lets a user's copy
load without code changes. Contracts must parse into articles (the Japanese toolkit's parser), since diffs
and structure checks run on them.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from offline_eval.ja.contract import parse
from offline_eval.tasks.kit import InputError, TaskItem, read_items


class LegalRikaiItem(TaskItem):
    """One item of a sub-task: AmendExpItem, StatRevItem or RevisionItem."""

    subtask: str = ""  # the sub-task whose file it came from, set by load_items (a file's own column is replaced)


class AmendExpItem(LegalRikaiItem):
    law_name: str = Field(min_length=1)
    statute_pre: str = Field(min_length=1)
    statute_post: str = Field(min_length=1)
    promulgation_date: str | None = None
    enforcement_date: str = Field(min_length=1)
    gold_summary: str = Field(min_length=1)
    gold_impact: str = Field(min_length=1)


class StatRevItem(LegalRikaiItem):
    statute_pre: str = Field(min_length=1)
    statute_post: str = Field(min_length=1)
    contract: str = Field(min_length=1)
    gold: str = Field(min_length=1)


class RevisionItem(LegalRikaiItem):
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


SCHEMAS: dict[str, type[LegalRikaiItem]] = {
    "amendexp": AmendExpItem,
    "statrev": StatRevItem,
    "reqrev": RevisionItem,
    "riskrev": RevisionItem,
}
_CONTRACT_FIELDS = ("contract", "gold")


def load_items(
    task: str, path: str, split: str = "test", field_map: dict[str, str] | None = None
) -> list[LegalRikaiItem]:

    schema = SCHEMAS[task]
    fmap = field_map or {}
    ours = [f for f in schema.model_fields if f != "subtask"]
    unknown = sorted(set(fmap) - set(ours))
    if unknown:
        raise InputError(
            f"unknown field(s) {', '.join(unknown)} for {task}; map some of {', '.join(ours)}",
            field="field_map",
        )
    items = []
    for where, it in read_items(path, split, schema, fmap):
        for f in _CONTRACT_FIELDS:
            if isinstance(text := getattr(it, f, None), str) and not parse(text).articles:
                raise InputError(
                    "the contract does not parse: no article headings (第N条 / Article N) found",
                    file=path,
                    record=where,
                    field=fmap.get(f, f),
                )
        items.append(it.model_copy(update={"subtask": task}))
    return items
