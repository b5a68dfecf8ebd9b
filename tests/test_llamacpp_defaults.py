"""llama.cpp's load defaults where llama-cpp-python's differ: one thread per physical core the process may use
(llama-cpp-python's default, half the logical CPUs, leaves half of a machine without hardware threads idle), and
flash attention on (as llama.cpp's own tools), which is part of the store key."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from conftest import spec_for

from offline_eval.inference.backends.llamacpp.backend import physical_cores


def test_physical_cores_agree_with_lscpu() -> None:
    if shutil.which("lscpu") is None:
        pytest.skip("no lscpu here to compare with")
    allowed = os.sched_getaffinity(0)
    lines = subprocess.run(["lscpu", "-p=CPU,CORE,SOCKET"], capture_output=True, text=True, check=True).stdout
    cores = {
        (sock, core)
        for cpu, core, sock in (ln.split(",") for ln in lines.splitlines() if ln and ln[0] != "#")
        if int(cpu) in allowed
    }
    assert physical_cores() == len(cores)


def test_the_engine_uses_them_unless_threads_is_set(tiny):  # type: ignore[no-untyped-def]
    from offline_eval.inference.backends.registry import load_backend

    for threads, expected in ((None, physical_cores()), (1, 1)):
        b = load_backend(spec_for("llamacpp", tiny, threads=threads))
        try:
            assert b.llm.n_threads == expected  # type: ignore[attr-defined]
        finally:
            b.close()


def test_flash_attention_is_on_by_default_and_keyed(tiny):  # type: ignore[no-untyped-def]
    import llama_cpp

    from offline_eval.inference.backends.registry import load_backend, spec_fingerprint

    keys = {}
    for args in ({}, {"flash_attn": True}, {"flash_attn": False}):
        spec = spec_for("llamacpp", tiny, engine_args=args)
        keys[str(args)] = spec_fingerprint(spec)
        b = load_backend(spec)
        try:
            on = b.llm.context_params.flash_attn_type == llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED  # type: ignore[attr-defined]
            assert on is args.get("flash_attn", True)
        finally:
            b.close()
    assert keys["{}"] == keys["{'flash_attn': True}"] != keys["{'flash_attn': False}"]
