#!/usr/bin/env python
"""The constraint backends side by side: per engine x backend, on the tiny model and on Gemma 3 270M, one fresh
process each, in one run.

    .venv/bin/python scripts/bench_constraints.py [--models tiny,gemma] [--engines vllm,transformers,llamacpp]
        [--items 26] [--judge-items 8] [--rationale-max 200] [--out FILE]

Each process loads the engine once and runs, in this order:
- the JBE-QA phase: the sample's statements (data/jbeqa/test.jsonl, repeated to --items), the task's choice
  constraint ("0"/"1"), greedy;
- the judge phase: --judge-items Japanese sentences (rare kanji, 「」, ①, 第1条, quotes, backslashes, newlines) that
  the model is asked to copy into every rationale of LegalRikai's AmendExp rubric schema, the task's own JSON
  constraint, then the same prompts unconstrained with as many tokens.
It prints, per engine x backend: the first constrained request's extra seconds over the same request unconstrained
(compile, and the backend's vocabulary on first use) and a second one's with the constraint compiled (cached); the
masking overhead per generated token against unconstrained decoding in the same process (each judge prompt alone,
constrained, then unconstrained with as many tokens: an unconstrained answer that ends sooner carries its prompt's
cost over fewer tokens, so a small overhead can read below zero); each phase's items/s;
outputs that break the constraint (strict JSON and the schema, checked with jsonschema), that end at the token limit,
and U+FFFD characters in them; the process's resident memory growth over the phases; answers identical to the
engine's default backend; and McNemar's exact test on JBE-QA correctness against the engine's default backend.
A backend the engine refuses is printed with its one-line reason."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
os.chdir(ROOT)
sys.path.insert(0, str(ROOT))

MODELS = {
    "tiny": {"hf": "models/tiny/hf", "gguf": "models/tiny/gguf/tiny-f16.gguf"},
    "gemma": {"hf": "models/gemma-3-270m/hf", "gguf": "models/gemma-3-270m/gguf/gemma-3-270m-q4_k_m.gguf"},
}
ENGINES = {"vllm": "hf", "transformers": "hf", "llamacpp": "gguf"}
SENTENCES = [
    "「𠮷野」は第1条①に定める瑕疵担保責任を負う。",
    "甲は乙に対し、本契約第12条第2項の規定により「損害」を賠償する。",
    "齟齬があるときは、第3条②の「特約」が優先する。",
    '引用符 "quote" と円記号 \\ を含む第4条③。',
    "鬱憤を晴らすための解除は、第5条の「正当な理由」に当たらない。\n以上。",
    "買主は、目的物の引渡しを受けた日から①三十日以内に通知する。",
    "本条の「営業秘密」とは、不正競争防止法第2条第6項に定めるものをいう。",
    "乙は、甲の書面による承諾なく、第三者に再委託してはならない（第8条）。",
]


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def child(engine: str, backend: str, model: str, items: int, judge_items: int, rationale_max: int) -> dict[str, Any]:
    from offline_eval.inference.backends.registry import load_backend
    from offline_eval.inference.backends.spec import LoadSpec
    from offline_eval.inference.constraints import Choice, JsonSchema, violation
    from offline_eval.inference.requests import Request, Sampling
    from offline_eval.tasks.legalrikai import rubric

    path = MODELS[model][ENGINES[engine]]
    default = {"vllm": "xgrammar", "transformers": "xgrammar", "llamacpp": "gbnf"}[engine]
    spec = LoadSpec(name=model, backend=engine, path=path, max_model_len=2048, batch_size=8,
                    constraint_backend=None if backend == default else backend)  # fmt: skip
    rows = [json.loads(x) for x in (ROOT / "data/jbeqa/test.jsonl").read_text("utf-8").splitlines()]
    rows = (rows * (items // len(rows) + 1))[:items]
    choice = Choice(["0", "1"])
    schema = JsonSchema(rubric.judge_schema("amendexp", rationale_max))
    ask = "次の記述が正しければ 1、誤っていれば 0 とだけ答えてください。\n記述: "
    jbe = [
        Request.chat([{"role": "user", "content": ask + r["question"]}], Sampling(max_tokens=4), choice) for r in rows
    ]
    copy = "次の文を、各項目の rationale にそのまま書き写し、score を付けてください。\n文: "
    sentences = (SENTENCES * (judge_items // len(SENTENCES) + 1))[:judge_items]
    judge = [Request.chat([{"role": "user", "content": copy + s}], Sampling(max_tokens=400), schema) for s in sentences]
    out: dict[str, Any] = {"engine": engine, "backend": backend, "model": model}
    t0 = time.perf_counter()
    try:
        b = load_backend(spec)
    except Exception as e:  # noqa: BLE001 - the refusal is the result
        return {**out, "refused": str(e).splitlines()[0][:300]}
    out["load_s"] = time.perf_counter() - t0
    rss0 = rss_mib()

    def timed(reqs: list[Request]) -> tuple[list[Any], float]:
        t = time.perf_counter()
        res = b.generate(reqs)
        return res, time.perf_counter() - t

    def one(article: int, constraint: Any) -> float:
        q = Request.chat([{"role": "user", "content": f"{copy}第{article}条。"}], Sampling(max_tokens=8), constraint)
        return timed([q])[1]

    one(0, None)  # the engine's own first-call costs
    plain_1, first, second, plain_2 = one(1, None), one(2, schema), one(3, schema), one(4, None)
    out["compile_first_s"], out["compile_cached_s"] = first - plain_1, second - plain_2
    res_j, wall_j = timed(jbe)
    res_c, wall_c = timed(judge)
    # One request at a time, so that no row waits for a longer one of its batch: each judge prompt under its
    # constraint, then unconstrained with as many tokens; the difference of the seconds per generated token.
    cost = {"constrained": [0.0, 0], "free": [0.0, 0]}
    for q, res in zip(judge, res_c):
        free = Request.chat(
            [{"role": r, "content": c} for r, c in q.messages or ()], Sampling(max_tokens=max(1, res.output_tokens))
        )
        for way, req in (("constrained", q), ("free", free)):
            (got,), wall = timed([req])
            cost[way][0] += wall
            cost[way][1] += got.output_tokens
    out["rss_growth_mib"] = rss_mib() - rss0
    out["mask_ms_per_token"] = 1000 * (cost["constrained"][0] / max(1, cost["constrained"][1])
                                       - cost["free"][0] / max(1, cost["free"][1]))  # fmt: skip
    out["jbeqa_items_s"], out["judge_items_s"] = len(jbe) / wall_j, len(judge) / wall_c
    texts_j, texts_c = [r.text for r in res_j], [r.text for r in res_c]
    out["jbeqa_answers"], out["judge_answers"] = texts_j, texts_c
    gold = ["1" if r["answer"] else "0" for r in rows]
    out["jbeqa_correct"] = [int(a == g) for a, g in zip(texts_j, gold)]
    out["invalid"] = sum(violation(choice, t) is not None for t in texts_j) + sum(
        violation(schema, t) is not None for t in texts_c
    )
    out["ended_at_limit"] = sum(r.finish_reason == "length" for r in res_c)
    out["fffd"] = sum(t.count("\ufffd") for t in texts_j + texts_c)
    b.close()
    return out


def run_one(engine: str, backend: str, model: str, a: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--one", engine, backend, model, "--items", str(a.items),
           "--judge-items", str(a.judge_items), "--rationale-max", str(a.rationale_max)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    last = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    if proc.returncode or not last:
        return {"engine": engine, "backend": backend, "model": model, "refused": f"exit {proc.returncode}: "
                + (proc.stderr.strip().splitlines() or ["?"])[-1][:300]}  # fmt: skip
    return dict(json.loads(last[-1]))


def table(results: list[dict[str, Any]]) -> str:
    from offline_eval.metrics.paired import mcnemar_exact

    head = ("model", "engine", "backend", "compile 1st s", "cached s", "mask ms/tok", "JBE items/s", "judge items/s",
            "invalid", "at limit", "U+FFFD", "RSS +MiB", "same JBE", "same judge", "McNemar p")  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    base: dict[tuple[str, str], dict[str, Any]] = {}
    for r in results:
        base.setdefault((r["model"], r["engine"]), r)
    for r in results:
        if "refused" in r:
            lines.append(f"| {r['model']} | {r['engine']} | {r['backend']} | refused: {r['refused']} |")
            continue
        d = base[(r["model"], r["engine"])]
        sj = sum(x == y for x, y in zip(r["jbeqa_answers"], d["jbeqa_answers"]))
        sc = sum(x == y for x, y in zip(r["judge_answers"], d["judge_answers"]))
        p = mcnemar_exact(r["jbeqa_correct"], d["jbeqa_correct"])
        cells = (r["model"], r["engine"], r["backend"], f"{r['compile_first_s']:.2f}", f"{r['compile_cached_s']:.2f}",
                 f"{r['mask_ms_per_token']:.2f}", f"{r['jbeqa_items_s']:.1f}", f"{r['judge_items_s']:.2f}",
                 r["invalid"], r["ended_at_limit"], r["fffd"], f"{r['rss_growth_mib']:.0f}",
                 f"{sj}/{len(d['jbeqa_answers'])}", f"{sc}/{len(d['judge_answers'])}", f"{p:.3f}")  # fmt: skip
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="tiny,gemma")
    p.add_argument("--engines", default="vllm,transformers,llamacpp")
    p.add_argument("--items", type=int, default=26)
    p.add_argument("--judge-items", type=int, default=8)
    p.add_argument("--rationale-max", type=int, default=200, help="LegalRikai's default rationale_max_chars")
    p.add_argument("--out", help="also write every process's results here (JSON)")
    p.add_argument("--one", nargs=3, metavar=("ENGINE", "BACKEND", "MODEL"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one:
        print(json.dumps(child(*a.one, a.items, a.judge_items, a.rationale_max), ensure_ascii=False))
        return 0
    own = {"vllm": ("xgrammar", "guidance", "outlines"), "transformers": ("xgrammar", "guidance", "outlines"),
           "llamacpp": ("gbnf", "guidance", "outlines")}  # fmt: skip
    results = []
    for model in a.models.split(","):
        for engine in a.engines.split(","):
            for backend in own[engine]:
                t = time.perf_counter()
                results.append(run_one(engine, backend, model, a))
                print(f"{model} {engine} {backend}: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    print(table(results))
    if a.out:
        Path(a.out).write_text(json.dumps(results, ensure_ascii=False, indent=1), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
