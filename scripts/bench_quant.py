#!/usr/bin/env python
"""BF16 against Int8 and Int4 on real weights: Gemma 3 270M on vLLM (BF16, W8A8, W4A16, the folders set-up makes
with `offline-eval quantize`) and on llama.cpp (Q4_K_M, Q8_0), over JBE-QA statements in the release's form.

    .venv/bin/python scripts/bench_quant.py [--items 600] [--shots 0] [--engines vllm,llamacpp] [--out DIR] [--tiny]

Each scheme is one `offline-eval sweep` in a process of its own, into one shared output folder (its store), side by
side in one run: the phase's items/s per setting (constrained and logprob) and the process's peak resident memory.
A last sweep over every variant reads all answers back from that store and makes the verdict table (each scheme
against BF16 on vLLM, non-inferiority at the task's margin); the script then prints the share of answers that flip
against BF16 and the distribution of the label log-probability differences.

On this model the BF16 folder is dequantized from the published Q4_K_M GGUF (scripts/make_gemma.py): llama.cpp's
Q4_K_M holds the BF16 weights exactly, and its Q8_0 is requantized from it. `--tiny` runs the tiny random-weight
model instead (a quick check that the script works, not a measurement)."""

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
sys.path.insert(0, str(ROOT / "scripts"))
os.chdir(ROOT)

from bench_fullsize import write_set  # noqa: E402

GEMMA = ROOT / "models" / "gemma-3-270m"
TINY = ROOT / "models" / "tiny"


def schemes(tiny: bool) -> dict[str, dict[str, Any]]:
    """variant -> its models.yaml entry (one variant each)."""
    if tiny:
        q = TINY / "quant"
        hf, gguf = TINY / "hf", TINY / "gguf"
        vllm = {"bf16": hf, "w8a8": q / "tiny-w8a8", "w4a16": q / "tiny-w4a16"}
        cpp = {"f16": gguf / "tiny-f16.gguf", "q8_0": gguf / "tiny-q8_0.gguf", "q4_0": gguf / "tiny-q4_0.gguf"}
    else:
        hf, gguf = GEMMA / "hf", GEMMA / "gguf"
        vllm = {"bf16": hf, "w8a8": GEMMA / "gemma-3-270m-w8a8", "w4a16": GEMMA / "gemma-3-270m-w4a16"}
        cpp = {"q4_k_m": gguf / "gemma-3-270m-q4_k_m.gguf", "q8_0": gguf / "gemma-3-270m-q8_0-from-q4_k_m.gguf"}
    out: dict[str, dict[str, Any]] = {}
    for name, path in vllm.items():
        out[f"vllm.{name}"] = {"name": "m", "backend": "vllm", "path": str(hf), "max_model_len": 2048,
                               "variants": {name: {"file": str(path)}}}  # fmt: skip
    for name, path in cpp.items():
        out[f"llamacpp.{name}"] = {"name": "m-gguf", "backend": "llamacpp", "path": str(path), "max_model_len": 2048,
                                   "variants": {name: {"file": str(path)}}}  # fmt: skip
    return out


def config(path: Path, out: Path, models: list[dict[str, Any]], data: Path, shots: list[int]) -> Path:
    import yaml

    if len(models) > 1:  # one entry per engine, every variant under it: the verdict table's pairs
        merged: dict[str, dict[str, Any]] = {}
        for m in models:
            merged.setdefault(m["name"], {**m, "variants": {}})["variants"].update(m["variants"])
        models = list(merged.values())
        models[0]["reference"] = next(iter(models[0]["variants"]))
    cfg = {
        "output_dir": str(out),
        "models": models,
        "tasks": {"jbeqa": {"data": str(data), "protocol": "offline-eval", "shots": shots,
                            "mode": ["constrained", "logprob"]}},
    }  # fmt: skip
    path.write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def run(cfg: Path, gpu: bool = False) -> tuple[float, float, int]:
    """(wall s, peak memory MiB, exit code) of one sweep in a process of its own: the process's resident memory,
    or with `gpu` the GPU's memory in use, sampled by nvidia-smi every 0.2 s."""
    import threading

    peak = [0.0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            got = subprocess.run(
                ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
            )
            used = [float(x) for x in got.stdout.split() if x.replace(".", "").isdigit()]
            peak[0] = max(peak[0], *used, 0.0)

    watcher = threading.Thread(target=sample, daemon=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "offline_eval.cli", "sweep", str(cfg)], stderr=subprocess.PIPE)
    if gpu:
        watcher.start()
    assert proc.stderr is not None
    err = proc.stderr.read().decode("utf-8", "replace")
    _, status, usage = os.wait4(proc.pid, 0)
    done.set()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        print(err[-3000:], file=sys.stderr)
    return time.perf_counter() - t0, peak[0] if gpu else usage.ru_maxrss / 1024, proc.returncode


