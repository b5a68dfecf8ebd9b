"""The store key's model part: the identity of the weights, the engine version and the load options.

Every weights file is hashed in full (sha256) once; the digest is cached by (path, size, mtime, inode), in
the run store and in this process, so a re-run does not read a 15 GB checkpoint again.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .spec import LoadSpec


class HashCache(Protocol):
    def file_hash(self, path: str, stat: os.stat_result) -> str | None: ...

    def put_file_hash(self, path: str, stat: os.stat_result, sha256: str) -> None: ...


_MEMO: dict[tuple[str, int, int, int], str] = {}


def engine_version(backend: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    from .registry import get_engine

    for dist in get_engine(backend).dists:
        try:
            return f"{dist}=={version(dist)}"
        except PackageNotFoundError:
            continue
    return "unknown"


def file_sha256(path: Path, cache: HashCache | None = None) -> str:
    """The file's full sha256, read from disk only when (path, size, mtime, inode) is new."""
    real = str(path.resolve())
    st = path.stat()
    memo_key = (real, st.st_size, st.st_mtime_ns, st.st_ino)
    digest = _MEMO.get(memo_key) or (cache.file_hash(real, st) if cache is not None else None)
    if digest is None:
        with path.open("rb") as fh:
            digest = hashlib.file_digest(fh, "sha256").hexdigest()
        if cache is not None:
            cache.put_file_hash(real, st, digest)
    _MEMO[memo_key] = digest
    return digest


def files_fingerprint(path: str | os.PathLike[str], cache: HashCache | None = None) -> dict[str, str]:
    """name -> "size:sha256" for a file, or for every file in a model folder."""
    p = Path(path)
    files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    out = {}
    for f in files:
        if f.name.startswith(".") or f.suffix in (".lock", ".pyc"):
            continue
        out[str(f.relative_to(p) if p.is_dir() else f.name)] = f"{f.stat().st_size}:{file_sha256(f, cache)}"
    return out


def spec_fingerprint(spec: LoadSpec, cache: HashCache | None = None) -> str:
    """Identity of weights + engine version + output-affecting load options. Computed without loading the
    engine, so a fully stored run never starts one."""
    from .registry import get_engine

    opts = {
        k: v
        for k, v in spec.describe().items()
        if k not in ("path", "threads", "batch_size", "gpu_memory_utilization", "variant", "engine_options")
    }
    cls = get_engine(spec.backend).declared_class()
    identity = cls.weights_identity(spec, cache)
    if cls.load_defaults:  # the engine's own defaults count as if the user had written them
        opts["engine_args"] = {**cls.load_defaults, **spec.engine_args}
    blob = json.dumps(
        {**identity, "engine": spec.backend, "engine_version": engine_version(spec.backend), "opts": opts},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:32]
