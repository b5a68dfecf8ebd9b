#!/usr/bin/env python
"""Full-size JBE-QA timed on every engine: 0-shot and 4-shot constrained on Gemma 3 270M, ours beside the raw
engine called directly on the same prompts and constraint.

    .venv/bin/python scripts/bench_fullsize.py [--engines llamacpp,vllm,transformers] [--items N] [--shots 0,4]

The set is built in the release's exact form (offline_eval's JBE-QA loader reads it as it reads the real file):
3,464 statements (`--items N`: the first N, questions shuffled), ids `令和５年-民法-１８-１` with era years
平成２７年 to 令和６年, question and statement numbers full- or half-width and the year field in the sample's form
for that exam year (the release mixes them), clustered by question (2 to 5 statements each), labels 47.6% true
(the paper's balance). Subjects: the exam's own layout since 2015, per year 36 Civil Code, 20 Constitution and 20
Penal Code questions, less the 1, 5 and 46 questions the paper removed; the paper gives no per-subject count, so
this proportion is an assumption. Each statement is recombined from the sample's own statements of its subject
(the head of one up to its first "、", the tail of another), so token lengths are the sample's. Exemplars (4-shot)
are the sample's train split.

Per engine and shots: `ours` is one `offline_eval.sweep` (engine start, phase wall, items/s, prompt tokens
submitted and computed, the sweep's fixed overhead); `raw` is the engine itself on the same token ids and the same
constraint (llama.cpp: create_completion with the GBNF grammar; vLLM: LLM.generate with a choice; transformers:
generate with xgrammar's logits processor, in our batch size), each in a process of its own. raw/ours is the raw
phase's wall over ours (goal >= 0.9). Answers are compared: raw and ours must give the same ones.

Prints one table, then `fullsize: N items; ENGINE Kshot ours X items/s raw/ours R, ...` and the wall time a
full 3,464-statement 0-shot + 4-shot run would take per engine at the measured rates (start included)."""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)

FULL = 3464
MARK = "bench_fullsize result: "
TRUE_SHARE = 0.476
YEARS = range(2015, 2025)
PER_YEAR = {"民法": 36, "憲法": 20, "刑法": 20}  # questions per exam since 2015
REMOVED = {"民法": 1, "憲法": 5, "刑法": 46}  # the paper's 52 questions that had no binary form
ENGLISH = {"民法": "Civil Law", "憲法": "Constitutional Law", "刑法": "Criminal Law"}
FW = str.maketrans("0123456789", "０１２３４５６７８９")
GGUF = "models/gemma-3-270m/gguf/gemma-3-270m-q4_k_m.gguf"
HF = "models/gemma-3-270m/hf"


def era(year: int) -> str:
    """平成２７年 .. 平成３０年, 令和元年, 令和２年 .. 令和６年 (full-width digits, as the release's ids)."""
    if year <= 2018:
        return f"平成{str(year - 1988).translate(FW)}年"
    return "令和元年" if year == 2019 else f"令和{str(year - 2018).translate(FW)}年"


def _clauses(rows: list[dict[str, Any]]) -> tuple[list[str], list[str], list[str]]:
    """A subject's statements cut at "、": their first clauses, inner clauses and last clauses."""
    heads, middles, tails = [], [], []
    for r in rows:
        parts = r["question"].split("、")
        if len(parts) > 1:
            heads.append(parts[0])
        middles += parts[1:-1]
        tails.append(parts[-1])
    return heads, middles, tails


def _statement(rng: random.Random, pools: tuple[list[str], list[str], list[str]], inner: int, seen: set[str]) -> str:
    """A head, `inner` inner clauses (as many as a sample statement has) and a tail, never a text given before:
    real statements are all different, and the same prompt twice is answered once from the store."""
    heads, middles, tails = pools
    inner, tries = max(0, inner), 0
    while True:
        text = "、".join([rng.choice(heads), *(rng.choice(middles) for _ in range(inner)), rng.choice(tails)])
        if text not in seen:
            seen.add(text)
            return text
        tries += 1
        if tries % 20 == 0:
            inner += 1


