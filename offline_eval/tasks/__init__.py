"""Tasks: data + request builder + scorer. Registered by name, imported only when used."""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import InputError
from .base import Task

_TASKS: dict[str, str] = {
    "jbeqa": "offline_eval.tasks.jbeqa:JBEQATask",
    "legalevalq": "offline_eval.tasks.legalevalq.task:LegalEvalQTask",
    "legalrikai": "offline_eval.tasks.legalrikai.task:LegalRikaiTask",
}
TASK_NAMES = tuple(_TASKS)


def get_task_class(name: str) -> type[Task]:
    if name not in _TASKS:
        raise InputError(f"unknown task '{name}', expected one of {', '.join(_TASKS)}", field="tasks")
    module, cls = _TASKS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def make_task(name: str, options: dict[str, Any], source: str | None = None) -> Task:
    return get_task_class(name).from_options(options, source=source, prefix=f"tasks.{name}")


def load_items(task: Task, source: str | None) -> list[Any]:
    """task.load(), with errors that name no file of their own attributed to the config."""
    try:
        return task.load()
    except InputError as e:
        if e.file is None and source:
            raise InputError(e.detail, file=source, record=e.record, field=e.field) from None
        raise
