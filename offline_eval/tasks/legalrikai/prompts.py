"""Japanese prompt templates (package data, Jinja) for the four tasks and for the judges."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, Template

from . import rubric
from .schema import LegalRikaiItem, RevisionItem


@lru_cache(maxsize=1)
def _env() -> Environment:
    return Environment(
        loader=PackageLoader(__package__, "templates"),
        undefined=StrictUndefined,
        keep_trailing_newline=False,
        autoescape=False,
    )


@lru_cache(maxsize=16)
def _template(name: str) -> Template:
    return _env().get_template(f"{name}.j2")


def template_source(name: str) -> str:
    """A template's text as the package ships it."""
    source, _, _ = _env().loader.get_source(_env(), f"{name}.j2")  # type: ignore[union-attr]
    return source


def system() -> str:
    return _template("system").render().strip()


def task_prompt(item: LegalRikaiItem, focused: dict[str, str] | None = None) -> str:
    """The user message for one item; `focused` replaces the statutes with their changed-article excerpts."""
    fields: dict[str, Any] = {**item.content(), **(focused or {}), "focused": focused is not None}
    fields.setdefault("promulgation_date", None)
    return _template(item.subtask).render(**fields).strip()


def instruction(item: LegalRikaiItem) -> str:
    if isinstance(item, RevisionItem):
        return "\n".join(f"{i}. {x}" for i, x in enumerate(item.instructions, 1))
    return rubric.task_info(item.subtask)["instruction"]


def judge_prompt(
    item: LegalRikaiItem, original_prompt: str, response: str, ground_truth: str, rationale_max_chars: int
) -> str:
    sub = item.subtask
    return (
        _template("judge")
        .render(
            definition=rubric.task_info(sub)["definition"],
            original_prompt=original_prompt,
            instruction=instruction(item),
            response=response,
            ground_truth=ground_truth,
            criteria=rubric.criteria(sub),
            rationale_max_chars=rationale_max_chars,
            example=rubric.example(sub),
        )
        .strip()
    )
