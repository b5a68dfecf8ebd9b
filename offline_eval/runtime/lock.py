"""One sweep at a time per output folder.

`OUT/.offline-eval.lock` is held with flock(2) for the whole sweep and names the holder's PID and host. The
kernel drops the lock when the holder exits, however it exits, so a lock can never go stale on this host.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from types import TracebackType

from .errors import OfflineEvalError

LOCK_NAME = ".offline-eval.lock"


class FolderBusyError(OfflineEvalError):
    exit_code = 1


class OutputLock:
    def __init__(self, out: str | Path) -> None:
        self.path = Path(out) / LOCK_NAME
        self._fd: int | None = None

    def __enter__(self) -> OutputLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe(fd)
            os.close(fd)
            raise FolderBusyError(
                f"{self.path.parent}: another sweep is writing into this folder ({holder}); "
                f"wait for it to finish, or use another --out"
            ) from None
        os.ftruncate(fd, 0)
        os.write(
            fd,
            json.dumps(
                {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
            ).encode(),
        )
        self._fd = fd
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def holder(out: str | Path) -> str | None:
    """Who is sweeping into this folder now (None: nobody), without taking the lock from them."""
    path = Path(out) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _describe(fd)
    finally:
        os.close(fd)  # closing drops the shared lock we may have taken
    return None


def _describe(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"PID {info['pid']} on {info['host']}, since {info['started']}"
    except (ValueError, KeyError, OSError):
        return "its PID is not recorded yet"
