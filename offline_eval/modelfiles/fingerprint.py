"""The store key's model part: the identity of the weights, the engine version and the load options.

Every weights file is hashed in full (sha256) once; the digest is cached by (path, size, mtime, inode, ctime), in
the run store and in this process, so a re-run does not read a 15 GB checkpoint again. ctime is there because a
tool can set a rewritten file's mtime back (os.utime) but not its ctime: an adapter rewritten in place is hashed
again. The price: a rename, chmod or chown of a checkpoint (which moves its ctime) reads it once more.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


class HashCache(Protocol):
    def file_hash(self, path: str, stat: os.stat_result) -> str | None: ...

    def put_file_hash(self, path: str, stat: os.stat_result, sha256: str) -> None: ...


_MEMO: dict[tuple[str, int, int, int, int], str] = {}


@dataclass(frozen=True)
class Pins:
    """What a rebuild from the store takes as claimed rather than recomputes: the engine versions a sweep ran
    (an auditor's machine may have others installed, and no engine runs in a rebuild), and a served model's
    store fingerprint (what its server reported then), by `served_key`."""

    versions: dict[str, str] = field(default_factory=dict)
    served: dict[str, str] = field(default_factory=dict)
    # the int4 kernel each load ran (its path -> engine_start.int4_kernel): the environment chose it then
    # (VLLM_CPU_INT4_W4A8), and an auditor's may differ
    int4: dict[str, str] = field(default_factory=dict)


PINS: ContextVar[Pins | None] = ContextVar("offline_eval_fingerprint_pins", default=None)


@contextmanager
def pinned(pins: Pins) -> Iterator[None]:
    token = PINS.set(pins)
    try:
        yield
    finally:
        PINS.reset(token)


def served_key(path: str | None, load_options: dict[str, object]) -> str:
    """A served load's identity as its provenance records it: the path and the load options."""
    return json.dumps([path, load_options], sort_keys=True, default=str)


def forget_hashes() -> None:
    """This process's digests dropped: the next file_sha256 of each file reads it again (an auditor's check)."""
    _MEMO.clear()


def file_sha256(path: Path, cache: HashCache | None = None) -> str:
    """The file's full sha256, read from disk only when (path, size, mtime, inode, ctime) is new."""
    real = str(path.resolve())
    st = path.stat()
    memo_key = (real, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
    digest = _MEMO.get(memo_key) or (cache.file_hash(real, st) if cache is not None else None)
    if digest is None:
        with path.open("rb") as fh:
            digest = hashlib.file_digest(fh, "sha256").hexdigest()
        if cache is not None:
            cache.put_file_hash(real, st, digest)
    _MEMO[memo_key] = digest
    return digest


def model_files(folder: Path) -> list[Path]:
    """Every file an engine can read under a model folder, symlinked subfolders followed (a folder reached
    twice, through a link loop or two links, is read once): sorted by the path under the folder."""
    out: list[Path] = []
    seen: set[str] = set()
    for top, dirs, names in os.walk(folder, followlinks=True):
        real = os.path.realpath(top)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs.sort()
        out += [Path(top, n) for n in names if Path(top, n).is_file()]
    return sorted(out, key=lambda f: f.relative_to(folder).as_posix())


# What an engine reads from a model or adapter folder: weights (safetensors, PyTorch, GGUF), configs and
# tokenizers (JSON, SentencePiece, tiktoken, merges and vocab text), chat templates, remote code and quantization
# recipes. Anything else there (a README, a licence, images, a sweep's output) changes no answer, so it is not
# part of the weights' identity: a model card edited in place regenerates nothing.
ENGINE_READS = frozenset(
    (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".json", ".model", ".tiktoken", ".txt", ".jinja", ".py",
     ".yaml", ".yml", ".msgpack", ".h5", ".npz")
)  # fmt: skip


def engine_reads(f: Path) -> bool:
    return not f.name.startswith(".") and f.suffix.lower() in ENGINE_READS


def files_fingerprint(path: str | os.PathLike[str], cache: HashCache | None = None) -> dict[str, str]:
    """name -> "size:sha256" for a file, or for every file an engine reads in a model folder (ENGINE_READS)."""
    p = Path(path)
    files = [f for f in model_files(p) if engine_reads(f)] if p.is_dir() else [p]
    out = {}
    for f in files:
        out[str(f.relative_to(p) if p.is_dir() else f.name)] = f"{f.stat().st_size}:{file_sha256(f, cache)}"
    return out
