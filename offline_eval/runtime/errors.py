"""User-facing errors: one line that names the file, the record and the field."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class OfflineEvalError(Exception):
    """An error the CLI prints as one line (no traceback) before exiting non-zero."""

    exit_code = 2


class SweepFailed(OfflineEvalError):
    """offline_eval.sweep(..., check=True): runs or evaluators failed; the message lists each with its reason."""

    exit_code = 1


class CallbackError(BaseException):
    """An exception from the user's own callback (the API's `log=`), carried past every guard that turns an
    engine's exception into a failed run (they catch Exception) and raised again as itself."""

    def __init__(self, original: Exception) -> None:
        super().__init__(original)
        self.original = original


class InputError(OfflineEvalError):
    """Bad user input: a data file, a config, a path."""

    def __init__(
        self, message: str, *, file: str | None = None, record: str | int | None = None, field: str | None = None
    ) -> None:
        self.file, self.record, self.field, self.detail = file, record, field, message
        where = []
        if file is not None:
            where.append(str(file))
        if record is not None:
            where.append(
                f"record {record}"
                if not isinstance(record, str) or not record.startswith(("line ", "record "))
                else record
            )
        if field is not None:
            where.append(f"field '{field}'")
        super().__init__(f"{': '.join([', '.join(where)] if where else [])}{': ' if where else ''}{message}")


class EngineError(OfflineEvalError):
    """An engine failed on a request (a refused grammar, an error inside generation): that run fails, the
    sweep goes on."""

    exit_code = 1


class PartialFailure(EngineError):
    """An engine failed part-way through a call: `done` holds the answers it gave (by position in the call),
    which the runner stores before the run fails, so a re-run sends only the rest."""

    def __init__(self, message: str, done: dict[int, object]) -> None:
        super().__init__(message)
        self.done = done


class MissingExtraError(OfflineEvalError):
    def __init__(self, extra: str, module: str, kind: str = "engine") -> None:
        super().__init__(f"the '{module}' {kind} is not installed: pip install 'offline-eval[{extra}]'")


def first_line(e: BaseException, limit: int | None = None) -> str:
    """An exception's message as one line: its first non-empty line (engines and libraries write pages)."""
    line = next((x.strip() for x in str(e).splitlines() if x.strip()), "")
    return line[:limit] if limit else line


def described(e: BaseException, limit: int | None = None) -> str:
    """ "TypeName: first line", for an exception we did not raise ourselves."""
    return f"{type(e).__name__}: {first_line(e, limit)}"


def missing(path: str) -> str | None:
    """Why a local path cannot be used, in a few words ("does not exist", a symbolic link that resolves to
    nothing or loops); None when it exists."""
    import os

    if os.path.exists(path):
        return None
    if os.path.lexists(path):
        try:
            os.path.realpath(path, strict=True)
        except OSError as e:
            if e.errno == 40:  # ELOOP
                return "is a symbolic link that loops"
        return "is a symbolic link to something that does not exist"
    return "does not exist"


def is_url(path: str) -> bool:
    p = str(path).strip().lower()
    return "://" in p or p.startswith(("hf:", "s3:", "gs:", "www."))


def record_error(e: ValidationError, file: str, record: str, rename: dict[str, str] | None = None) -> InputError:
    """A data record's first schema error as one line naming the file, the record and the field (by the file's own
    name where a field map renamed it): "missing", the validator's own words, or pydantic's with the value."""
    err = e.errors()[0]
    field = ".".join(str(x) for x in err["loc"])
    if err["type"] == "missing":
        msg = "missing"
    elif err["type"] == "value_error":
        msg = str(err["ctx"]["error"])
    else:
        msg = f"{err['msg']}, got {err['input']!r}"
    return InputError(msg[:300], file=file, record=record, field=(rename or {}).get(field, field))


def format_validation_error(e: ValidationError, file: str | None, prefix: str = "") -> InputError:
    """A pydantic error as one line naming the file and the field (the first of them, and how many more)."""
    err = e.errors()[0]
    parts = list(err["loc"])
    if err["type"] == "engine_option":  # an engine's own key: name it where the user wrote it
        parts = [p for p in parts if p != "engine_options"] + [err["ctx"]["key"]]
    loc = ".".join(str(p) for p in (prefix.split(".") if prefix else []) + parts)
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown key (check the spelling; see docs/configuration.md)"
    more = f" (and {len(e.errors()) - 1} more)" if len(e.errors()) > 1 else ""
    return InputError(msg + more, file=file, field=loc or None)
