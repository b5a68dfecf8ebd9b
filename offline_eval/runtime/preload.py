"""tcmalloc under vLLM on the CPU. vLLM asks for it in LD_PRELOAD "for best performance", and measured it is: on
Gemma 3 270M the whole process ran 0.87 of the time with it (start 0.87, phases 0.87; scripts/bench_preload.py,
docs/benchmarks.md), the answers the same; Intel OpenMP, which vLLM also asks for, gained nothing. A preload takes
effect only when a process starts, so the CLI runs its own command again with it, once, before any work, where a
vLLM load on the CPU is planned and the library is installed (Debian's libtcmalloc-minimal4; setup installs it where
it can). OFFLINE_EVAL_TCMALLOC=0 turns it off. The Python API runs in its caller's process and leaves it to them."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

ENV = "OFFLINE_EVAL_TCMALLOC"  # "0": never; "1": this process was started with it (or told not to try again)


def tcmalloc_loaded() -> bool:
    try:
        return "libtcmalloc" in Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def tcmalloc_library() -> str | None:
    """The library's name as the dynamic linker finds it (None: not installed)."""
    from ctypes.util import find_library

    return find_library("tcmalloc_minimal")


def installed(dist: str) -> bool:
    """Asked of the package metadata: importing an engine takes seconds."""
    try:
        distribution(dist)
    except PackageNotFoundError:
        return False
    return True


def rerun_for(argv: Sequence[str] | None, tcmalloc_with: Iterable[str]) -> None:
    """The CLI's command again with tcmalloc, where an engine it loads asks for it with a distribution installed here
    (Declared.tcmalloc_with: vLLM's CPU build; tcmalloc under the other engines is not measured). argv None: main()
    called inside another program, whose process is not ours to replace."""
    if argv is not None and any(installed(d) for d in tcmalloc_with):
        rerun_with_tcmalloc(argv)


def rerun_with_tcmalloc(argv: Sequence[str]) -> None:
    """Replace this process by `offline-eval ARGV` with tcmalloc preloaded. Returns (and the command goes on as it
    is) where it is loaded already, not installed, turned off, or was tried once."""
    if os.environ.get(ENV) is not None or not sys.platform.startswith("linux") or tcmalloc_loaded():
        return
    lib = tcmalloc_library()
    if lib is None:
        return
    given = os.environ.get("LD_PRELOAD", "").strip()
    env = {**os.environ, "LD_PRELOAD": f"{lib}:{given}" if given else lib, ENV: "1"}
    sys.stdout.flush()
    sys.stderr.flush()
    # -P: `-m` would put the working folder first on sys.path, and a yaml.py or offline_eval/ there would run.
    os.execve(sys.executable, [sys.executable, "-P", "-m", "offline_eval.cli", *argv], env)
