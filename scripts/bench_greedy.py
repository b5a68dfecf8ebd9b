#!/usr/bin/env python
"""llama.cpp greedy decoding under a grammar: llama-cpp-python's create_completion against ours, side by side.

    .venv/bin/python scripts/bench_greedy.py [--model GGUF] [--items 2] [--max-tokens 300]

The same LegalRikai judge requests (JSON schema; the sample data's items, each with three candidate responses), in
the runner's order, go through one engine twice: once with every request through create_completion (its sampler
chain filters the whole vocabulary by the grammar at every step), once through `llamacpp_greedy` (the grammar asks
only about the token about to be taken). Every request starts from an empty cache both ways, so the prompt work is
the same and only decoding differs (with a reused cache, create_completion's batches would start where the previous
prompt stopped sharing, and its logits would differ from a fresh start's; see llamacpp_prefill). Prints both walls,
output tokens/s, how many answers are identical (they must all be), and on its last line
`greedy under grammar: N.NNx faster, M/M identical`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/gemma-3-270m/gguf/gemma-3-270m-q4_k_m.gguf")
    ap.add_argument("--items", type=int, default=2, help="items per LegalRikai sub-task")
    ap.add_argument("--max-tokens", type=int, default=300)
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--threads", type=int, default=0, help="llama.cpp threads (0: the engine's default)")
    a = ap.parse_args()

    from offline_eval.inference.backends.registry import load_backend
    from offline_eval.inference.backends.spec import LoadSpec
    from offline_eval.inference.constraints import JsonSchema
    from offline_eval.inference.requests import Sampling
    from offline_eval.tasks import make_task
    from offline_eval.tasks.legalrikai import prompts, rubric
    from offline_eval.tasks.legalrikai.task import judge_gold

    task = make_task("legalrikai", {"protocol": "offline-eval", "data": "data/legalrikai", "limit": a.items})
    items = task.load()
    s = Sampling(temperature=0.0, seed=0, max_tokens=a.max_tokens)
    reqs = []
    for it in items:
        gold = judge_gold(it)
        schema = JsonSchema(rubric.judge_schema(it.subtask, 200))
        for response in (gold, gold[: len(gold) // 2], "わかりません。"):
            text = prompts.judge_prompt(it, prompts.task_prompt(it, None), response, gold, 200)
            reqs.append(task.chat(text, s, schema))  # type: ignore[attr-defined]

    b = load_backend(
        LoadSpec(name="judge", backend="llamacpp", path=a.model, max_model_len=a.ctx, threads=a.threads or None)
    )
    encoded = b.encode(reqs)  # type: ignore[attr-defined]
    order = sorted(range(len(reqs)), key=lambda i: encoded[i])
    reqs, encoded = [reqs[i] for i in order], [encoded[i] for i in order]
    print(f"{len(reqs)} judge requests, {sum(map(len, encoded))} prompt tokens, model {a.model}", flush=True)

    runs = {}
    for label, fast in (("create_completion", False), ("ours", True)):
        b.llm.reset()  # type: ignore[attr-defined]
        b.fast_greedy = fast  # type: ignore[attr-defined]
        b.generate(reqs[:1], encoded[:1])  # warm-up: the grammar parsed
        res, wall = [], 0.0
        for r, ids in zip(reqs, encoded):
            b.llm.reset()  # type: ignore[attr-defined]
            t0 = time.perf_counter()
            res += b.generate([r], [ids])
            wall += time.perf_counter() - t0
        n_out = sum(r.output_tokens or 0 for r in res)
        runs[label] = (wall, res)
        print(f"{label:>17}: {wall:7.1f} s, {n_out} output tokens, {n_out / wall:5.1f} tokens/s", flush=True)
    b.close()

    (w0, r0), (w1, r1) = runs["create_completion"], runs["ours"]
    same = sum(x.text == y.text and x.finish_reason == y.finish_reason for x, y in zip(r0, r1))
    for x, y in zip(r0, r1):
        if x.text != y.text:
            print(f"DIFFERENT:\n  {x.text!r}\n  {y.text!r}")
    print(f"greedy under grammar: {w0 / w1:.2f}x faster, {same}/{len(r0)} identical")
    return 0 if same == len(r0) else 1


if __name__ == "__main__":
    sys.exit(main())
