#!/usr/bin/env python
"""Phase 2's prefix reuse for a reasoning model: prompt tokens the engine computed in the answer phase over the
prompt tokens it was handed, on llama.cpp and vLLM side by side.

    .venv/bin/python scripts/bench_thinking.py [--engines llamacpp,vllm] [--items 26] [--budget 256] [--shots 4]

The tiny reasoning model (models/tiny/think, scripts/make_tiny_model.py) thinks on JBE-QA's sample statements
(constrained) through the runner, as a sweep does (solve: each item's answer right after its thinking on llama.cpp,
whose cache keeps one sequence; the whole thinking phase, then the answers, on vLLM). Phase 2's prompt is phase 1's
prompt, the thinking as the model's own token ids and the closing delimiter. Prints, per engine, phase 2's
submitted and computed prompt tokens and their ratio (the goal: at most 0.1); the last line compares the two.
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


def phase_for(n: int, shots: int):  # type: ignore[no-untyped-def]
    from offline_eval.pipeline.config import SweepConfig
    from offline_eval.pipeline.plan import plan_tasks

    cfg = SweepConfig.model_validate(
        {
            "models": [{"name": "t", "backend": "fake", "path": str(ROOT / "models/tiny/think/hf")}],
            "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(ROOT / "data/jbeqa"), "shots": [shots]}},
        }
    )
    (task,) = plan_tasks(cfg, None, n, "bench")
    return task.settings[0].phase


def measure(engine: str, phase, budget: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    from offline_eval.inference.backends.registry import load_backend
    from offline_eval.inference.backends.spec import LoadSpec
    from offline_eval.inference.runner import Runner
    from offline_eval.inference.store import Store
    from offline_eval.models.spec import ReasoningSpec
    from offline_eval.models.thinking import ModelSettings, solve

    think = ROOT / "models/tiny/think"
    path = think / "gguf/tiny-think-f16.gguf" if engine == "llamacpp" else think / "hf"
    backend = load_backend(LoadSpec(name="t", backend=engine, path=str(path), max_model_len=4096))
    settings = ModelSettings(
        reasoning=ReasoningSpec(think=True, budget=budget, template_kwargs={"enable_thinking": True})
    )
    try:
        runner = Runner(backend, Store(Path(tempfile.mkdtemp()) / "s.sqlite"), "bench", progress=False)
        t0 = time.perf_counter()
        _, both = solve(runner, phase, settings)  # think, then answer, as a sweep does
        wall = time.perf_counter() - t0
    finally:
        backend.close()
    submitted, computed = both.answer_submitted or 0, both.answer_computed or 0
    return {
        "items": len(phase.requests),
        "wall_s": wall,
        "submitted": submitted,
        "computed": computed,
        "ratio": computed / submitted if submitted else float("nan"),
        "thinking_tokens": both.thinking_tokens,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engines", default="llamacpp,vllm")
    ap.add_argument("--items", type=int, default=26)
    ap.add_argument("--budget", type=int, default=256)
    ap.add_argument("--shots", type=int, default=4, help="JBE-QA exemplars per prompt (4: prompts of ~1k tokens)")
    a = ap.parse_args()
    phase = phase_for(a.items, a.shots)
    got = {}
    for engine in a.engines.split(","):
        got[engine] = m = measure(engine, phase, a.budget)
        print(
            f"{engine}: {m['items']} items, {a.shots}-shot, budget {a.budget} ({m['thinking_tokens']} thinking "
            f"tokens); both phases {m['wall_s']:.3g} s; phase 2 prompt tokens computed "
            f"{m['computed']}/{m['submitted']} = {m['ratio']:.3f}"
        )
    print(
        "phase 2 computed/submitted: " + ", ".join(f"{e} {m['ratio']:.3f}" for e, m in got.items()) + " (goal <= 0.1)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
