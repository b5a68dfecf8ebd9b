"""Library noise goes to a log file in the output folder; offline-eval's own lines go to the terminal.

Engines write hundreds of lines a sweep (torchao's failed kernel loads, torch's deprecations, vLLM's oneDNN
fallbacks, NUMA binding, llama.cpp's load report), from Python, from C and from their own child processes.
While a sweep runs, file descriptor 2 of the process points at OUT/engines.log, so all of it lands there, child
processes included; offline-eval's own progress and lines are written to the terminal that fd 2 was before.
With -v (or --debug) nothing is redirected. When a load fails, what the engine wrote while loading is shown.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import IO, Any

_active: EngineLog | None = None
TAIL_LINES = 15


def terminal() -> IO[str]:
    """Where offline-eval's own output goes: the terminal, also while the engines' output is redirected."""
    return _active.terminal if _active is not None else sys.stderr


def capturing() -> bool:
    return _active is not None


class EngineLog:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.terminal: IO[str] = sys.stderr
        self._saved: int | None = None

    def __enter__(self) -> EngineLog:
        global _active
        self.path.parent.mkdir(parents=True, exist_ok=True)
        sys.stdout.flush()
        sys.stderr.flush()
        self._saved = os.dup(2)
        self.terminal = os.fdopen(os.dup(self._saved), "w", buffering=1, encoding="utf-8", errors="backslashreplace")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
        os.dup2(fd, 2)
        os.close(fd)
        _active = self
        return self

    def __exit__(self, *exc: Any) -> None:
        global _active
        _active = None
        sys.stderr.flush()
        if self._saved is not None:
            os.dup2(self._saved, 2)
            os.close(self._saved)
            self._saved = None
        self.terminal.close()

    def say(self, msg: str) -> None:
        print(msg, file=self.terminal, flush=True)

    def offset(self) -> int:
        sys.stderr.flush()
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def since(self, offset: int, lines: int = TAIL_LINES) -> str:
        """The last lines the engines wrote after `offset` (what a failed load said about itself)."""
        sys.stderr.flush()
        try:
            with self.path.open("rb") as fh:
                fh.seek(offset)
                text = fh.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        kept = [line for line in text.split("\n") if line.strip()][-lines:]
        return "\n".join(kept)
