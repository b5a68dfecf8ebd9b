#!/usr/bin/env python
"""How much does offline-eval add on top of a raw vLLM call? Measured side by side in one process.

    .venv/bin/python scripts/bench_overhead.py [--n 2000] [--model models/tiny/hf]

1. 2,000 JBE-QA-shaped prompts, choice-constrained, on the tiny model with vLLM (CPU build here):
   - ours: requests built from loaded items -> runner (dedupe, length check, sorting, store writes) -> scored -> aggregated;
   - raw:  one `LLM.generate` call on the same rendered prompts with the same SamplingParams.
   The prefix cache is reset before every timed pass; raw and ours alternate, best of --repeats.
2. logprob mode vs constrained mode, through our path.
3. 4-shot with prefix caching on vs off (a second engine with caching disabled).

The last line is exactly `raw/ours ratio: N.NN` (>= 0.90 means the harness adds at most 10%).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

from bench_data import jbeqa_items  # noqa: E402


def ours(backend, data: Path, shots: int, mode: str, tmp: Path, tag: str) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    from offline_eval.inference.runner import Runner
    from offline_eval.inference.store import Store
    from offline_eval.tasks import make_task

    task = make_task(
        "jbeqa", {"protocol": "offline-eval", "data": str(data), "shots": [shots], "mode": [mode], "bootstrap": 0}
    )
    items = task.load()  # reading the dataset is outside the comparison: raw gets its prompts for free too
    setting = {"shots": shots, "mode": mode}
    t0 = time.perf_counter()
    store = Store(tmp / f"store-{tag}.sqlite")
    results, stats = Runner(backend, store, "bf16", chunk_size=4096, progress=False).run(task.build(items, setting))
    records = [task.score(it, r, setting) for it, r in zip(items, results)]
    task.run_metrics(records, setting)
    store.close()
    return time.perf_counter() - t0, stats.n_generated


def raw(backend, data: Path, shots: int) -> float:  # type: ignore[no-untyped-def]
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    from offline_eval.tasks import make_task

    task = make_task(
        "jbeqa",
        {"protocol": "offline-eval", "data": str(data), "shots": [shots], "mode": ["constrained"], "bootstrap": 0},
    )
    phase = task.build(task.load(), {"shots": shots, "mode": "constrained"})
    tok = backend.llm.get_tokenizer()
    prompts = [
        tok.apply_chat_template(r.message_dicts(), tokenize=False, add_generation_prompt=True) for r in phase.requests
    ]
    params = SamplingParams(
        temperature=0.0, max_tokens=4, structured_outputs=StructuredOutputsParams(choice=["0", "1"])
    )
    t0 = time.perf_counter()
    backend.llm.generate(prompts, params, use_tqdm=False)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--model", default=str(ROOT / "models/tiny/hf"))
    ap.add_argument("--repeats", type=int, default=5, help="alternating raw/ours passes; best of each is kept")
    a = ap.parse_args()
    from offline_eval.inference.backends.registry import load_backend
    from offline_eval.inference.backends.spec import LoadSpec

    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        data = jbeqa_items(a.n, tmp)
        spec = LoadSpec(name="tiny", backend="vllm", path=a.model, max_model_len=2048)
        b = load_backend(spec)
        # Warm-up: compile grammars, touch every code path once.
        ours(b, data, 0, "constrained", tmp, "warm")
        raw(b, data, 0)
        t_raw, t_ours = [], []
        for i in range(a.repeats):
            # Alternate which goes first, so neither always inherits the other's warm caches.
            for which in ("raw", "ours") if i % 2 == 0 else ("ours", "raw"):
                gc.collect()
                b.llm.reset_prefix_cache()
                if which == "raw":
                    t_raw.append(raw(b, data, 0))
                else:
                    t_ours.append(ours(b, data, 0, "constrained", tmp, f"c{i}")[0])
        t_lp = []
        for i in range(2):
            b.llm.reset_prefix_cache()
            t_lp.append(ours(b, data, 0, "logprob", tmp, f"lp{i}")[0])
        b.llm.reset_prefix_cache()
        t_4on = ours(b, data, 4, "constrained", tmp, "4on")[0]
        b.close()
        b2 = load_backend(
            LoadSpec(name="tiny", backend="vllm", path=a.model, max_model_len=2048, enable_prefix_caching=False)
        )
        ours(b2, data, 0, "constrained", tmp, "warm2")
        t_4off = ours(b2, data, 4, "constrained", tmp, "4off")[0]
        b2.close()

    n = a.n
    r, o, lp = min(t_raw), min(t_ours), min(t_lp)
    print(f"prompts: {n} JBE-QA-shaped, tiny Llama, vLLM {spec.backend} on CPU, choice-constrained, max_tokens=4")
    print(f"raw LLM.generate:         {r:7.3f} s  {n / r:8.1f} items/s")
    print(f"offline-eval path:        {o:7.3f} s  {n / o:8.1f} items/s  (build + runner + store + score)")
    print(f"logprob mode (ours):      {lp:7.3f} s  {n / lp:8.1f} items/s  -> logprob/constrained time {lp / o:.2f}x")
    print(f"4-shot, prefix cache on:  {t_4on:7.3f} s  {n / t_4on:8.1f} items/s")
    print(
        f"4-shot, prefix cache off: {t_4off:7.3f} s  {n / t_4off:8.1f} items/s  -> speed-up from caching "
        f"{t_4off / t_4on:.2f}x"
    )
    print(f"raw/ours ratio: {r / o:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
