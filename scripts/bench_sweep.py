#!/usr/bin/env python
"""Where a demo-sized sweep spends its time, and what the judges' shared prompt prefix saves.

    .venv/bin/python scripts/bench_sweep.py [--items 1] [--judge-max-tokens 300] [--no-compare] [--quick]

1. A reduced demo.yaml: 8 candidate runs (Gemma 3 270M in three GGUF quantizations, the tiny model in three GGUF
   quantizations, on transformers and on vLLM) on JBE-QA (4 items, constrained), LegalEval-Q (1 question) and
   LegalRikai (--items per sub-task), with Gemma 3 270M on llama.cpp as LegalRikai's judge and LegalEval-Q's
   evaluator. Prints every stage of summary.json's `timings` block.
2. Unless --no-compare: the same sweep again into the same folder, so every candidate output comes from the store,
   with the judge as it was before issue 16: the prompt in its old order (the candidate's response before the gold
   answer, the rubric and the output format), every llama.cpp request through create_completion (the grammar
   over the whole vocabulary at every step, and its own prefix reuse), and llama-cpp-python's defaults (half the CPUs
   as threads, flash attention off, 512-token batches). Prints both judge phases side by side: prompt tokens submitted and computed,
   wall time, and the judge's scores (failures, mean, agreement between the two orders, agreement with the
   demo's invented human scores).

--quick (the test's): two candidates only (the tiny model in two GGUF quantizations on llama.cpp), and the tiny model
as judge and evaluator, so that the whole run, both sweeps, takes under a minute.

The last line is exactly `fixed overhead: N.N s; judge prefix reuse: N.Nx` (the first sweep's time outside engine
starts and phases, and its judge phase's prompt tokens submitted / computed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

JUDGES = "legalrikai.judges"

# The judge template as it was before the response moved last (kept here only to measure the difference).
BEFORE = """あなたは契約書と法令の実務に精通した評価者です。次のタスクに対するモデルの回答を、評価基準に従って採点してください。

# タスクの定義
{{ definition }}

# 元のプロンプト
{{ original_prompt }}

# 指示
{{ instruction }}

# モデルの回答
{{ response if response.strip() else "（回答なし）" }}

# 正解
{{ ground_truth }}