def make_set(n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    sample = [
        json.loads(x) for f in ("test", "train") for x in (ROOT / "data/jbeqa" / f"{f}.jsonl").open(encoding="utf-8")
    ]
    by_subject: dict[str, list[dict[str, Any]]] = {}
    for r in sample:
        by_subject.setdefault(r["subject_jp"], []).append(r)
    questions = []  # (year, subject, number)
    for subj, per in PER_YEAR.items():
        qs = [(y, subj, k) for y in YEARS for k in range(1, per + 1)]
        for drop in rng.sample(range(len(qs)), REMOVED[subj]):
            qs[drop] = None  # type: ignore[call-overload]
        questions += [q for q in qs if q is not None]
    sizes = [5] * len(questions)
    while sum(sizes) > FULL:  # 708 questions of 2-5 statements make exactly 3,464
        i = rng.randrange(len(sizes))
        if sizes[i] > 2:
            sizes[i] -= 1
    pools = {subj: _clauses(rows) for subj, rows in by_subject.items()}
    held = {json.loads(x)["id"].translate(FW) for x in (ROOT / "data/jbeqa/train.jsonl").open(encoding="utf-8")}
    # the sample's forms per exam year, as the release mixes them: full- or half-width numbers in the id's
    # question and statement, and the year field as written ("平成27年", "令和２年", "令和元年")
    forms = {r["id"].split("-")[0]: (r["id"].split("-")[-1].isascii(), r["year"]) for r in sample}
    order = list(range(len(questions)))
    rng.shuffle(order)
    out: list[dict[str, Any]] = []
    seen = {r["question"] for r in sample}  # nor an exemplar (the loader leaves those out of the test set)
    for i in order:
        year, subj, k = questions[i]
        half, year_field = forms.get(era(year), (False, era(year)))
        width = str.maketrans("", "") if half else FW
        head = f"{era(year)}-{subj}-{str(k).translate(width)}-"
        # a statement the train split holds is not in the test split: its number is a gap, as in the release
        numbers = [st for st in range(1, 9) if (head + str(st)).translate(FW) not in held][: sizes[i]]
        for st in numbers:
            a = rng.choice(by_subject[subj])
            out.append(
                {
                    "id": head + str(st).translate(width),
                    "year": year_field,
                    "subject": ENGLISH[subj],
                    "subject_jp": subj,
                    "theme": a["theme"],
                    "question_type": "TFQ",
                    "instruction": "次の記述の正誤を判断しなさい。",
                    "remark": "",
                    "label": "N",
                    "lead_in": "",
                    "question": _statement(rng, pools[subj], a["question"].count("、") - 1, seen),
                    "answer": False,
                }
            )
    out = out[:n]
    for j in rng.sample(range(len(out)), round(TRUE_SHARE * len(out))):
        out[j].update(label="Y", answer=True)
    return out


def write_set(folder: Path, n: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rows = make_set(n)
    (folder / "test.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    (folder / "train.jsonl").write_text((ROOT / "data/jbeqa/train.jsonl").read_text("utf-8"), "utf-8")


def model_entry(engine: str, gguf: str) -> dict[str, Any]:
    if engine == "llamacpp":
        return {"name": "gemma", "backend": "llamacpp", "path": gguf, "max_model_len": 4096}
    return {"name": "gemma", "backend": engine, "path": HF, "max_model_len": 4096,
            "variants": {"bf16": {"dtype": "bfloat16"}}}  # fmt: skip


def task_options(data: Path, shots: list[int]) -> dict[str, Any]:
    return {"data": str(data), "protocol": "offline-eval", "shots": shots, "mode": ["constrained"]}


# ---- children: one measurement each, its JSON on the stdout line that starts with MARK


def child_ours(engine: str, data: Path, shots: list[int], out: Path, gguf: str) -> dict[str, Any]:
    import offline_eval

    cfg = {"models": [model_entry(engine, gguf)], "tasks": {"jbeqa": task_options(data, shots)}}
    s = offline_eval.sweep(cfg, out_dir=str(out), progress=False, log=lambda line: None, check=True)
    rows = {}
    for r in s.runs:
        tp = r.throughput
        answers = [x.output for x in s.records(r.run, r.setting)]
        rows[str(r.options["shots"])] = {
            "phase_s": tp.wall_s,
            "items_per_s": tp.items_per_s,
            "submitted": tp.prefix_reuse.submitted if tp.prefix_reuse else None,
            "computed": tp.prefix_reuse.computed if tp.prefix_reuse else None,
            "answers": answers,
            "ids": [x.id for x in s.records(r.run, r.setting)],
        }
    assert s.timings is not None and s.provenance is not None
    start = sum(x["s"] for x in s.timings["stages"] if x["stage"] == "engine_load")
    return {"start_s": round(start, 2), "fixed_s": s.timings["fixed_s"], "total_s": s.timings["total_s"], "rows": rows}


def _requests(data: Path, shots: list[int]) -> dict[str, tuple[list[Any], list[str]]]:
    from offline_eval.tasks import make_task

    task = make_task("jbeqa", task_options(data, shots))
    items = task.load()
    got = {}
    for setting in task.settings():
        phase = task.build(task.setting_items(items, setting), setting)
        got[str(setting["shots"])] = (list(phase.requests), list(phase.item_ids))
    return got


def child_raw(engine: str, data: Path, shots: list[int], gguf: str) -> dict[str, Any]:
    from offline_eval.inference.backends.spec import LoadSpec

    phases = _requests(data, shots)
    entry = model_entry(engine, gguf)
    dtype = "bfloat16" if "variants" in entry else None
    spec = LoadSpec(name="gemma", backend=engine, path=entry["path"], max_model_len=4096, dtype=dtype)
    from offline_eval.inference.backends.registry import prompt_counter

    counter = prompt_counter(spec)
    assert counter is not None
    encoded = {k: counter.encode(reqs) for k, (reqs, _) in phases.items()}
    counter.close()
    rows = {}
    if engine == "llamacpp":
        from llama_cpp import Llama, LlamaGrammar

        from offline_eval.inference.constrained.grammars import gbnf

        llm = Llama(model_path=gguf, n_ctx=4096, verbose=False)
        for k, (reqs, ids) in phases.items():
            grammar = LlamaGrammar.from_string(gbnf(reqs[0].constraint), verbose=False)
            t0, answers = time.perf_counter(), []
            for r, e in zip(reqs, encoded[k]):
                resp = llm.create_completion(prompt=e, max_tokens=r.sampling.max_tokens, temperature=0.0,
                                             grammar=grammar)  # fmt: skip
                answers.append(resp["choices"][0]["text"])  # type: ignore[index]
            rows[k] = {"phase_s": time.perf_counter() - t0, "answers": answers, "ids": ids}
        return {"rows": rows}
    if engine == "vllm":
        # the V1 model runner (structured outputs) and 1 GiB of KV cache on CPU, as our backend starts it; vLLM's AOT
        # cache off, so a start reuses torch's graph cache (TORCHINDUCTOR_CACHE_DIR) and compiles nothing new: only
        # the raw engine's phase is compared
        os.environ.update(VLLM_USE_V2_MODEL_RUNNER="0", VLLM_USE_AOT_COMPILE="0", VLLM_CPU_KVCACHE_SPACE="1")
        from vllm import LLM, SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import StructuredOutputsParams

        llm = LLM(model=HF, tokenizer=HF, max_model_len=4096, dtype="bfloat16", seed=0,
                  structured_outputs_config={"backend": "xgrammar", "disable_any_whitespace": True},
                  gpu_memory_utilization=0.1)  # fmt: skip
        for k, (reqs, ids) in phases.items():
            params = SamplingParams(temperature=0.0, max_tokens=reqs[0].sampling.max_tokens,
                                    structured_outputs=StructuredOutputsParams(choice=list(reqs[0].constraint.choices)))  # fmt: skip
            t0 = time.perf_counter()
            outs = llm.generate([TokensPrompt(prompt_token_ids=e) for e in encoded[k]], params, use_tqdm=False)
            rows[k] = {"phase_s": time.perf_counter() - t0, "answers": [o.outputs[0].text for o in outs], "ids": ids}
        return {"rows": rows}
    import torch
    import xgrammar as xgr
    from transformers import AutoModelForCausalLM, LogitsProcessorList
    from xgrammar.contrib.hf import LogitsProcessor

    from offline_eval.inference.constrained.grammars import xgrammar_ebnf

    model = AutoModelForCausalLM.from_pretrained(HF, dtype=torch.bfloat16)
    tok = counter.tok  # type: ignore[attr-defined]
    compiler = xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(tok, vocab_size=model.config.vocab_size))
    bs = max(1, spec.batch_size)
    for k, (reqs, ids) in phases.items():
        grammar = compiler.compile_grammar(xgrammar_ebnf(reqs[0].constraint))
        t0, answers = time.perf_counter(), []
        seqs = encoded[k]
        for i in range(0, len(seqs), bs):
            part = seqs[i : i + bs]
            width = max(map(len, part))
            x = torch.tensor([[tok.pad_token_id] * (width - len(s)) + s for s in part])
            mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in part])
            with torch.inference_mode():
                gen = model.generate(input_ids=x, attention_mask=mask, do_sample=False, temperature=None, top_p=None,
                                     top_k=None, max_new_tokens=reqs[0].sampling.max_tokens,
                                     pad_token_id=tok.pad_token_id,
                                     logits_processor=LogitsProcessorList([LogitsProcessor([grammar] * len(part))]))  # fmt: skip
            answers += [tok.decode(g[width:], skip_special_tokens=True) for g in gen.tolist()]
        rows[k] = {"phase_s": time.perf_counter() - t0, "answers": answers, "ids": ids}
    return {"rows": rows}


