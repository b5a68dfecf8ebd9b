#!/usr/bin/env python
"""lm-evaluation-harness against offline-eval, before and after issue 16, side by side in one run.

    .venv/bin/python scripts/bench_lmeval.py --lmeval-python /work/lmeval-venv/bin/python
                                             [--n 2000] [--repeats 3] [--before 89a22c0] [--model models/tiny/hf]

The same --n JBE-QA-shaped items (as in bench_overhead.py) and the same tiny model on vLLM (CPU build), each
contender a whole process of its own, the three alternating within every repeat (the order rotates) so that the
load on a shared machine hits them alike:
  lm-eval  lm-evaluation-harness (`--model vllm`, `batch_size=auto`, the chat template and offline-eval's system
           prompt), loglikelihood over the two labels: scripts/lmeval_task/jbeqa_bench.yaml;
  after    `offline-eval run --backend vllm --mode constrained` from this checkout;
  before   the same from --before (default 89a22c0, the code before issue 16), in a temporary `git worktree`.
Per contender: median whole-process wall, median CPU seconds (the child's rusage, user + sys, with every
process under it: vLLM's engine and worker), the engine start and the scoring phase as the tool reports them
(offline-eval: summary.json's throughput; before issue 16 its items/s included the engine start; lm-eval: its
vLLM start and `loglikelihood` call, timed by scripts/lmeval_task/timed_lmeval.py), and accuracy (both score by
the more likely label, so the two should agree). Then the ratios after vs before and after vs lm-eval.
lm-eval is not a dependency: --lmeval-python is a Python that has it (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TASK_DIR = ROOT / "scripts/lmeval_task"
PR_SET_CHILD_SUBREAPER = 36

from bench_data import jbeqa_items  # noqa: E402


@dataclass
class Sample:
    wall_s: float
    cpu_s: float
    load_s: float | None = None
    phase_s: float | None = None
    items_per_s: float | None = None
    accuracy: float | None = None
    fixed_s: float | None = None


@dataclass
class Contender:
    name: str
    samples: list[Sample] = field(default_factory=list)
    note: str = ""


def make_items(n: int, folder: Path) -> None:
    """bench_overhead.py's items, plus `prompt` (offline-eval's user message) and `gold` for lm-eval's task."""
    from offline_eval.tasks.jbeqa.data import JBEQAItem
    from offline_eval.tasks.jbeqa.task import user_message

    def for_lmeval(r: dict[str, Any]) -> None:
        r["prompt"] = user_message(JBEQAItem.model_validate(r))
        r["gold"] = int(r["answer"])

    jbeqa_items(n, folder, for_lmeval)
    (folder / "items.jsonl").symlink_to(folder / "test.jsonl")


def timed_child(cmd: list[str], env: dict[str, str], cwd: Path, log: Path) -> tuple[float, float]:
    """Wall and CPU seconds (user + sys) of one whole process and every process under it."""
    with log.open("w") as out:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        cpu = ru.ru_utime + ru.ru_stime + reap_orphans()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        sys.exit(f"{cmd[0]} ... failed (exit {p.returncode}); the end of {log}:\n" + "\n".join(tail))
    return wall, cpu


def reap_orphans(grace_s: float = 30.0) -> float:
    """CPU seconds of descendants the child left behind. vLLM force-kills its engine process at shutdown, and the
    engine's worker, orphaned, would take its CPU time with it; as a subreaper we inherit and reap it."""
    cpu, deadline = 0.0, time.monotonic() + grace_s
    while True:
        try:
            pid, _, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return cpu
        if pid:
            cpu += ru.ru_utime + ru.ru_stime
        elif time.monotonic() > deadline:
            print(f"warning: descendants still running {grace_s:.0f} s after the child ended; not counted")
            return cpu
        else:
            time.sleep(0.05)


