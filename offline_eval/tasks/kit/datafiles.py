"""Read dataset records from local files: JSONL, JSON, Parquet, or a `datasets` folder (save_to_disk).

Every record comes back with a label ("line 7", "row 3") so schema errors can name where they are.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from offline_eval.runtime.errors import InputError, is_url, missing, record_error

Record = tuple[str, dict[str, Any]]


class TaskItem(BaseModel):
    """One evaluation item, validated once where it is read and passed on typed to every stage: each task's item
    model subclasses it. Frozen, so no stage changes what the data said; columns it does not name are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str  # the item's id in its results files

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    def content(self) -> dict[str, Any]:
        """Every field as read, computed ones included: what the item's provenance digest hashes."""
        return self.model_dump()


ItemT = TypeVar("ItemT", bound=TaskItem)
M = TypeVar("M", bound=BaseModel)
_SUFFIXES = (".jsonl", ".json", ".parquet")
_read: ContextVar[list[str] | None] = ContextVar("offline_eval_data_read", default=None)


@contextmanager
def reading() -> Iterator[list[str]]:
    """Collects the paths of every data file (or folder) read inside it: the sweep's provenance hashes them."""
    token = _read.set([])
    try:
        yield _read.get()  # type: ignore[misc]
    finally:
        _read.reset(token)


def note(path: str | Path) -> None:
    """A file or folder a task reads, for the provenance of the setting that reads it."""
    seen = _read.get()
    if seen is not None and str(path) not in seen:
        seen.append(str(path))


def resolve_split(path: str | Path, split: str) -> Path | tuple[Path, str]:
    """A file as given, `{split}.jsonl|.json|.parquet` inside a folder, or (datasets folder, split)."""
    p = Path(path)
    if is_url(str(path)):
        raise InputError("URLs are refused; download the data yourself and give a local path", file=str(path))
    if why := missing(str(p)):
        raise InputError(f"data path {why}", file=str(path))
    if p.is_file():
        return p
    if (p / "dataset_dict.json").exists() or (p / "state.json").exists():
        return (p, split)
    for suf in _SUFFIXES:
        if (p / f"{split}{suf}").is_file():
            return p / f"{split}{suf}"
    raise InputError(
        f"no '{split}' split here: expected {split}.jsonl, {split}.parquet or a datasets folder", file=str(p)
    )


def has_split(path: str | Path, split: str) -> bool:
    try:
        target = resolve_split(path, split)
    except InputError:
        return False
    if isinstance(target, tuple):
        p = target[0]
        if (p / "dataset_dict.json").exists():
            return split in json.loads((p / "dataset_dict.json").read_text())["splits"]
        return True
    return True


def read_records(path: str | Path, split: str = "test") -> list[Record]:
    target = resolve_split(path, split)
    note(target[0] if isinstance(target, tuple) else target)
    if isinstance(target, tuple):
        records = list(_read_datasets(*target))
        where = str(target[0])
    elif target.suffix == ".parquet":
        records = list(_read_parquet(target))
        where = str(target)
    elif target.suffix == ".json":
        records = list(_read_json(target))
        where = str(target)
    else:
        records = list(_read_jsonl(target))
        where = str(target)
    if not records:
        raise InputError("no records (the file is empty)", file=where)
    for label, record in records:
        _check_text(record, where, label)
    return records


