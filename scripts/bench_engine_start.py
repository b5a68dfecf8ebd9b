#!/usr/bin/env python
"""vLLM's engine start with and without its compile cache, side by side in one run.

    .venv/bin/python scripts/bench_engine_start.py [--model models/gemma-3-270m/hf] [--max-model-len 4096] [--quick]

Each start is a fresh process, as a new sweep is: vLLM as it starts by default (its AOT compile cache, which never
loads on vLLM 0.32's CPU build, so every start compiles again, and its engine-core and worker processes) and as
offline-eval starts it (the AOT compile cache made to load, in a known folder, the engine core in this process, the
model compiled piecewise), each twice over an empty cache folder: the first start compiles, the second may reuse;
then offline-eval's start compiling the model as one graph (`cpu_compile: whole`, vLLM's CPU default) over an empty
cache, once; then offline-eval's eager start (what `compile: auto` does over an empty cache below 1,300,000
planned prompt tokens), once.
Prints each start's seconds and what the backend recorded, then the ratios: offline-eval's
second start against vLLM's default one, and the first starts against each other. --quick starts only offline-eval's
way, twice over one empty cache, and ends with `offline-eval second start: N.N s / first start N.N s = N.NN`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from offline_eval.inference.backends.vllm.options import COMPILE_ABOVE_TOKENS  # noqa: E402

CHILD = """
import json, sys
from offline_eval.inference.backends.registry import load_backend
from offline_eval.inference.backends.spec import LoadSpec
b = load_backend(LoadSpec(name="bench", backend="vllm", path=sys.argv[1], max_model_len=int(sys.argv[2]),
                          engine_options={"compile": sys.argv[3], "cpu_compile": sys.argv[4]}))
print("START " + json.dumps(b.engine_start()))
b.close()
"""

# vLLM started directly, as a user's script would, with the engine arguments the backend gives it (not through the
# backend, which makes the AOT cache load)
DEFAULT_CHILD = """
import json, os, sys, time
from pathlib import Path
os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
from vllm import LLM
root = Path(os.environ["VLLM_CACHE_ROOT"])
files = lambda: {p for p in root.rglob("*") if p.is_file()} if root.is_dir() else set()
had, t0 = files(), time.perf_counter()
llm = LLM(model=sys.argv[1], tokenizer=sys.argv[1], max_model_len=int(sys.argv[2]), seed=0, enable_prefix_caching=True,
          structured_outputs_config={"backend": "xgrammar", "disable_any_whitespace": True}, gpu_memory_utilization=0.1)
s = round(time.perf_counter() - t0, 1)
print("START " + json.dumps({"start_s": s, "compile_cache_files_added": len(files() - had)}))
llm.llm_engine.engine_core.shutdown()
"""


def start(model: str, ctx: int, cache: Path, default: bool, compile: str = "always", graph: str = "piecewise") -> dict:
    """One start in a fresh process. vLLM's default: its AOT compile cache and its engine-core and worker
    processes; offline-eval's: whatever the backend sets (the AOT cache that loads, the engine core in-process), and
    tcmalloc preloaded where it is installed, as the CLI starts it (offline_eval/runtime/preload.py)."""
    from offline_eval.runtime.preload import tcmalloc_library

    drop = ("VLLM_USE_AOT_COMPILE", "VLLM_ENABLE_V1_MULTIPROCESSING", "LD_PRELOAD")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
    if default:
        env.update(VLLM_USE_AOT_COMPILE="1", VLLM_ENABLE_V1_MULTIPROCESSING="1")
    elif lib := tcmalloc_library():
        env["LD_PRELOAD"] = lib
    env["VLLM_CACHE_ROOT"] = str(cache / "vllm")  # vLLM's own (AOT) cache: empty too
    out = subprocess.run(
        [sys.executable, "-c", DEFAULT_CHILD if default else CHILD, model, str(ctx), compile, graph],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    line = next((x for x in out.stdout.splitlines() if x.startswith("START ")), None)
    if line is None:
        sys.exit(f"the engine did not start:\n{out.stderr[-2000:]}")
    return json.loads(line[6:])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(ROOT / "models/gemma-3-270m/hf"))
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--quick", action="store_true", help="offline-eval's two starts only (vLLM's default left out)")
    a = ap.parse_args()
    got: dict[str, list[dict]] = {}
    ways = (("vLLM default", True), ("offline-eval", False))
    with tempfile.TemporaryDirectory() as tmp:
        for name, default in ways[1:] if a.quick else ways:
            cache = Path(tmp) / name.replace(" ", "-")
            got[name] = [start(a.model, a.max_model_len, cache, default) for _ in range(2)]
            for i, f in enumerate(got[name], 1):
                print(
                    f"{name}, start {i}: {f['start_s']:.1f} s ({f['compile_cache_files_added']} cache files added"
                    f"{', compiled model loaded' if f.get('compiled_model_loaded') else ''}"
                    f"{', ' + f['compile_graph'] if f.get('compile_graph') else ''}"
                    f"{', tcmalloc' if f.get('tcmalloc') else ''})"
                )
        if not a.quick:  # vLLM's own CPU compile (the model as one graph), offline-eval's start otherwise
            got["whole"] = [start(a.model, a.max_model_len, Path(tmp) / "whole", False, "always", "whole")]
            w = got["whole"][0]
            print(f"offline-eval compiled whole (cpu_compile: whole), start 1: {w['start_s']:.1f} s ({w['compile']})")
        if not a.quick:  # what `compile: auto` does over an empty cache with a load it will not pay back
            got["eager"] = [start(a.model, a.max_model_len, Path(tmp) / "eager", False, "never")]
            e = got["eager"][0]
            print(
                f"offline-eval eager (compile: auto under {COMPILE_ABOVE_TOKENS:,} planned prompt tokens over an empty "
                f"cache), start 1: {e['start_s']:.1f} s"
                f"{' (tcmalloc)' if e.get('tcmalloc') else ''}"
            )
    if a.quick:
        o = got["offline-eval"]
        print(
            f"offline-eval second start: {o[1]['start_s']:.1f} s / first start {o[0]['start_s']:.1f} s = "
            f"{o[1]['start_s'] / o[0]['start_s']:.2f}"
        )
        return 0
    d, o = got["vLLM default"], got["offline-eval"]
    print(
        f"second start: offline-eval {o[1]['start_s']:.1f} s / vLLM default {d[1]['start_s']:.1f} s = "
        f"{o[1]['start_s'] / d[1]['start_s']:.2f}; first start: {o[0]['start_s']:.1f} s / {d[0]['start_s']:.1f} s = "
        f"{o[0]['start_s'] / d[0]['start_s']:.2f}"
    )
    # The goals: against vLLM's default first start (every default start compiles).
    print(
        f"goals: offline-eval second start / vLLM default first = {o[1]['start_s'] / d[0]['start_s']:.2f} (<= 0.25); "
        f"offline-eval first / vLLM default first = {o[0]['start_s'] / d[0]['start_s']:.2f} (<= 0.60); "
        f"offline-eval eager / vLLM default first = {got['eager'][0]['start_s'] / d[0]['start_s']:.2f}; "
        f"compiled whole / vLLM default first = {got['whole'][0]['start_s'] / d[0]['start_s']:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
