"""Tasks: data + request builder + scorer, one package each, found by name when first asked for."""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from pathlib import Path
from typing import Any

from offline_eval.results.records import ItemRecord, PlainRecord
from offline_eval.results.summary import Summary
from offline_eval.runtime.errors import InputError
from offline_eval.tasks.kit.protocol import declared_before

from .base import Task


@lru_cache(maxsize=1)
def _tasks() -> dict[str, type[Task]]:
    """Every task package here that declares `TASK = <its Task class>`: adding a task adds a folder, nothing
    else."""
    found: dict[str, type[Task]] = {}
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if mod.ispkg:
            cls = getattr(importlib.import_module(f"{__name__}.{mod.name}"), "TASK", None)
            if isinstance(cls, type) and issubclass(cls, Task):
                found[cls.name] = cls
    return found


def task_names() -> tuple[str, ...]:
    return tuple(_tasks())


def task_classes() -> tuple[type[Task], ...]:
    return tuple(_tasks().values())


def data_kinds() -> list[str]:
    """What `data validate` accepts: every task, and the parts of a task it declares (e.g. sub-tasks)."""
    return [k for cls in _tasks().values() for k in (cls.name, *cls.data_kinds)]


def get_task_class(name: str) -> type[Task]:
    tasks = _tasks()
    if name not in tasks:
        raise InputError(f"unknown task '{name}', expected one of {', '.join(tasks)}", field="tasks")
    return tasks[name]


def make_task(name: str, options: dict[str, Any], source: str | None = None) -> Task:
    return get_task_class(name).from_options(options, source=source, prefix=f"tasks.{name}")


def recorded_task(name: str, options: dict[str, Any], source: str | None = None) -> Task:
    """The task a summary's recorded options describe: an option the record lacks (one added since it was made)
    is what runs had before it existed where the option declares that (`protocol`: offline-eval), else its
    default."""
    return make_task(name, {**declared_before(get_task_class(name).Options.model_fields), **options}, source)


def load_items(task: Task, source: str | None) -> list[Any]:
    """task.check_files() and task.load(), with errors that name no file of their own attributed to the config."""
    try:
        task.check_files()
        return task.load()
    except InputError as e:
        if e.file is None and source:
            raise InputError(e.detail, file=source, record=e.record, field=e.field) from None
        raise


def record_class(name: str) -> type[ItemRecord]:
    """The record type of a task's results files (a task this installation lacks: the generic fields only)."""
    return get_task_class(name).Record if name in task_names() else PlainRecord


def read_summary(path: str | Path) -> Summary:
    """summary.json, its runs' records typed by their tasks."""
    return Summary.read(path, record_class)