def run_child(args: list[str], timeout: int) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args[:3])}: exited {proc.returncode}\n{proc.stderr[-3000:]}")
    # engines print on stdout too (vLLM's shutdown, in its own processes): the result is the marked line
    return json.loads(next(x for x in proc.stdout.splitlines() if x.startswith(MARK))[len(MARK) :])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engines", default="llamacpp,vllm,transformers")
    ap.add_argument("--items", type=int, default=FULL, help=f"statements (default {FULL}, the release's)")
    ap.add_argument("--shots", default="0,4")
    ap.add_argument("--gguf", default=GGUF, help="llama.cpp's model (default Gemma 3 270M Q4_K_M)")
    ap.add_argument("--timeout", type=int, default=6 * 3600)
    ap.add_argument("--child", nargs=4, metavar=("KIND", "ENGINE", "DATA", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    shots = [int(x) for x in a.shots.split(",")]
    if a.child:
        kind, engine, data, out = a.child
        got = (child_ours(engine, Path(data), shots, Path(out), a.gguf) if kind == "ours"
               else child_raw(engine, Path(data), shots, a.gguf))  # fmt: skip
        print(MARK + json.dumps(got, ensure_ascii=False), flush=True)
        return 0
    engines = [e for e in a.engines.split(",") if e]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "jbeqa"
        write_set(data, a.items)
        print(f"{a.items} statements in the release's form ({data}); shots {shots}; engines {', '.join(engines)}",
              flush=True)  # fmt: skip
        table, summary, walls = [], [], {}
        for engine in engines:
            common = ["--shots", a.shots, "--gguf", a.gguf]
            ours = run_child([*common, "--child", "ours", engine, str(data), str(Path(tmp) / f"out-{engine}")],
                             a.timeout)  # fmt: skip
            raw = run_child([*common, "--child", "raw", engine, str(data), "-"], a.timeout)
            wall = ours["start_s"] + ours["fixed_s"]
            for k, row in ours["rows"].items():
                r = raw["rows"][k]
                assert r["ids"] == row["ids"], "raw and ours ran other items"
                same = sum(x.strip() == y.strip() for x, y in zip(r["answers"], row["answers"]))
                ratio = r["phase_s"] / row["phase_s"]
                table.append([engine, f"{k}-shot", f"{ours['start_s']:.1f}", f"{row['phase_s']:.1f}",
                              f"{row['items_per_s']:.2f}", str(row["submitted"]), str(row["computed"]),
                              f"{ours['fixed_s']:.1f}", f"{r['phase_s']:.1f}", f"{ratio:.2f}",
                              f"{same}/{len(row['answers'])}"])  # fmt: skip
                summary.append(f"{engine} {k}-shot ours {row['items_per_s']:.2f} items/s raw/ours {ratio:.2f}")
                wall += FULL / row["items_per_s"]
            walls[engine] = wall
            print(f"  {engine} done", flush=True)
    head = ["engine", "shots", "start s", "phase s", "items/s", "prompt tok submitted", "computed", "fixed s",
            "raw phase s", "raw/ours", "same answers"]  # fmt: skip
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(head)]
    for row in [head, *table]:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
    full = ", ".join(f"{e} {w / 60:.1f} min" for e, w in walls.items())
    print(f"full size ({FULL} statements, shots {a.shots}) at these rates, start included: {full}")
    print(f"fullsize: {a.items} items; " + "; ".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
