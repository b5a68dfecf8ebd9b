"""Silencing native libraries' stderr outside --debug."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from .enginelog import capturing


@contextlib.contextmanager
def native_stderr_silenced() -> Iterator[None]:
    """Engines that print from C (llama.cpp) bypass Python's logging; keep their chatter for --debug only, or
    for the sweep's engines.log while one captures it."""

    if os.environ.get("OFFLINE_EVAL_DEBUG") or capturing():
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(devnull)
        os.close(saved)
