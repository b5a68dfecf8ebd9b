"""The run store: one SQLite file (WAL) per output folder, keyed by hash(model fingerprint, request): what the engine
computes, not what the run is called (a store written before 2026-12-05 is read under its older keys too).

Rows are written in chunks as the engine returns them, and each chunk is one committed transaction, so a
killed run loses at most the chunk in flight and a re-run regenerates nothing that is stored. Only answers are
stored: a row whose finish reason says the server did not answer is neither written nor served.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from offline_eval.runtime.errors import OfflineEvalError

from .requests import Result

T = TypeVar("T")
NOT_ANSWERS = ("error",)  # finish reasons of what a server did not answer: never stored, never served

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
    focused INTEGER NOT NULL DEFAULT 0,
    reasoning TEXT
);
CREATE TABLE IF NOT EXISTS file_hashes (
    path TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    inode INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    ctime_ns INTEGER
);
"""


class Row(NamedTuple):
    """One engine output as the store keeps it."""

    key: str
    fingerprint: str  # the model's (weights, engine version, load options)
    variant: str
    request: str  # the request as JSON
    result: Result


class StoreError(OfflineEvalError):
    """The store file cannot be used; the message names it and says what to do."""


def _is_busy(e: sqlite3.OperationalError) -> bool:
    return "locked" in str(e) or "busy" in str(e)


def _read_only(path: Path, e: sqlite3.DatabaseError) -> str | None:
    """What to say when the store cannot be written (None: that is not the problem): never --fresh, which would
    throw a healthy cache away."""
    folder = path.parent
    if "readonly" in str(e) or (path.exists() and not os.access(path, os.W_OK)) or not os.access(folder, os.W_OK):
        return (
            f"{path}: the store is read-only for this user ({e}): its outputs are fine, but this sweep cannot add "
            f"to it; make {path.name} and its folder writable, or give --out a folder you can write"
        )
    return None


def _reasoning_json(r: Result) -> str | None:
    """A served reply's thinking, which its server returned apart from the answer, and the generated token ids a
    later phase continues from (None: neither)."""
    d: dict[str, Any] = {}
    if r.reasoning is not None:
        d.update(text=r.reasoning, tokens=r.reasoning_tokens, cut=r.reasoning_cut)
    if r.token_ids is not None:
        d["ids"] = list(r.token_ids)
    return json.dumps(d, ensure_ascii=False) if d else None


def _reasoning(stored: str | None) -> dict[str, Any]:
    if not stored:
        return {}
    d = json.loads(stored)
    out: dict[str, Any] = {}
    if "text" in d:
        out.update(reasoning=d["text"], reasoning_tokens=d["tokens"], reasoning_cut=d["cut"])
    if "ids" in d:
        out["token_ids"] = tuple(d["ids"])
    return out


