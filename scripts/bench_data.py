"""JBE-QA-shaped items for the benchmarks: the sample data's questions repeated to N distinct items."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def jbeqa_items(n: int, folder: Path, extend: Callable[[dict[str, Any]], None] | None = None) -> Path:
    """`folder`/test.jsonl with `n` items (each question made unique), train.jsonl as shipped; `extend` adds fields
    to each item before it is written."""
    base = [json.loads(x) for x in (ROOT / "data/jbeqa/test.jsonl").read_text(encoding="utf-8").splitlines()]
    with (folder / "test.jsonl").open("w", encoding="utf-8") as fh:
        for i in range(n):
            r = dict(base[i % len(base)], id=f"b{i:05d}")
            r["question"] = f"{r['question']}（設例{i}）"
            if extend:
                extend(r)
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    (folder / "train.jsonl").write_text((ROOT / "data/jbeqa/train.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    return folder
