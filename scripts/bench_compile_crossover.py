#!/usr/bin/env python
"""Where vLLM's compile pays for itself: compiled and eager (`enforce_eager`) starts and phases side by side, in one
run, over one compile cache.

    .venv/bin/python scripts/bench_compile_crossover.py [--model models/gemma-3-270m/hf] [--items 300] [--max-model-len 4096]
        [--cpu-compile piecewise|whole] [--quick]

Each load is a fresh process, as a new sweep is, started as offline-eval's vLLM backend starts it, on JBE-QA
statements in the release's form (scripts/bench_fullsize.py's generator) at 0 and 4 shots, constrained: compiled
over an empty cache (the first start), compiled again (its compiled model loaded from the cache) and eager. Prints
each load's start, its phases' wall and the prompt tokens submitted and computed, whether eager gave the same
answers, then the crossover:
the prompt tokens submitted above which a compiled load finishes first,

    (start compiled - start eager) / (eager s per submitted token - compiled s per submitted token),

with the compiled model in the cache and over an empty one (the two lines `compile: auto` uses, inference/backends/vllm/backend.py).
--quick: 20 items, the 0-shot phase, and two loads (compiled over an empty cache, then eager): the suite's check
that the script runs.
The last line is `crossover, empty cache: N prompt tokens submitted` (or says there is none)."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
MARK = "crossover result: "


def child(model: str, ctx: int, data: str, shots: list[int], eager: bool) -> dict[str, Any]:
    import os

    from bench_fullsize import _requests

    from offline_eval.inference.backends.registry import load_backend
    from offline_eval.inference.backends.spec import LoadSpec

    phases = _requests(Path(data), shots)
    spec = LoadSpec(name="bench", backend="vllm", path=model, max_model_len=ctx, dtype="bfloat16",
                    engine_options={"compile": "never" if eager else "always",
                                    "cpu_compile": os.environ.get("BENCH_CPU_COMPILE", "piecewise")})  # fmt: skip
    t0 = time.perf_counter()
    b = load_backend(spec)
    start = time.perf_counter() - t0
    out: dict[str, Any] = {"start_s": start, "facts": b.engine_start(), "phases": {}}  # type: ignore[attr-defined]
    for k, (reqs, _) in phases.items():
        encoded = b.encode(reqs)  # type: ignore[attr-defined]
        count = b.prompt_count
        assert count is not None
        s0, c0, t1 = count.submitted, count.computed, time.perf_counter()
        got = b.generate(reqs, encoded)
        out["phases"][k] = {
            "wall_s": time.perf_counter() - t1,
            "submitted": count.submitted - s0,
            "computed": count.computed - c0,
            "answers": [r.text for r in got],
        }
    b.close()
    out["libs"] = mapped_libs()
    return out


def mapped_libs() -> list[str]:
    """The allocator and OpenMP runtimes this process has mapped (what LD_PRELOAD and the imports brought in)."""
    names = {Path(x.split()[-1]).name for x in Path("/proc/self/maps").read_text().splitlines() if "/" in x}
    return sorted(n for n in names if any(k in n for k in ("tcmalloc", "iomp", "gomp", "libomp")))


def run(
    model: str, ctx: int, data: Path, shots: list[int], eager: bool, cache: Path, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """One load in a fresh process (`env` added to its environment): the child's result, plus the whole process's
    wall (`process_s`) and the libraries vLLM warned were not in LD_PRELOAD (`preload_warnings`)."""
    import os

    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(cache),
        "VLLM_CACHE_ROOT": str(cache / "vllm"),  # vLLM's AOT compile cache: the same empty folder
        "PYTHONPATH": str(ROOT),
        **(env or {}),
    }
    args = [sys.executable, __file__, "--child", model, str(ctx), str(data), ",".join(map(str, shots)), str(int(eager))]
    t0 = time.perf_counter()
    p = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    line = next((x for x in p.stdout.splitlines() if x.startswith(MARK)), None)
    if line is None:
        sys.exit(f"the load did not finish (exit {p.returncode}):\n{p.stderr[-3000:]}")
    got = json.loads(line[len(MARK) :])
    got["process_s"] = took
    got["preload_warnings"] = sorted(set(re.findall(r"(\S+) is not found in LD_PRELOAD", p.stderr)))
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(ROOT / "models/gemma-3-270m/hf"))
    ap.add_argument("--items", type=int, default=300)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument(
        "--cpu-compile", choices=("piecewise", "whole"), default="piecewise", help="how the compiled loads compile"
    )
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        model, ctx, data, shots, eager = a.child
        got = child(model, int(ctx), data, [int(s) for s in shots.split(",")], eager == "1")
        print(MARK + json.dumps(got, ensure_ascii=False), flush=True)
        return 0
    from bench_fullsize import write_set

    items, shots = (20, [0]) if a.quick else (a.items, [0, 4])
    import os

    os.environ["BENCH_CPU_COMPILE"] = a.cpu_compile  # the loads' processes inherit it
    with tempfile.TemporaryDirectory() as tmp:
        data, cache = Path(tmp) / "jbeqa", Path(tmp) / "cache"
        write_set(data, items)
        loads = {"compiled, empty cache": run(a.model, a.max_model_len, data, shots, False, cache)}
        if not a.quick:
            loads["compiled, model in the cache"] = run(a.model, a.max_model_len, data, shots, False, cache)
        loads["eager"] = run(a.model, a.max_model_len, data, shots, True, cache)
    for name, x in loads.items():
        phases = "; ".join(
            f"{k}-shot {p['wall_s']:.3g} s ({p['submitted']} tokens submitted, {p['computed']} computed)"
            for k, p in x["phases"].items()
        )
        print(f"{name}: start {x['start_s']:.3g} s ({x['facts']['compile']}); {phases}")
    eager, cold = loads["eager"], loads["compiled, empty cache"]
    warm = loads.get("compiled, model in the cache", cold)
    same = sum(
        a == b for k in eager["phases"] for a, b in zip(eager["phases"][k]["answers"], warm["phases"][k]["answers"])
    )
    total = sum(len(p["answers"]) for p in eager["phases"].values())
    print(f"eager gives the same answer as compiled on {same}/{total}")

    def per_token(x: dict[str, Any]) -> float:
        return sum(p["wall_s"] for p in x["phases"].values()) / sum(p["submitted"] for p in x["phases"].values())

    gap = per_token(eager) - per_token(warm)
    if gap <= 0:
        print("eager was not slower per token here: no crossover (compile never pays)")
        return 0
    for name, c in (("compiled model in the cache", warm), ("empty cache", cold))[1 if a.quick else 0 :]:
        tokens = (c["start_s"] - eager["start_s"]) / gap
        print(f"crossover, {name}: {tokens:,.0f} prompt tokens submitted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