def offline_eval(python: str, pythonpath: Path, a: argparse.Namespace, tmp: Path, tag: str) -> Sample:
    out = tmp / f"out-{tag}"
    cmd = [
        python,
        "-m",
        "offline_eval.cli",
        "run",
        "--backend",
        "vllm",
        "--model",
        a.model,
        "--task",
        "jbeqa",
        "--protocol",
        "offline-eval",
    ]
    cmd += ["--data", str(tmp / "data"), "--shots", "0", "--mode", "constrained", "--max-model-len"]
    cmd += [str(a.max_model_len), "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    wall, cpu = timed_child(cmd, env, pythonpath, tmp / f"log-{tag}.txt")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    run = summary["runs"][0]
    tp = run["throughput"]
    timings = summary.get("timings") or {}
    return Sample(
        wall,
        cpu,
        load_s=tp.get("load_s"),
        phase_s=tp.get("wall_s"),
        items_per_s=tp.get("items_per_s"),
        accuracy=((run["metrics"].get("values") or {}).get("accuracy") or {}).get("value"),
        fixed_s=timings.get("fixed_s"),
    )


def lm_eval(a: argparse.Namespace, tmp: Path, tag: str) -> Sample:
    from offline_eval.tasks.jbeqa.task import SYSTEM_PROMPT

    out, times = tmp / f"out-{tag}", tmp / f"times-{tag}.json"
    margs = f"pretrained={a.model},max_model_len={a.max_model_len},gpu_memory_utilization=0.1,dtype=bfloat16"
    cmd = [a.lmeval_python, str(TASK_DIR / "timed_lmeval.py"), "run", "--model", "vllm", "--model_args", margs]
    cmd += ["--tasks", "jbeqa_bench", "--include_path", str(TASK_DIR), "--batch_size", "auto"]
    cmd += ["--apply_chat_template", "--system_instruction", SYSTEM_PROMPT, "--output_path", str(out)]
    # A fresh datasets cache every time: offline-eval reads its JSONL afresh too.
    env = {**os.environ, "LMEVAL_TIMES": str(times), "HF_DATASETS_CACHE": str(tmp / f"hf-{tag}")}
    env.pop("PYTHONPATH", None)
    wall, cpu = timed_child(cmd, env, tmp / "data", tmp / f"log-{tag}.txt")
    t = json.loads(times.read_text())
    result = json.loads(next(out.rglob("results_*.json")).read_text(encoding="utf-8"))
    acc = result["results"]["jbeqa_bench"].get("acc,none")
    phase = t.get("loglikelihood")
    return Sample(
        wall, cpu, load_s=t.get("load"), phase_s=phase, items_per_s=a.n / phase if phase else None, accuracy=acc
    )


def _med(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.median(vals) if vals else None


def _f(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _ratio(num: float | None, den: float | None) -> str:
    return "-" if num is None or den is None or den == 0 else f"{num / den:.2f}x"


def report(cs: dict[str, Contender], a: argparse.Namespace) -> None:
    print(f"\n{a.n} JBE-QA-shaped items, {a.model} on vLLM (CPU build), median of {a.repeats} alternating repeats")
    header = ["", "wall s", "CPU s", "engine start s", "phase s", "phase items/s", "fixed s", "accuracy"]
    rows = []
    for c in cs.values():
        s = c.samples
        rows.append(
            [
                c.name,
                _f(_med([x.wall_s for x in s])),
                _f(_med([x.cpu_s for x in s])),
                _f(_med([x.load_s for x in s])),
                _f(_med([x.phase_s for x in s]), 2),
                _f(_med([x.items_per_s for x in s])),
                _f(_med([x.fixed_s for x in s])),
                _f(_med([x.accuracy for x in s]), 3),
            ]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        print("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths))))
    for c in cs.values():
        if c.note:
            print(f"  {c.name}: {c.note}")
        print(f"  {c.name} walls: {', '.join(f'{x.wall_s:.1f}' for x in c.samples)} s")

    def med(name: str, attr: str) -> float | None:
        return _med([getattr(x, attr) for x in cs[name].samples]) if name in cs else None

    print("\nratios (above 1: after is better)")
    for other in ("before", "lm-eval"):
        if other not in cs:
            continue
        print(
            f"  after vs {other}: wall {_ratio(med(other, 'wall_s'), med('after', 'wall_s'))}, "
            f"CPU {_ratio(med(other, 'cpu_s'), med('after', 'cpu_s'))}, "
            f"phase items/s {_ratio(med('after', 'items_per_s'), med(other, 'items_per_s'))}"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lmeval-python", help="a Python with lm-eval 0.4.13 and vllm; without it lm-eval is skipped")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--before", default="89a22c0", help="the commit to compare against ('' to skip)")
    ap.add_argument("--model", default=str(ROOT / "models/tiny/hf"))
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--keep", help="keep the logs and outputs in this folder")
    a = ap.parse_args()
    a.model = str(Path(a.model).resolve())
    ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # see reap_orphans
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ[k] = "1"
    py = sys.executable
    tmp = Path(a.keep).resolve() if a.keep else Path(tempfile.mkdtemp(prefix="bench-lmeval-"))
    tmp.mkdir(parents=True, exist_ok=True)
    before = tmp / "before-worktree"
    try:
        (tmp / "data").mkdir(exist_ok=True)
        make_items(a.n, tmp / "data")
        runners: dict[str, Any] = {}
        cs: dict[str, Contender] = {}
        if a.lmeval_python:
            runners["lm-eval"] = lambda tag: lm_eval(a, tmp, tag)
            cs["lm-eval"] = Contender("lm-eval", note="phase = its loglikelihood call (2 requests per item)")
        runners["after"] = lambda tag: offline_eval(py, ROOT, a, tmp, tag)
        cs["after"] = Contender("after")
        if a.before:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(before), a.before], check=True)
            runners["before"] = lambda tag: offline_eval(py, before, a, tmp, tag)
            cs["before"] = Contender("before", note=f"{a.before}: its items/s and phase include the engine start")
        # Touch the heavy imports once with each Python so the first contender does not pay a cold page cache.
        for p in {py, a.lmeval_python} - {None}:
            subprocess.run([p, "-c", "import torch, vllm, transformers"], capture_output=True, cwd=tmp)
        names = list(runners)
        for i in range(a.repeats):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                s = runners[name](f"{name}-{i}")
                cs[name].samples.append(s)
                print(
                    f"repeat {i + 1} {name}: wall {s.wall_s:.1f} s, CPU {s.cpu_s:.1f} s, "
                    f"phase {_f(s.items_per_s)} items/s",
                    flush=True,
                )
        report(cs, a)
    finally:
        if before.exists():
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)], check=False)
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
