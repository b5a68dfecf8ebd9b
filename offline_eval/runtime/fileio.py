"""Atomic writes: a reader (or a crash) never sees half a results file."""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .errors import InputError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_TEMP = re.compile(r"^\..+\.offline-eval-(\d+)\.")


def temp_prefix(target: Path) -> str:
    """The name a temporary file or folder for `target` starts with: hidden, beside it, naming this process, so a
    later run can tell one a killed process left (remove_stale_temps) from one still being written."""
    return f".{target.name}.offline-eval-{os.getpid()}."


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _size(p: Path) -> int:
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file() and not f.is_symlink())


def remove_stale_temps(folder: Path) -> list[str]:
    """Removes the temporary files and folders (temp_prefix) that killed offline-eval processes left in `folder`
    (a SIGKILL runs no clean-up: gigabytes for a 7B model's quantized copy); one line for each. A temporary whose
    process still runs is left alone."""
    import shutil

    said = []
    for p in sorted(folder.iterdir()) if folder.is_dir() else []:
        m = _TEMP.match(p.name)
        if m is None or _alive(int(m.group(1))) or p.is_symlink():
            continue
        size = _size(p)
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
        said.append(f"removed {p} ({size / 2**20:,.1f} MiB), which a killed offline-eval (pid {m.group(1)}) left")
    return said


def _writable_at(p: Path) -> None:
    """A folder where the file goes, or a file where a folder must be, is one line naming it."""

    if p.is_dir():
        raise InputError("is a folder, where a file is written: move it away and re-run", file=str(p))
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError("is a file, where a folder is needed: move it away and re-run", file=str(parent))
            return


def write_text_atomic(path: str | Path, text: str) -> None:
    p = Path(path)
    _writable_at(p)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        # mkstemp creates 0600; the file must get the mode a plain open() would, so colleagues can read it.
        os.fchmod(fd, 0o666 & ~_umask())
        # A lone surrogate cannot be UTF-8: in JSON dumps() escapes it; in any other text it is written as its
        # \\u escape too, rather than losing the whole file to an encoding error.
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def json_safe(obj: Any) -> Any:
    """NaN and infinities become null: bare NaN is not JSON, and strict parsers reject the file."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(obj: Any, **kw: Any) -> str:
    """Strict JSON, UTF-8 text kept as it is; a lone surrogate (not a character, so not encodable as UTF-8) is
    written as its \\u escape, which reads back as the same string."""
    text = json.dumps(json_safe(obj), ensure_ascii=False, sort_keys=True, allow_nan=False, **kw)
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


# In a <script> element, "<!--", "<script" and "</script" switch the HTML parser's state whatever JavaScript
# thinks of the quotes around them; U+2028/9 end a line in older JavaScript. As escapes they are inert and
# read back as the same string.
_SCRIPT_UNSAFE = re.compile("[<>&\u2028\u2029\ud800-\udfff]")


def script_json(obj: Any) -> str:
    """JSON to inline in HTML (a <script> payload, or a .js file a page loads): every <, >, &, U+2028, U+2029
    and lone surrogate written as its \\u escape, so no text in the data can end the script or become markup."""
    text = json.dumps(json_safe(obj), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _SCRIPT_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def write_json_atomic(path: str | Path, obj: Any) -> None:
    write_text_atomic(path, dumps(obj, indent=2) + "\n")


def jsonl_text(rows: Iterable[dict[str, Any]]) -> str:
    """What a JSONL file of these rows holds, byte for byte once UTF-8 encoded."""
    return "".join(dumps(r) + "\n" for r in rows)


def write_jsonl_atomic(path: str | Path, rows: Iterable[dict[str, Any]]) -> None:
    write_text_atomic(path, jsonl_text(rows))
