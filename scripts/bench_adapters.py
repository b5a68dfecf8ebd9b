#!/usr/bin/env python
"""Four LoRA adapters over one base on vLLM: one engine load serving all four (multi-LoRA, the sweep's default where
the adapter variants share a model entry) against four loads, one per adapter, side by side in one run.

    .venv/bin/python scripts/bench_adapters.py [--items 200] [--adapters a,b,c,d] [--repeats 1] [--out DIR]

Each way is one `offline-eval sweep` in a process of its own, into an output folder of its own (so both generate
every answer), over JBE-QA statements in the release's form, 0-shot, constrained and logprob. It prints per way the
wall time, the engine starts the sweep made and their seconds, and the phases' items/s; then the ratio, and whether
both ways gave the same answers. The adapters are the tiny model's (scripts/make_adapters.py, built by set-up)."""

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

TINY = ROOT / "models" / "tiny"


def config(path: Path, out: Path, models: list[dict[str, Any]], data: Path) -> Path:
    import yaml

    cfg = {
        "output_dir": str(out),
        "models": models,
        "tasks": {"jbeqa": {"data": str(data), "protocol": "offline-eval", "shots": [0],
                            "mode": ["constrained", "logprob"]}},
    }  # fmt: skip
    path.write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def ways(names: list[str]) -> dict[str, list[dict[str, Any]]]:
    """'one load': one model entry, an adapter variant each; 'N loads': one model entry per adapter."""
    base = {"backend": "vllm", "path": str(TINY / "hf"), "max_model_len": 1024}
    variant = {n: {"adapter": str(TINY / "adapters" / n)} for n in names}
    return {
        "one load": [{"name": "m", **base, "variants": variant}],
        f"{len(names)} loads": [{"name": f"m{i}", **base, "variants": {n: variant[n]}} for i, n in enumerate(names)],
    }


def sweep(cfg: Path) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "offline_eval.cli", "sweep", str(cfg)], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode:
        print(proc.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"error: {cfg}: the sweep failed (exit {proc.returncode})")
    return wall


def answers(out: Path) -> dict[str, list[Any]]:
    """adapter -> its logprob records' label log-probabilities, in item order."""
    got = {}
    for f in sorted((out / "results").glob("*/jbeqa.0shot.logprob.jsonl")):
        adapter = f.parent.name.split(".")[2]
        got[adapter] = [json.loads(x)["logprobs"] for x in f.read_text(encoding="utf-8").splitlines()]
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=200)
    ap.add_argument("--adapters", default="a,b,c,d")
    ap.add_argument("--repeats", type=int, default=1, help="each way this many times, alternating")
    ap.add_argument("--out", default="runs/bench_adapters")
    a = ap.parse_args()
    names = a.adapters.split(",")
    missing = [n for n in names if not (TINY / "adapters" / n / "adapter_config.json").exists()]
    if missing:
        print(f"error: no adapter {', '.join(missing)} in {TINY / 'adapters'}: run scripts/setup.sh")
        return 2
    root = Path(a.out).resolve()
    data = root / "data"
    write_set(data, a.items)
    rows: dict[str, list[tuple[float, int, float, float]]] = {}
    outs: dict[str, Path] = {}
    for r in range(a.repeats):
        for k, (way, models) in enumerate(ways(names).items()):
            out = root / f"out-{k}-{r}"
            wall = sweep(config(root / f"{k}.yaml", out, models, data))
            summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
            starts = [x["engine_start"] for x in summary["provenance"]["loads"] if x.get("engine_start")]
            own = [s for s in starts if "shared" not in s]
            phases = [x for x in summary["timings"]["stages"] if x.get("stage") == "phase"]
            rate = sum(x["items"] for x in phases) / sum(x["s"] for x in phases)
            rows.setdefault(way, []).append((wall, len(own), sum(s["start_s"] for s in own), rate))
            outs[way] = out
    print(f"\nbench_adapters: {len(names)} adapters over the tiny model on vLLM (CPU build), {a.items} statements, "
          f"0-shot constrained + logprob, {a.repeats} repeat(s) each, alternating")  # fmt: skip
    print("| way | wall s | engine starts | start s | phase items/s |")
    print("|---|---|---|---|---|")
    med = {}
    for way, got in rows.items():
        wall, n, start, rate = (sorted(col)[len(col) // 2] for col in zip(*got))
        med[way] = wall
        print(f"| {way} | {wall:.1f} | {n} | {start:.1f} | {rate:.1f} |")
    one, many = (answers(outs[w]) for w in rows)
    same = all(abs(x[k] - y[k]) < 1e-4 for n in names for x, y in zip(one[n], many[n]) for k in x) and set(one) == set(
        many
    ) == set(names)
    first, second = list(med)
    print(f"one load / {second}: {med[second] / med[first]:.2f}x faster, answers identical: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
