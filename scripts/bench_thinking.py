#!/usr/bin/env python
"""Phase 2's prefix reuse for a reasoning model: prompt tokens the engine computed in the answer phase over the
prompt tokens it was handed, on llama.cpp and vLLM side by side.

    .venv/bin/python scripts/bench_thinking.py [--engines llamacpp,vllm] [--items 40] [--budget 64]

The tiny reasoning model (models/tiny/think, scripts/make_tiny_model.py) thinks on JBE-QA's sample statements
(zero-shot, constrained) through the runner, as a sweep does: phase 1 first (stored), then phase 2, whose prompt is
phase 1's prompt, the thinking and the closing delimiter. Prints, per engine, phase 2's submitted and computed
prompt tokens, their ratio (the goal: at most 0.1), and the wall of each phase; the last line compares the two.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)


def phase_for(n: int):  # type: ignore[no-untyped-def]
    from offline_eval.config import SweepConfig
    from offline_eval.pipeline.plan import plan_tasks

    cfg = SweepConfig.model_validate(
        {
            "models": [{"name": "t", "backend": "fake", "path": str(ROOT / "models/tiny/think/hf")}],
            "tasks": {"jbeqa": {"data": str(ROOT / "data/jbeqa")}},
        }
    )
    (task,) = plan_tasks(cfg, None, n, "bench")
    return task.settings[0].phase


def measure(engine: str, phase, budget: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    from offline_eval.backends.registry import load_backend
    from offline_eval.backends.spec import LoadSpec
    from offline_eval.modelspec import ReasoningSpec
    from offline_eval.runner import Runner
    from offline_eval.store import Store
    from offline_eval.thinking import ModelSettings, planned, solve

    think = ROOT / "models/tiny/think"
    path = think / "gguf/tiny-think-f16.gguf" if engine == "llamacpp" else think / "hf"
    backend = load_backend(LoadSpec(name="t", backend=engine, path=str(path), max_model_len=2048))
    settings = ModelSettings(
        reasoning=ReasoningSpec(think=True, budget=budget, template_kwargs={"enable_thinking": True})
    )
    try:
        runner = Runner(backend, Store(Path(tempfile.mkdtemp()) / "s.sqlite"), "bench", progress=False)
        t0 = time.perf_counter()
        _, one = runner.run(planned(phase, settings))  # phase 1, stored: the second call serves it from the store
        t1 = time.perf_counter()
        _, both = solve(runner, phase, settings)
        t2 = time.perf_counter()
    finally:
        backend.close()
    submitted, computed = both.prompt_submitted or 0, both.prompt_computed or 0
    return {
        "items": len(phase.requests),
        "thinking_s": t1 - t0,
        "answer_s": t2 - t1,
        "submitted": submitted,
        "computed": computed,
        "ratio": computed / submitted if submitted else float("nan"),
        "thinking_submitted": one.prompt_submitted or 0,
        "thinking_computed": one.prompt_computed or 0,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engines", default="llamacpp,vllm")
    ap.add_argument("--items", type=int, default=40)
    ap.add_argument("--budget", type=int, default=64)
    a = ap.parse_args()
    phase = phase_for(a.items)
    got = {}
    for engine in a.engines.split(","):
        got[engine] = m = measure(engine, phase, a.budget)
        print(
            f"{engine}: {m['items']} items, budget {a.budget}; phase 1 {m['thinking_s']:.1f} s (prompt tokens "
            f"computed {m['thinking_computed']}/{m['thinking_submitted']}); phase 2 {m['answer_s']:.1f} s, "
            f"prompt tokens computed {m['computed']}/{m['submitted']} = {m['ratio']:.3f}"
        )
    print(
        "phase 2 computed/submitted: " + ", ".join(f"{e} {m['ratio']:.3f}" for e, m in got.items()) + " (goal <= 0.1)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
