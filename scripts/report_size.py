"""How large report.html gets for a full JBE-QA sweep: a synthetic output folder of RUNS runs x the demo's six
settings x 3,464 items (free-mode answers of ANSWER_CHARS characters), reported as the sweep does: with each
item's prompt, built by the JBE-QA task itself (4 exemplars from data/jbeqa for the 4-shot settings) from
synthetic items of realistic length (statements of QUESTION_CHARS characters; every fifth question has a
LEAD_IN_CHARS-character case description shared by its five statements, as in the exam).

    PYTHONPATH=$PWD .venv/bin/python scripts/report_size.py [RUNS] [SETTINGS]

Prints the sizes of report.html, the item data and the sidecar (if any), the prompts' text as stored (each
distinct line once) against their full length, and the time the report took."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from offline_eval.report import write_report
from offline_eval.report.browser import INLINE_LIMIT, SIDECAR
from offline_eval.report.inputs import ItemInputs
from offline_eval.results.records import ItemRecord, ResultsFolder, RunKey
from offline_eval.results.summary import SCHEMA_VERSION, Summary
from offline_eval.runtime.fileio import write_json_atomic
from offline_eval.tasks import make_task
from offline_eval.tasks.jbeqa.data import JBEQAItem
from offline_eval.tasks.jbeqa.task import JBEQARecord

N_ITEMS = 3464
ANSWER_CHARS = 120
SETTINGS = [f"jbeqa.{s}shot.{m}" for s in (0, 4) for m in ("constrained", "free", "logprob")]
SUBJECTS = ["民法", "刑法", "憲法"]
QUESTION_CHARS = 150
LEAD_IN_CHARS = 400
DATA = Path(__file__).resolve().parent.parent / "data" / "jbeqa"


def _prompts(settings: list[str], rng: np.random.Generator) -> tuple[ItemInputs, int]:
    """The prompts of every setting, as the sweep hands them to the report, and their full length in bytes."""
    pool = list("あいうえおかきくけこさしすせそ甲乙丙契約債権債務者善意悪意取消無効解除損害賠償請求占有所有権、。")
    text = lambda n: "".join(rng.choice(pool, n))  # noqa: E731
    task = make_task(
        "jbeqa",
        {"data": str(DATA), "protocol": "offline-eval", "shots": [0, 4], "mode": ["constrained", "free", "logprob"]},
        "report_size",
    )
    task.load()  # picks the exemplars
    lead = [text(LEAD_IN_CHARS) if q % 5 == 0 else "" for q in range(N_ITEMS // 5 + 1)]
    items = [
        JBEQAItem(
            id=f"令和{i % 6 + 1}年-{SUBJECTS[i % 3]}-{i}",
            year=f"令和{i % 6 + 1}年",
            subject="-",
            subject_jp=SUBJECTS[i % 3],
            theme="None",
            lead_in=lead[i // 5],
            instruction="次のアからオまでの各記述のうち、正しいものを２個選びなさい。",
            question=text(QUESTION_CHARS),
            remark="",
            label="Y",
            answer=True,
        )
        for i in range(N_ITEMS)
    ]
    inputs, full = ItemInputs(), 0
    for setting in task.settings():
        name = task.setting_name(setting)
        if name in settings:
            phase = task.build(items, setting)
            inputs.add_phase(name, [it.id for it in items], phase)
            full += sum(len(c.encode()) for r in phase.requests for _, c in r.messages or ())
    return inputs, full


def main() -> None:
    n_runs = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    settings = SETTINGS[: int(sys.argv[2])] if len(sys.argv) > 2 else SETTINGS
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 2, N_ITEMS)
    inputs, full = _prompts(settings, rng)
    stored = sum(len(t.encode()) for t in inputs.texts)
    with tempfile.TemporaryDirectory() as tmp:
        folder = ResultsFolder(Path(tmp))
        runs = []
        for k in range(n_runs):
            run = f"model{k // 4}.llamacpp.q{k % 4}.ctx4096"
            for setting in settings:
                pred = np.where(rng.random(N_ITEMS) < 0.7, gold, 1 - gold)
                free = setting.endswith("free")
                recs: list[ItemRecord] = [
                    JBEQARecord(
                        id=f"令和{i % 6 + 1}年-{SUBJECTS[i % 3]}-{i}",
                        subject=SUBJECTS[i % 3],
                        year=2019 + i % 6,
                        output=("はい、" * (ANSWER_CHARS // 3) if free else str(int(p))),
                        finish_reason="stop",
                        gold=int(g),
                        parsed=int(p),
                        pred=int(p),
                        scores={"correct": int(p == g), "faithful": 1},
                    )
                    for i, (p, g) in enumerate(zip(pred, gold))
                ]
                folder.write_records(RunKey(run, setting), recs)
                acc = float(np.mean(pred == gold))
                runs.append(
                    {
                        "model": f"model{k // 4}",
                        "variant": f"q{k % 4}",
                        "backend": "llamacpp",
                        "run": run,
                        "max_model_len": 4096,
                        "task": "jbeqa",
                        "setting": setting,
                        "options": {},
                        "prompt_format": None,
                        "n_items": N_ITEMS,
                        "primary_metric": "f1",
                        "metrics": {"values": {"f1": {"value": acc}, "accuracy": {"value": acc}}},
                        "weights_mb": 1000.0 / (1 + k % 4),
                        "throughput": {
                            "wall_s": 100.0,
                            "load_s": 5.0,
                            "items_per_s": 34.6,
                            "peak_rss_mb": 2000.0 / (1 + k % 4),
                        },
                    }
                )
        write_json_atomic(folder.summary, {"schema_version": SCHEMA_VERSION, "runs": runs})
        t0 = time.perf_counter()
        write_report(tmp, Summary.parse(json.loads(folder.summary.read_text()), str(folder.summary)), inputs)
        took = time.perf_counter() - t0
        report = folder.report_html.stat().st_size
        sidecar = folder.root / SIDECAR
        side = sidecar.stat().st_size if sidecar.exists() else 0
        print(
            f"{n_runs} runs x {len(settings)} settings x {N_ITEMS} items: report.html {report / 2**20:.1f} MB, "
            f"sidecar {side / 2**20:.1f} MB (inline limit {INLINE_LIMIT / 2**20:.0f} MB), report took {took:.1f} s"
        )
        print(
            f"prompts: {full / 2**20:.1f} MB of text over {len(settings)} settings, {stored / 2**20:.1f} MB stored "
            f"({len(inputs.texts)} distinct lines; {full / max(stored, 1):.1f}x smaller)"
        )


if __name__ == "__main__":
    main()
