"""Logprob mode against constrained mode through a served model: JBE-QA-style requests (N copies of the
sample items) sent to a vLLM server over the tiny model, items/s side by side.

    flock /tmp/offline-eval-heavy.lock .venv/bin/python scripts/bench_server_modes.py [--n 400] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=16)
    a = ap.parse_args()
    from test_openai_server import Server

    from offline_eval.inference.backends.registry import load_backend
    from offline_eval.inference.backends.spec import LoadSpec
    from offline_eval.tasks.jbeqa.task import JBEQATask

    task = JBEQATask(JBEQATask.Options(protocol="offline-eval", data=str(ROOT / "data" / "jbeqa")))
    items = task.load()
    server = Server("vllm", ROOT / "models" / "tiny")
    try:
        spec = LoadSpec(
            name="s",
            backend="openai",
            path="",
            max_model_len=0,
            engine_options={"base_url": server.url, "model": "tiny", "max_concurrency": a.concurrency},
        )
        backend = load_backend(spec)
        times = {}
        for mode in ("constrained", "logprob", "constrained", "logprob"):  # each twice; the second counts
            phase = task.build(items, {"shots": 0, "mode": mode})
            # distinct prompts, so no server-side prefix cache hit on a whole prompt
            reqs = [
                r.__class__(
                    messages=(*r.messages[:-1], ("user", r.messages[-1][1] + f" ({k})")),
                    sampling=r.sampling,
                    constraint=r.constraint,
                )
                for k in range(a.n // len(phase.requests) + 1)
                for r in phase.requests
            ][: a.n]
            t0 = time.perf_counter()
            if mode == "logprob":
                backend.choice_logprobs(reqs, ("0", "1"))
            else:
                backend.generate(reqs)
            times[mode] = time.perf_counter() - t0
        backend.close()
    finally:
        server.stop()
    c, lp = a.n / times["constrained"], a.n / times["logprob"]
    print(f"vLLM server, tiny model, {a.n} requests, max_concurrency {a.concurrency}")
    print(f"constrained (choice, max_tokens 4): {c:8.1f} items/s")
    print(f"logprob (top_logprobs 20, 1 token): {lp:8.1f} items/s")
    print(f"logprob / constrained: {lp / c:.2f}x")


if __name__ == "__main__":
    main()
