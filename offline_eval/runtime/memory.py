"""Peak resident memory of this process and its children (vLLM's engine runs in a child), sampled."""

from __future__ import annotations

import threading
from pathlib import Path

import psutil


def tree_rss() -> int:
    """Bytes resident in this process and all its descendants now."""
    me = psutil.Process()
    total = me.memory_info().rss
    for child in me.children(recursive=True):
        try:
            total += child.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


class PeakMemory:
    """Samples tree_rss() every `interval` seconds while in use; .peak is the largest value seen."""

    def __init__(self, interval: float = 0.25) -> None:
        self.interval, self.peak = interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss())
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakMemory:
        self.peak = tree_rss()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, tree_rss())


def weights_bytes(path: str) -> int:
    """Size on disk of a model's weights (a GGUF file, or the safetensors/bin files of a folder)."""
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    return sum(
        f.stat().st_size for f in p.rglob("*") if f.is_file() and f.suffix in (".safetensors", ".bin", ".gguf", ".pt")
    )
