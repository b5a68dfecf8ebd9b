"""What identifying the weights by their full sha256 costs: the first hash of a checkpoint, and every later
run, which finds the digest in the store by (path, size, mtime, inode).

    .venv/bin/python scripts/bench_fingerprint.py [--gb 2]

The file is written, synced and dropped from the page cache (posix_fadvise DONTNEED), so the first hash
reads from disk, as on a user's first run.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from offline_eval.inference.store import Store
from offline_eval.modelfiles import fingerprint as fp


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", type=float, default=2.0, help="size of the fake checkpoint")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=Path(__file__).resolve().parent.parent) as tmp:
        f = Path(tmp) / "weights.safetensors"
        block = os.urandom(64 << 20)
        size = int(a.gb * (1 << 30))
        with f.open("wb") as fh:
            for _ in range(size // len(block)):
                fh.write(block)
            fh.flush()
            os.fsync(fh.fileno())
            os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        mb = f.stat().st_size / 2**20
        store = Store(Path(tmp) / "store.sqlite")
        t0 = time.perf_counter()
        fp.files_fingerprint(f, store)
        first = time.perf_counter() - t0
        fp._MEMO.clear()  # a new process: only the store remembers
        t0 = time.perf_counter()
        for _ in range(100):
            fp._MEMO.clear()
            fp.files_fingerprint(f, store)
        again = (time.perf_counter() - t0) / 100
        store.close()
    print(
        f"first hash of {mb:.0f} MiB: {first:.2f} s ({mb / first:.0f} MiB/s; a 15 GB checkpoint: "
        f"~{15 * 1024 / (mb / first):.0f} s, once)"
    )
    print(f"later runs (digest from the store): {again * 1000:.2f} ms")
    print(f"first/later ratio: {first / again:.0f}x")


if __name__ == "__main__":
    main()
