"""Finding precision on a labeled set: documents with their planted defects, as in tests/ja_texts/labels.json."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from .checks import check
from .contract import parse


def evaluate(labels_file: str | Path, root: str | Path) -> dict[str, Any]:
    """Run `check` on every labeled document. A finding is true when its (kind, location) is a planted defect
    of that document (each planted defect matches one finding). precision = true findings / all findings,
    recall = planted defects found / planted defects."""
    labels = {
        k: v for k, v in json.loads(Path(labels_file).read_text(encoding="utf-8")).items() if not k.startswith("_")
    }
    found = true = planted = 0
    false: list[str] = []
    missed: list[str] = []
    for rel, want in labels.items():
        findings = check(parse((Path(root) / rel).read_text(encoding="utf-8")))
        left = Counter((k, loc) for k, loc in want)
        planted += len(want)
        for f in findings:
            found += 1
            if left[(f.kind, f.location)] > 0:
                left[(f.kind, f.location)] -= 1
                true += 1
            else:
                false.append(f"{rel}: {f.location}: {f.kind}: {f.message}")
        missed += [f"{rel}: {loc}: {k}" for (k, loc), n in left.items() for _ in range(n)]
    return {
        "documents": len(labels),
        "findings": found,
        "true_findings": true,
        "planted": planted,
        "precision": true / found if found else 1.0,
        "recall": (planted - len(missed)) / planted if planted else 1.0,
        "false_findings": false,
        "missed": missed,
    }
