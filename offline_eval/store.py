"""The run store: one SQLite file (WAL) per output folder, keyed by hash(model, variant, request).

Rows are written in chunks as the engine returns them, and each chunk is one committed transaction, so a
killed run loses at most the chunk in flight and a re-run regenerates nothing that is stored.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Iterable, Sequence

from .requests import Result

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outputs (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    variant TEXT NOT NULL,
    request TEXT NOT NULL,
    text TEXT NOT NULL,
    finish_reason TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    latency_s REAL NOT NULL,
    logprobs TEXT,
    created REAL NOT NULL,
    focused INTEGER NOT NULL DEFAULT 0
);
"""


class Store:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(self.path), timeout=60)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_SCHEMA)
        if "focused" not in {r[1] for r in self.db.execute("PRAGMA table_info(outputs)")}:  # a store from 0.1
            self.db.execute("ALTER TABLE outputs ADD COLUMN focused INTEGER NOT NULL DEFAULT 0")
        self.db.commit()

    def get_many(self, keys: Sequence[str]) -> dict[str, Result]:
        found: dict[str, Result] = {}
        for i in range(0, len(keys), 500):
            part = list(keys[i:i + 500])
            q = ("SELECT key, text, finish_reason, prompt_tokens, output_tokens, latency_s, logprobs, focused "
                 f"FROM outputs WHERE key IN ({','.join('?' * len(part))})")
            for k, text, fin, pt, ot, lat, lp, foc in self.db.execute(q, part):
                found[k] = Result(text=text, finish_reason=fin, prompt_tokens=pt, output_tokens=ot, latency_s=lat,
                                  logprobs=json.loads(lp) if lp else None, focused=bool(foc))
        return found

    def put_many(self, rows: Iterable[tuple[str, str, str, str, Result]]) -> None:
        """rows: (key, model fingerprint, variant, request json, result); one transaction."""
        now = time.time()
        with self.db:
            self.db.executemany(
                "INSERT OR REPLACE INTO outputs (key, model, variant, request, text, finish_reason, prompt_tokens, "
                "output_tokens, latency_s, logprobs, created, focused) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                [(k, m, v, req, r.text, r.finish_reason, r.prompt_tokens, r.output_tokens, r.latency_s,
                  json.dumps(r.logprobs) if r.logprobs is not None else None, now, int(r.focused))
                 for k, m, v, req, r in rows])

    def count(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM outputs").fetchone()[0])

    def close(self) -> None:
        self.db.close()
