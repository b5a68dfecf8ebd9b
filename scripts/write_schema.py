"""Write offline_eval/schemas/summary.schema.json from the typed summary (run after changing offline_eval/results/summary.py;
tests/test_summary.py fails while the shipped schema is out of date)."""

from __future__ import annotations

import json

from offline_eval.results.summary import SCHEMA_FILE, json_schema

if __name__ == "__main__":
    SCHEMA_FILE.write_text(json.dumps(json_schema(), indent=2, ensure_ascii=False, sort_keys=True) + "\n", "utf-8")
    print(f"wrote {SCHEMA_FILE}")
