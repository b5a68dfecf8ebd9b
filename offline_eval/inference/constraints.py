"""Backend-neutral output constraints. Each backend translates them into its own grammar form."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Choice:
    """The output is exactly one of `choices`."""

    choices: tuple[str, ...]

    def __init__(self, choices: list[str] | tuple[str, ...]) -> None:
        if not choices:
            raise ValueError("Choice needs at least one option")
        object.__setattr__(self, "choices", tuple(choices))

    def to_dict(self) -> dict[str, Any]:
        return {"type": "choice", "choices": list(self.choices)}


@dataclass(frozen=True)
class JsonSchema:
    """The output is one JSON value (no whitespace between tokens) that validates against `schema`."""

    schema_json: str

    def __init__(self, schema: dict[str, Any] | str) -> None:
        text = schema if isinstance(schema, str) else json.dumps(schema, sort_keys=True, ensure_ascii=False)
        object.__setattr__(self, "schema_json", text)

    @property
    def schema(self) -> dict[str, Any]:
        return json.loads(self.schema_json)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "json", "schema": self.schema}


@dataclass(frozen=True)
class Regex:
    """The whole output matches `pattern`."""

    pattern: str

    def to_dict(self) -> dict[str, Any]:
        return {"type": "regex", "pattern": self.pattern}


Constraint = Choice | JsonSchema | Regex


def from_dict(d: dict[str, Any]) -> Constraint:
    """The constraint a to_dict() wrote (what summary.json's provenance holds)."""
    kind = d.get("type")
    if kind == "choice":
        return Choice(list(d["choices"]))
    if kind == "json":
        return JsonSchema(d["schema"])
    if kind == "regex":
        return Regex(str(d["pattern"]))
    raise ValueError(f"unknown constraint type {kind!r}")


def parse_json_strict(text: str) -> Any:
    """json.loads that refuses raw control characters inside strings (the JSON spec does too)."""
    return json.loads(text, strict=True)


def violation(c: Constraint, text: str) -> str | None:
    """Why `text` breaks constraint `c` (None: it keeps it). Checked on our side whatever the engine claims to
    enforce: a server may ignore a constraint it cannot parse and answer 200 OK all the same."""
    import re

    if isinstance(c, Choice):
        return None if text in c.choices else f"not one of the {len(c.choices)} choices"
    if isinstance(c, Regex):
        return None if re.fullmatch(c.pattern, text, re.DOTALL) else "does not match the regex"
    try:
        value = parse_json_strict(text)
    except ValueError as e:
        return f"not strict JSON ({e})"
    import jsonschema

    try:
        jsonschema.validate(value, c.schema)
    except jsonschema.ValidationError as e:
        return f"JSON schema: {e.message[:200]}"
    return None