class Store:
    def __init__(
        self,
        path: str | Path,
        *,
        move_aside_if_corrupt: bool = False,
        log: Callable[[str], None] | None = None,
        read_only: bool = False,
    ) -> None:
        """`read_only`: what an auditor opens: nothing is written, and no cached file digest is trusted (every
        file is hashed again)."""
        self.path = Path(path)
        self.read_only = read_only
        if read_only:
            if not self.path.is_file():
                raise StoreError(f"{self.path}: no store here: nothing to rebuild the outputs from")
            try:
                self.db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=60)
                self.db.execute("SELECT COUNT(*) FROM outputs WHERE key = ''").fetchone()
            except sqlite3.DatabaseError as e:
                raise StoreError(f"{self.path}: the store is unreadable ({e})") from None
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = self._open()
        except sqlite3.DatabaseError as e:
            if isinstance(e, sqlite3.OperationalError) and _is_busy(e):
                raise StoreError(f"{self.path}: the store stayed locked by another process for 60 s ({e})") from None
            if why := _read_only(self.path, e):
                raise StoreError(why) from None
            if not move_aside_if_corrupt:
                raise StoreError(
                    f"{self.path}: the store is unreadable ({e}); move it aside (or re-run with "
                    f"--fresh, which moves it to {self.path.name}.corrupt-<time>) and re-run"
                ) from None
            aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
            for suffix in ("", "-wal", "-shm"):
                src = Path(str(self.path) + suffix)
                if src.exists():
                    os.replace(src, Path(str(aside) + suffix))
            if log:
                log(f"{self.path}: unreadable store ({e}); moved it to {aside} and started a new one")
            self.db = self._open()

    def _open(self) -> sqlite3.Connection:
        # The busy timeout does not cover switching the journal mode, so two processes creating one store at
        # once can see "database is locked" there: retry the whole set-up until the timeout.
        deadline = time.monotonic() + 60
        delay = 0.01
        while True:
            db = sqlite3.connect(str(self.path), timeout=60)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.executescript(_SCHEMA)
                columns = {r[1] for r in db.execute("PRAGMA table_info(outputs)")}
                if "focused" not in columns:  # a 0.1 store
                    db.execute("ALTER TABLE outputs ADD COLUMN focused INTEGER NOT NULL DEFAULT 0")
                if "reasoning" not in columns:  # a store from before reasoning models
                    db.execute("ALTER TABLE outputs ADD COLUMN reasoning TEXT")
                if "ctime_ns" not in {r[1] for r in db.execute("PRAGMA table_info(file_hashes)")}:
                    db.execute("ALTER TABLE file_hashes ADD COLUMN ctime_ns INTEGER")  # NULL: hashed again once
                db.commit()
                db.execute("SELECT COUNT(*) FROM outputs WHERE key = ''").fetchone()
                return db
            except sqlite3.OperationalError as e:
                db.close()
                if not _is_busy(e) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
            except BaseException:
                db.close()
                raise

    def _guard(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except sqlite3.DatabaseError as e:
            if why := _read_only(self.path, e):
                raise StoreError(why) from None
            raise StoreError(
                f"{self.path}: store error ({e}); if the file is damaged, move it aside (or re-run "
                f"with --fresh) and re-run"
            ) from None

    def get_many(self, keys: Sequence[str]) -> dict[str, Result]:
        return self._guard(lambda: self._get_many(keys))

    def _get_many(self, keys: Sequence[str]) -> dict[str, Result]:
        found: dict[str, Result] = {}
        for i in range(0, len(keys), 500):
            part = list(keys[i : i + 500])
            q = (
                f"SELECT key, text, finish_reason, prompt_tokens, output_tokens, latency_s, logprobs, focused, "
                f"{self._reasoning_column} FROM outputs WHERE key IN ({','.join('?' * len(part))})"
            )
            for k, text, fin, pt, ot, lat, lp, foc, th in self.db.execute(q, part):
                if fin in NOT_ANSWERS:  # an older version stored refusals: never an answer, asked again
                    continue
                found[k] = Result(
                    text=text,
                    finish_reason=fin,
                    prompt_tokens=pt,
                    output_tokens=ot,
                    latency_s=lat,
                    logprobs=json.loads(lp) if lp else None,
                    focused=bool(foc),
                    **_reasoning(th),
                )
        return found

    @property
    def _reasoning_column(self) -> str:
        """The reasoning column, or NULL in a read-only store from before it (nothing there thought)."""
        if "_has_reasoning" not in self.__dict__:
            self._has_reasoning = "reasoning" in {r[1] for r in self.db.execute("PRAGMA table_info(outputs)")}
        return "reasoning" if self._has_reasoning else "NULL"

    def rekey(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Move each output from an older key to its key today, (old, new) pairs, so the older key serves it no
        more (a later change to what keys it would otherwise still find it). A read-only store is left as it is."""
        if self.read_only or not pairs:
            return

        def move() -> None:
            with self.db:
                self.db.executemany("UPDATE OR IGNORE outputs SET key = ? WHERE key = ?", [(n, o) for o, n in pairs])
                self.db.executemany("DELETE FROM outputs WHERE key = ?", [(o,) for o, _ in pairs])

        self._guard(move)

    def put_many(self, rows: Iterable[Row]) -> None:
        """Every row in one transaction."""
        self._guard(lambda: self._put_many(list(rows)))

    def _put_many(self, rows: list[Row]) -> None:
        if self.read_only:
            raise StoreError(f"{self.path}: opened read-only: nothing may be added to it here")
        now = time.time()
        rows = [row for row in rows if row.result.finish_reason not in NOT_ANSWERS]
        with self.db:
            self.db.executemany(
                "INSERT OR REPLACE INTO outputs (key, model, variant, request, text, finish_reason, prompt_tokens, "
                "output_tokens, latency_s, logprobs, created, focused, reasoning) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [
                    (
                        k,
                        m,
                        v,
                        req,
                        r.text,
                        r.finish_reason,
                        r.prompt_tokens,
                        r.output_tokens,
                        r.latency_s,
                        json.dumps(r.logprobs) if r.logprobs is not None else None,
                        now,
                        int(r.focused),
                        _reasoning_json(r),
                    )
                    for k, m, v, req, r in rows
                ],
            )

    def count(self) -> int:
        return int(self._guard(lambda: self.db.execute("SELECT COUNT(*) FROM outputs").fetchone()[0]))

    def file_hash(self, path: str, stat: os.stat_result) -> str | None:
        """The stored sha256 of a file, if its path, size, mtime, inode and ctime are unchanged since it was hashed
        (ctime: a rewrite in place whose mtime was set back still moves it)."""
        if self.read_only:
            return None
        row = self._guard(
            lambda: self.db.execute(
                "SELECT sha256 FROM file_hashes WHERE path = ? AND size = ? AND mtime_ns = ? AND inode = ? "
                "AND ctime_ns = ?",
                (path, stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_ctime_ns),
            ).fetchone()
        )
        return row[0] if row else None

    def put_file_hash(self, path: str, stat: os.stat_result, sha256: str) -> None:
        if self.read_only:
            return

        def put() -> Any:
            with self.db:
                self.db.execute(
                    "INSERT OR REPLACE INTO file_hashes (path, size, mtime_ns, inode, sha256, ctime_ns) "
                    "VALUES (?,?,?,?,?,?)",
                    (path, stat.st_size, stat.st_mtime_ns, stat.st_ino, sha256, stat.st_ctime_ns),
                )

        self._guard(put)

    def close(self) -> None:
        self.db.close()
