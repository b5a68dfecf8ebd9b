"""How large report.html gets for a full JBE-QA sweep: a synthetic output folder of RUNS runs x the demo's six
settings x 3,464 items (free-mode answers of ANSWER_CHARS characters), reported with `offline-eval report`.

    PYTHONPATH=$PWD .venv/bin/python scripts/report_size.py [RUNS] [SETTINGS]

Prints the sizes of report.html, the item data and the sidecar (if any), and the time the report took."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from offline_eval.fileio import write_json_atomic
from offline_eval.report import write_report
from offline_eval.report.browser import INLINE_LIMIT, SIDECAR
from offline_eval.results import ResultsFolder, RunKey

N_ITEMS = 3464
ANSWER_CHARS = 120
SETTINGS = [f"jbeqa.{s}shot.{m}" for s in (0, 4) for m in ("constrained", "free", "logprob")]
SUBJECTS = ["民法", "刑法", "憲法"]


def main() -> None:
    n_runs = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    settings = SETTINGS[: int(sys.argv[2])] if len(sys.argv) > 2 else SETTINGS
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 2, N_ITEMS)
    with tempfile.TemporaryDirectory() as tmp:
        folder = ResultsFolder(Path(tmp))
        runs = []
        for k in range(n_runs):
            run = f"model{k // 4}.llamacpp.q{k % 4}.ctx4096"
            for setting in settings:
                pred = np.where(rng.random(N_ITEMS) < 0.7, gold, 1 - gold)
                free = setting.endswith("free")
                recs = [{"id": f"令和{i % 6 + 1}年-{SUBJECTS[i % 3]}-{i}", "subject": SUBJECTS[i % 3],
                         "output": ("はい、" * (ANSWER_CHARS // 3) if free else str(int(p))), "parsed": int(p),
                         "gold": int(g), "pred": int(p), "skipped": False, "finish_reason": "stop",
                         "scores": {"correct": int(p == g), "faithful": 1}} for i, (p, g) in enumerate(zip(pred, gold))]
                folder.write_records(RunKey(run, setting), recs)
                acc = float(np.mean(pred == gold))
                runs.append({"model": f"model{k // 4}", "variant": f"q{k % 4}", "backend": "llamacpp", "run": run,
                             "max_model_len": 4096, "task": "jbeqa", "setting": setting, "n_items": N_ITEMS,
                             "primary_metric": "f1", "metrics": {"f1": acc, "accuracy": acc},
                             "weights_mb": 1000.0 / (1 + k % 4),
                             "throughput": {"wall_s": 100.0, "load_s": 5.0, "items_per_s": 34.6,
                                            "peak_rss_mb": 2000.0 / (1 + k % 4)}})
        write_json_atomic(folder.summary, {"version": 1, "runs": runs})
        t0 = time.perf_counter()
        write_report(tmp, json.loads(folder.summary.read_text()))
        took = time.perf_counter() - t0
        report = folder.report_html.stat().st_size
        sidecar = folder.root / SIDECAR
        side = sidecar.stat().st_size if sidecar.exists() else 0
        print(f"{n_runs} runs x {len(settings)} settings x {N_ITEMS} items: report.html {report / 2**20:.1f} MB, "
              f"sidecar {side / 2**20:.1f} MB (inline limit {INLINE_LIMIT / 2**20:.0f} MB), report took {took:.1f} s")


if __name__ == "__main__":
    main()