# 評価基準
{% for c in criteria %}
## {{ c.code }}：{{ c.name }}
{{ c.definition }}
{% for point, text in c.scale %}- {{ point }}点：{{ text }}
{% endfor %}{% endfor %}
# 出力形式
評価基準ごとに、根拠（rationale、{{ rationale_max_chars }}文字以内）と点数（score、整数）をJSONで出力してください。
{{ example }}"""


def config(
    out: Path, items: int, judge_max_tokens: int, candidate_args: dict[str, Any] | None = None, quick: bool = False
) -> dict[str, Any]:
    """`candidate_args`: engine_args of the llama.cpp candidates (not the judge and evaluator). `quick`: two
    candidates (the tiny model in two GGUF quantizations) and the tiny model as judge and evaluator."""
    m, gemma = ROOT / "models", ROOT / "models/gemma-3-270m/gguf"
    gguf = {"backend": "llamacpp", "path": str(gemma / "gemma-3-270m-q4_k_m.gguf"), "max_model_len": 8192}
    args = {"engine_args": candidate_args} if candidate_args else {}
    who = "tiny" if quick else "gemma"  # the judge and evaluator
    if quick:
        gguf = {**gguf, "path": str(m / "tiny/gguf/tiny-q8_0.gguf")}
        models: list[dict[str, Any]] = [
            {
                "name": "tiny-gguf",
                **gguf,
                **args,
                "variants": {v: {"file": str(m / f"tiny/gguf/tiny-{v}.gguf")} for v in ("q8_0", "q4_0")},
            }
        ]
    else:
        models = [
            {
                "name": "gemma-gguf",
                **gguf,
                **args,
                "variants": {
                    "q4_k_m": {},
                    "q8_0": {"file": str(gemma / "gemma-3-270m-q8_0-from-q4_k_m.gguf")},
                    "q4_0": {"file": str(gemma / "gemma-3-270m-q4_0-from-q4_k_m.gguf")},
                },
            },
            {
                "name": "tiny-gguf",
                "backend": "llamacpp",
                "path": str(m / "tiny/gguf/tiny-f16.gguf"),
                "max_model_len": 8192,
                **args,
                "variants": {v: {"file": str(m / f"tiny/gguf/tiny-{v}.gguf")} for v in ("f16", "q8_0", "q4_0")},
            },
            {"name": "tiny-hf", "backend": "transformers", "path": str(m / "tiny/hf"), "max_model_len": 8192},
            {"name": "tiny-vllm", "backend": "vllm", "path": str(m / "tiny/hf"), "max_model_len": 8192},
        ]
    return {
        "output_dir": str(out),
        "models": models,
        "tasks": {
            "jbeqa": {
                "protocol": "offline-eval",
                "data": str(ROOT / "data/jbeqa"),
                "shots": [0],
                "mode": ["constrained"],
                "limit": 4,
            },
            "legalevalq": {
                "protocol": "offline-eval",
                "data": str(ROOT / "data/legalevalq/queries.json"),
                "limit": 1,
                "max_tokens": 48,
                "scorer": str(m / "tiny-scorer"),
                "evaluator": {"name": f"{who}-evaluator", **gguf},
                "evaluator_max_tokens": 160,
                "comment_max_chars": 80,
            },
            "legalrikai": {
                "protocol": "offline-eval",
                "data": str(ROOT / "data/legalrikai"),
                "limit": items,
                "max_tokens": 64,
                "overflow": "focus",
                "judges": [{"name": f"{who}-judge", **gguf}],
                "judge_max_tokens": judge_max_tokens,
                "rationale_max_chars": 30,
                "human_scores": str(ROOT / "data/legalrikai/human_scores.csv"),
            },
        },
    }


def sweep(cfg_path: Path) -> dict[str, Any]:
    from offline_eval.pipeline.config import load_config
    from offline_eval.pipeline.options import SweepOptions
    from offline_eval.pipeline.orchestrate import run_sweep
    from offline_eval.runtime.timings import Timings

    timings = Timings()
    with timings.stage("config"):
        cfg = load_config(cfg_path)
    return run_sweep(
        cfg, SweepOptions(source=str(cfg_path), progress=False, log=lambda _: None, timings=timings)
    ).to_json()


def verdicts(out: Path) -> dict[tuple[str, str, str], dict[str, int] | None]:
    """(run, item, criterion-set) -> the judge's raw scores (None: unparseable), from the results files."""
    got: dict[tuple[str, str, str], dict[str, int] | None] = {}
    for f in sorted((out / "results").rglob("legalrikai.*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            for judge, v in r.get("judges", {}).items():
                got[(f.parent.name, f"{r['subtask']}/{r['id']}", judge)] = v.get("scores")
    return got


def judge_stage(summary: dict[str, Any]) -> dict[str, Any]:
    t = summary["timings"]["stages"]
    phase = next(s for s in t if s["stage"] == "evaluation" and s["setting"] == JUDGES)
    load = sum(s["s"] for s in t if s["stage"] == "evaluator_load" and s["run"] == phase["run"])
    return {**phase, "load_s": load}


def human_mae(summary: dict[str, Any]) -> str:
    h = (summary.get("task_reports", {}).get("legalrikai") or {}).get("human") or {}
    vals = [
        v
        for sub in (h.get("mae") or {}).values()
        for c in (sub.get("Avg") or {}).values()
        if isinstance(v := c.get("mae") if isinstance(c, dict) else c, (int, float))
    ]
    return f"{sum(vals) / len(vals):.3f} over {len(vals)} cells" if vals else "no matched outputs"


def print_stages(summary: dict[str, Any]) -> None:
    t = summary["timings"]
    print(f"{'stage':<15} {'s':>8}  what")
    for s in t["stages"]:
        what = " ".join(str(s[k]) for k in ("run", "setting") if k in s)
        extra = f"  {s['items_per_s']:.1f} items/s" if "items_per_s" in s else ""
        if s.get("prefix_reuse"):
            p = s["prefix_reuse"]
            extra += f"  prompt tokens {p['computed']}/{p['submitted']} computed"
        print(f"{s['stage']:<15} {s['s']:8.3f}  {what}{extra}")
    print("by stage: " + ", ".join(f"{k} {v:.3g} s" for k, v in t["by_stage"].items()))
    print(
        f"total {t['total_s']:.1f} s; engine starts and phases {t['total_s'] - t['fixed_s']:.1f} s; "
        f"fixed overhead {t['fixed_s']:.3g} s"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=1, help="LegalRikai items per sub-task (the demo's limit: 1)")
    ap.add_argument("--judge-max-tokens", type=int, default=300, help="the demo's judge_max_tokens")
    ap.add_argument("--no-compare", action="store_true", help="skip the sweep with the judge prompt's old order")
    ap.add_argument("--out", help="output folder (default: a temporary one)")
    ap.add_argument(
        "--quick", action="store_true", help="two tiny GGUF candidates, the tiny model as judge and evaluator"
    )
    a = ap.parse_args()
    import yaml

    with tempfile.TemporaryDirectory() as t:
        out = Path(a.out or t)
        cfg_path = Path(t) / "bench.yaml"
        cfg_path.write_text(
            yaml.safe_dump(config(out / "sweep", a.items, a.judge_max_tokens, quick=a.quick)), encoding="utf-8"
        )
        t0 = time.perf_counter()
        new = sweep(cfg_path)
        print(
            f"== the sweep ({time.perf_counter() - t0:.1f} s, {len(new['runs'])} runs, {len(new['failures'])} failed)"
        )
        print_stages(new)
        new_j, new_v = judge_stage(new), verdicts(out / "sweep")
        if not a.no_compare:
            from offline_eval.inference.backends.llamacpp import backend as llamacpp_backend
            from offline_eval.tasks.legalrikai import prompts

            real, cores = prompts._template, llamacpp_backend.physical_cores
            defaults = llamacpp_backend.LlamaCppBackend.load_defaults
            before = prompts._env().from_string(BEFORE)
            prompts._template = lambda name: before if name == "judge" else real(name)  # type: ignore[assignment]
            llamacpp_backend.LlamaCppBackend.fast_greedy = False
            llamacpp_backend.LlamaCppBackend.load_defaults = {}  # llama-cpp-python's: no flash attention, 512-token batches
            llamacpp_backend.physical_cores = lambda: max((os.cpu_count() or 1) // 2, 1)  # llama-cpp-python's
            # the candidates keep today's defaults, written out, so that their outputs come from the store
            before_cfg = Path(t) / "before.yaml"
            before_cfg.write_text(
                yaml.safe_dump(config(out / "sweep", a.items, a.judge_max_tokens, dict(defaults), a.quick)),
                encoding="utf-8",
            )
            try:
                old = sweep(before_cfg)
            finally:
                prompts._template = real  # type: ignore[assignment]
                llamacpp_backend.LlamaCppBackend.fast_greedy = True
                llamacpp_backend.LlamaCppBackend.load_defaults = defaults
                llamacpp_backend.physical_cores = cores
            old_j, old_v = judge_stage(old), verdicts(out / "sweep")
            print(
                "\n== the judge phase, same candidate outputs: before / after (prompt order, greedy decoding, threads, flash attention)"
            )
            for label, j in (("before", old_j), ("after", new_j)):
                p = j.get("prefix_reuse") or {}
                print(
                    f"{label:<7} {j['items']:4d} judgments  {j['s']:8.1f} s  {j['items_per_s']:6.2f} items/s  "
                    f"prompt tokens {p.get('computed')}/{p.get('submitted')} computed ({p.get('ratio')}x)  "
                    f"engine start {j['load_s']:.1f} s"
                )
            print(
                f"judge phase speed-up: {old_j['s'] / new_j['s']:.2f}x; prompt tokens computed: "
                f"{old_j['prefix_reuse']['computed'] / new_j['prefix_reuse']['computed']:.2f}x fewer"
            )
            compare_scores(old_v, new_v)
            print(
                f"judge vs invented human scores, mean absolute error of Avg: before {human_mae(old)}; "
                f"after {human_mae(new)}"
            )
    reuse = (new_j.get("prefix_reuse") or {}).get("ratio") or 0.0
    print(f"fixed overhead: {new['timings']['fixed_s']:.3g} s; judge prefix reuse: {reuse:.1f}x")
    return 0


def compare_scores(old: dict[Any, dict[str, int] | None], new: dict[Any, dict[str, int] | None]) -> None:
    keys = sorted(set(old) & set(new))
    fails = (sum(old[k] is None for k in keys), sum(new[k] is None for k in keys))
    both = [k for k in keys if old[k] and new[k]]
    pairs = [(old[k][c], new[k][c]) for k in both for c in old[k] if c in new[k]]  # type: ignore[index]
    same = sum(a == b for a, b in pairs)
    mean = (sum(a for a, _ in pairs) / len(pairs), sum(b for _, b in pairs) / len(pairs)) if pairs else (0, 0)
    print(
        f"judge answers: {len(keys)} outputs; unparseable before {fails[0]}, after {fails[1]}; on {len(pairs)} "
        f"criterion scores given both times: mean before {mean[0]:.2f}, after {mean[1]:.2f}, identical "
        f"{same}/{len(pairs)}, mean |difference| "
        f"{sum(abs(a - b) for a, b in pairs) / max(len(pairs), 1):.2f}"
    )


if __name__ == "__main__":
    sys.exit(main())
