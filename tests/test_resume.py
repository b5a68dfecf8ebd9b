"""SIGKILL mid-task, re-run: results/ and summary.json match an uninterrupted run; nothing stored is redone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import yaml
from conftest import CLI, DATA, ROOT, TINY, comparable, run_cli, stored_rows

N = 240


def _dataset(tmp: Path) -> Path:
    base = [json.loads(x) for x in (DATA / "test.jsonl").read_text(encoding="utf-8").splitlines()]
    d = tmp / "data"
    d.mkdir()
    with (d / "test.jsonl").open("w", encoding="utf-8") as fh:
        for i in range(N):
            r = dict(base[i % len(base)])
            r["id"] = f"{r['id']}-v{i:03d}"
            r["question"] = f"{r['question']}（設例{i}）"
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    (d / "train.jsonl").write_text((DATA / "train.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    return d


def _config(tmp: Path, data: Path, out: Path) -> Path:
    cfg = {
        "output_dir": str(out),
        "runner": {"chunk_size": 8},
        "models": [
            {
                "name": "tiny-gguf",
                "backend": "llamacpp",
                "path": str(TINY / "gguf" / "tiny-q8_0.gguf"),
                "max_model_len": 2048,
            }
        ],
        "tasks": {
            "jbeqa": {
                "protocol": "offline-eval",
                "data": str(data),
                "shots": [0, 4],
                "mode": ["free", "constrained"],
                "max_tokens": 48,
            }
        },
    }
    p = tmp / f"{out.name}.yaml"
    p.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    return p


def _snapshot(out: Path) -> tuple[dict[str, bytes], dict]:
    results = {str(p.relative_to(out)): p.read_bytes() for p in sorted((out / "results").rglob("*.jsonl"))}
    return results, comparable(json.loads((out / "summary.json").read_text()))


def test_sigkill_then_resume_matches_uninterrupted_run(tmp_path, tiny):
    data = _dataset(tmp_path)
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    cfg_k = _config(tmp_path, data, killed)

    proc = subprocess.Popen(
        [*CLI, "sweep", str(cfg_k)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 300
    while stored_rows(killed / "store.sqlite") < 24 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    at_kill = stored_rows(killed / "store.sqlite")
    total = 4 * N
    assert 0 < at_kill < total, f"kill landed outside the run ({at_kill} of {total} stored)"
    assert at_kill % 8 == 0  # whole chunks only: each chunk is one committed transaction

    resumed = run_cli("sweep", str(cfg_k))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    s = json.loads((killed / "summary.json").read_text())
    assert sum(r["throughput"]["generated"] for r in s["runs"]) == total - at_kill

    done = run_cli("sweep", str(_config(tmp_path, data, clean)))
    assert done.returncode == 0, done.stderr[-2000:]
    rk, sk = _snapshot(killed)
    rc, sc = _snapshot(clean)
    assert rk == rc
    assert sk == sc