def read_items(
    path: str | Path, split: str, model: type[M], field_map: dict[str, str] | None = None, unique: str | None = "id"
) -> list[tuple[str, M]]:
    """Every record of a split validated as `model`, with its label ("line 7"). `field_map` (our name -> the file's)
    renames a copy's columns; `unique` names the field no two records may share. The first bad record is an error
    that names the file, the record (with its id where it has one) and the field, as the file names it."""
    fmap = field_map or {}
    file = str(path)
    out: list[tuple[str, M]] = []
    first: dict[str, str] = {}
    for where, raw in read_records(path, split):
        rec = {ours: raw[theirs] for ours, theirs in fmap.items() if theirs in raw}
        rec.update({k: v for k, v in raw.items() if k not in rec and k not in fmap.values()})
        label = f"{where} (id {rec['id']})" if rec.get("id") is not None else where
        try:
            item = model.model_validate(rec)
        except ValidationError as e:
            raise record_error(e, file, label, fmap) from None
        if unique is not None:
            key = str(getattr(item, unique))
            if key in first:
                raise InputError(
                    f"duplicate {unique} {key!r} (first in {first[key]})",
                    file=file,
                    record=label,
                    field=fmap.get(unique, unique),
                )
            first[key] = where
        out.append((label, item))
    return out


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_text(value: Any, file: str, record: str, field: str = "") -> None:
    """Every string in a record is text: a lone surrogate (an escape like \\ud800 with no partner) is not a
    character, and no prompt, store or report could hold it."""
    if isinstance(value, str):
        if m := _LONE_SURROGATE.search(value):
            raise InputError(
                f"holds a lone surrogate (\\u{ord(m.group()):04x} at character {m.start()}), which is not a "
                f"character: fix the escape in the file",
                file=file,
                record=record,
                field=field or None,
            )
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_text(v, file, record, f"{field}.{k}" if field else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_text(v, file, record, f"{field}.{i}" if field else str(i))


def read_table(path: str | Path) -> list[Record]:
    """Rows of a .csv (a header row, then one record per row; quoted cells may span lines) or of a JSONL
    file (one object per line, split on "\\n" only), as written by a spreadsheet or `offline-eval annotate`."""
    p = Path(path)
    if p.suffix.lower() != ".csv":
        return list(_read_jsonl(p))
    text = read_text(p)
    try:
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
    except csv.Error as e:
        raise InputError(f"malformed CSV ({e})", file=str(p)) from None
    return [(f"row {i}", {_unescape(k): _unescape(v) for k, v in r.items()}) for i, r in enumerate(rows, 2)]


def _unescape(v: Any) -> Any:
    return unescape_cell(v) if isinstance(v, str) else v


# OWASP's CSV injection rule: a cell starting with one of these is evaluated by a spreadsheet. The annotation page
# writes such a cell with a leading ', as it does one that already starts with 's before one of them, so that
# reading strips exactly one.
_FORMULA = re.compile(r"'*[=+\-@\t\r]")


def escape_cell(text: str) -> str:
    return "'" + text if _FORMULA.match(text) else text


def unescape_cell(text: str) -> str:
    return text[1:] if text.startswith("'") and _FORMULA.match(text, 1) else text


_JAPANESE = re.compile("[\u3040-\u30ff\u4e00-\u9fff]")
_NOT_CP932 = re.compile("[\x80-\x9f\ue000-\uf8ff]")  # what cp932 decodes from bytes no Japanese text has


def read_text(path: str | Path) -> str:
    """A text file as UTF-8, with or without a byte order mark. One in cp932 (what Japanese Excel writes as
    "CSV") is refused with the command that converts it, naming the line of the first byte that is not UTF-8."""
    p = Path(path)
    raw = p.read_bytes()
    raw = raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = "line {}".format(raw.count(b"\n", 0, e.start) + 1)
        try:
            as_cp932 = raw.decode("cp932")
        except UnicodeDecodeError:
            as_cp932 = ""
        if not _JAPANESE.search(as_cp932) or _NOT_CP932.search(as_cp932):
            raise InputError(
                f"not UTF-8 text (byte 0x{raw[e.start]:02x}): save it as UTF-8", file=str(p), record=line
            ) from None
        import shlex

        fixed = p.with_name(f"{p.stem}.utf8{p.suffix}")
        raise InputError(
            'not UTF-8 but cp932 (Japanese Excel\'s "CSV"; save as "CSV UTF-8" instead), convert it with: '
            f"iconv -f CP932 -t UTF-8 {shlex.quote(str(p))} > {shlex.quote(str(fixed))}",
            file=str(p),
            record=line,
        ) from None


def _read_jsonl(p: Path) -> Iterator[Record]:
    with p.open("rb") as fh:
        for n, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8-sig" if n == 1 else "utf-8")
            except UnicodeDecodeError:
                read_text(p)  # names the first line that is not UTF-8, and the fix of a cp932 file
                raise InputError("not UTF-8 text", file=str(p), record=f"line {n}") from None
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(
                    f"malformed JSON ({e.msg} at column {e.colno})", file=str(p), record=f"line {n}"
                ) from None
            if not isinstance(obj, dict):
                raise InputError("expected a JSON object", file=str(p), record=f"line {n}")
            yield f"line {n}", obj


def _read_json(p: Path) -> Iterator[Record]:
    try:
        data = json.loads(p.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", file=str(p)) from None
    except json.JSONDecodeError as e:
        raise InputError(f"malformed JSON ({e.msg})", file=str(p), record=f"line {e.lineno}") from None
    if isinstance(data, dict):
        data = next((v for v in data.values() if isinstance(v, list)), [data])
    if not isinstance(data, list):
        raise InputError("expected a JSON list of objects", file=str(p))
    for n, obj in enumerate(data, 1):
        if not isinstance(obj, dict):
            raise InputError("expected a JSON object", file=str(p), record=n)
        yield f"record {n}", obj


def _read_parquet(p: Path) -> Iterator[Record]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError("reading Parquet needs pyarrow: pip install 'offline-eval[data]'", file=str(p)) from None
    try:
        table = pq.read_table(p)
    except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise InputError(f"not a readable Parquet file ({e})", file=str(p)) from None
    for n, row in enumerate(table.to_pylist()):
        yield f"row {n}", row


def _read_datasets(p: Path, split: str) -> Iterator[Record]:
    try:
        from datasets import Dataset, DatasetDict, load_from_disk
    except ImportError:
        raise InputError(
            "reading a datasets folder needs datasets: pip install 'offline-eval[data]'", file=str(p)
        ) from None
    try:
        ds = load_from_disk(str(p))
    except Exception as e:  # noqa: BLE001
        raise InputError(f"not a readable datasets folder ({e})", file=str(p)) from None
    if isinstance(ds, DatasetDict):
        if split not in ds:
            raise InputError(f"no '{split}' split (has: {', '.join(ds)})", file=str(p))
        ds = ds[split]
    assert isinstance(ds, Dataset)
    for n, row in enumerate(ds):
        yield f"{split} row {n}", dict(row)