def records(out: Path, run_name: str, setting: str) -> dict[str, dict[str, Any]]:
    f = out / "results" / run_name / f"{setting}.jsonl"
    return {r["id"]: r for r in map(json.loads, f.read_text(encoding="utf-8").splitlines()) if not r["skipped"]}


def quantiles(xs: list[float]) -> str:
    if not xs:
        return "–"
    s = sorted(xs)

    def q(p: float) -> float:
        return s[min(len(s) - 1, int(p * len(s)))]

    return f"median {q(0.5):.3f}, p90 {q(0.9):.3f}, p99 {q(0.99):.3f}, max {s[-1]:.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=600)
    ap.add_argument("--shots", default="0")
    ap.add_argument("--out", default="runs/bench_quant")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--engines", default="vllm,llamacpp", help="which engines' schemes to run")
    a = ap.parse_args()
    engines = a.engines.split(",")
    entries = {k: v for k, v in schemes(a.tiny).items() if v["backend"] in engines}
    return measure(
        entries, a.items, [int(x) for x in a.shots.split(",")], Path(a.out), "tiny" if a.tiny else "Gemma 3 270M"
    )


def measure(
    entries: dict[str, dict[str, Any]], items: int, shots: list[int], where: Path, label: str, gpu: bool = False
) -> int:
    """Each entry's sweep in its own process, then the table and the verdicts against `vllm.bf16`."""
    root = where.resolve()
    data = root / "data"
    write_set(data, items)
    out = root / "sweep"
    missing = [str(Path(m["variants"][v]["file"])) for m in entries.values() for v in m["variants"]
               if not Path(m["variants"][v]["file"]).exists()]  # fmt: skip
    if missing:
        print(f"error: missing {', '.join(missing)}: run scripts/setup.sh (the tests make the tiny folders)")
        return 2
    rows = []
    for key, entry in entries.items():
        wall, rss, rc = run(config(root / f"{key}.yaml", out, [entry], data, shots), gpu)
        if rc:
            print(f"error: {key}: the sweep failed (exit {rc})", file=sys.stderr)
            return 1
        own = json.loads((out / "summary.json").read_text(encoding="utf-8"))["timings"]["stages"]
        speed = {x["setting"]: x.get("items_per_s") for x in own if x.get("stage") == "phase"}
        rows.append((key, rss, speed))
        print(f"{key}: {wall:.1f} s, peak {'GPU memory' if gpu else 'RSS'} {rss:.0f} MiB", flush=True)
    wall, _, rc = run(config(root / "all.yaml", out, list(entries.values()), data, shots))
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    settings = [f"jbeqa.{k}shot.{m}" for k in shots for m in ("constrained", "logprob")]
    run_of = {key: f"{e['name']}.{e['backend']}.{next(iter(e['variants']))}.ctx2048" for key, e in entries.items()}
    ref = run_of["vllm.bf16"]
    print(f"\nbench_quant: {items} statements, {label}; answers compared with {ref}")
    memory = "peak GPU memory MiB" if gpu else "peak RSS MiB"
    print(
        f"| scheme | setting | accuracy | F1 | flips vs BF16 | abs. label logprob diff vs BF16 | items/s | {memory} |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for key, rss, speed in rows:
        name = run_of[key]
        for setting in settings:
            r = next(x for x in summary["runs"] if x["run"] == name and x["setting"] == setting)
            values = r["metrics"]["values"]
            mine, base = records(out, name, setting), records(out, ref, setting)
            shared = sorted(set(mine) & set(base))
            flips = sum(mine[i]["pred"] != base[i]["pred"] for i in shared)
            diffs = [abs(mine[i]["logprobs"][k] - base[i]["logprobs"][k])
                     for i in shared if "logprobs" in mine[i] for k in ("0", "1")]  # fmt: skip
            items_s = speed.get(setting)
            print(
                f"| {key} | {setting} | {values['accuracy']['value']:.3f} | {values['f1']['value']:.3f} | "
                f"{flips}/{len(shared)} ({flips / max(len(shared), 1):.1%}) | {quantiles(diffs)} | "
                f"{'–' if items_s is None else round(items_s, 1)} | {rss:.0f} |"
            )
    print("\nverdicts (each variant against its engine's reference, non-inferiority at the task's margin):")
    for m in summary.get("noninferiority", []):
        for v in m["comparisons"]:
            ci = "" if v["ci_low"] is None else f" [{v['ci_low']:+.3f}, {v['ci_high']:+.3f}]"
            est = "–" if v["estimate"] is None else f"{v['estimate']:+.3f}"
            print(f"  {v['run']} vs {m['reference']}, {v['setting']} {v['metric']}: {est}{ci} {v['verdict']}")
    print(f"\nreport: {out / 'report.md'}; the last sweep took {wall:.1f} s, every answer read from the store")
    return rc


if __name__ == "__main__":
    sys.exit(main())
