"""`sweep --ray` on a real local Ray cluster (one per module): the same results as a serial sweep, a killed
worker fails only its unit, data parallelism, and SIGKILL of the driver then resume."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from conftest import CLI, DATA, ROOT, TINY, comparable, run_cli, stored_rows

LIMIT = 10
QUANTS = ("f16", "q8_0", "q4_0")
SETTINGS = ("jbeqa.0shot.constrained", "jbeqa.0shot.free")


def _config(
    tmp: Path,
    name: str,
    *,
    dp: int = 1,
    runner: dict | None = None,
    resources: dict | None = None,
    quants: tuple[str, ...] = QUANTS,
) -> Path:
    model = {
        "name": "tg",
        "backend": "llamacpp",
        "path": str(TINY / "gguf" / "tiny-f16.gguf"),
        "max_model_len": 1024,
        "variants": {q: {"file": str(TINY / "gguf" / f"tiny-{q}.gguf")} for q in quants},
        "data_parallel_size": dp,
        **({"resources": resources} if resources else {}),
    }
    cfg = {
        "output_dir": str(tmp / name),
        "runner": {"chunk_size": 4, **(runner or {})},
        "models": [model],
        "tasks": {
            "jbeqa": {
                "protocol": "offline-eval",
                "data": str(DATA),
                "shots": [0],
                "mode": ["constrained", "free"],
                "limit": LIMIT,
                "max_tokens": 8,
            }
        },
    }
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return p


def _sweep(cfg: Path, lines: list[str] | None = None, **kw):  # type: ignore[no-untyped-def]
    from offline_eval.pipeline.config import load_config
    from offline_eval.pipeline.options import SweepOptions
    from offline_eval.pipeline.orchestrate import run_sweep

    hook = kw.pop("on_log", None)

    def log(msg: str) -> None:
        if lines is not None:
            lines.append(msg)
        if hook is not None:
            hook(msg)

    return run_sweep(load_config(cfg), SweepOptions(source=str(cfg), progress=False, log=log, **kw)).to_json()


def _results(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted((out / "results").rglob("*.jsonl"))}


def _summary(out: Path) -> dict:
    return comparable(json.loads((out / "summary.json").read_text()))


@pytest.fixture(scope="module")
def cluster():  # type: ignore[no-untyped-def]
    ray = pytest.importorskip("ray")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100 * 2**20,
        _node_ip_address="127.0.0.1",
        logging_level="WARNING",
    )
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture(scope="module")
def serial(tmp_path_factory, tiny):  # type: ignore[no-untyped-def]
    """The reference: the same sweep, one engine load after another in this process."""
    tmp = tmp_path_factory.mktemp("serial")
    _sweep(_config(tmp, "out"))
    return tmp / "out"


# How long the first unit loaded waits for a second one to be loaded beside it. Only a sweep that runs one unit
# at a time reaches it (the second unit's load takes seconds): it bounds the wait, it does not time anything.
BARRIER_S = 600


def test_ray_sweep_equals_serial_and_runs_units_in_parallel(tmp_path, cluster, serial):
    """Parallelism is shown by a barrier, not by timing: each of the first two units loaded holds its engine
    (1 CPU of the 2-CPU cluster) until the other has loaded its own, so the sweep finishes only if two units
    are running on the cluster at once. Run one after another, the first would wait for ever (BARRIER_S)."""
    lines: list[str] = []
    barrier = threading.Barrier(2)
    loaded = itertools.count()
    met: list[str] = []

    def hold_until_two_are_loaded(msg: str) -> None:
        if " on Ray: " in msg and next(loaded) < 2:
            try:
                barrier.wait(timeout=BARRIER_S)
                met.append(msg)
            except threading.BrokenBarrierError:
                pass

    s = _sweep(_config(tmp_path, "out"), lines, ray="auto", on_log=hold_until_two_are_loaded)
    assert not s["failures"]
    assert len(met) == 2, lines  # two units held their engines at the same time
    assert _results(tmp_path / "out") == _results(serial) and len(_results(serial)) == 6
    assert _summary(tmp_path / "out") == _summary(serial)
    # Each unit in its own worker process, and the two that met in two different ones.
    pids = [ln.split(" pid ")[1] for ln in lines if " on Ray: " in ln]
    assert len(set(pids)) == 3
    assert len({m.split(" pid ")[1] for m in met}) == 2


def test_killed_worker_fails_only_its_unit_and_a_rerun_completes_it(tmp_path, cluster, serial):
    victim = "tg.llamacpp.q8_0.ctx1024"

    def kill_its_worker(msg: str) -> None:
        if msg.startswith(f"[{victim}] on Ray: "):
            os.kill(int(msg.rsplit(" pid ", 1)[1]), signal.SIGKILL)

    cfg = _config(tmp_path, "out")
    s = _sweep(cfg, ray="auto", on_log=kill_its_worker)
    assert [f["run"] for f in s["failures"]] == [victim]
    assert "Ray worker running this engine was lost" in s["failures"][0]["reason"]
    assert sorted({r["run"] for r in s["runs"]}) == ["tg.llamacpp.f16.ctx1024", "tg.llamacpp.q4_0.ctx1024"]
    done = run_cli("sweep", str(cfg), "--ray", cluster)
    assert done.returncode == 0, done.stderr[-2000:]
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    generated = {(r["run"], r["setting"]): r["throughput"]["generated"] for r in s["runs"]}
    assert generated == {
        (f"tg.llamacpp.{q}.ctx1024", st): (LIMIT if q == "q8_0" else 0) for q in QUANTS for st in SETTINGS
    }
    assert "1 replica(s)" in done.stderr and f"[{victim}] on Ray" in done.stderr
    assert _results(tmp_path / "out") == _results(serial)
    assert _summary(tmp_path / "out") == _summary(serial)


def test_data_parallel_2_gives_the_answers_of_1(tmp_path, cluster, serial):
    lines: list[str] = []
    s = _sweep(_config(tmp_path, "out", dp=2, quants=("q8_0",)), lines, ray="auto")
    assert not s["failures"]
    assert any(" on Ray: 2 replica(s): " in ln for ln in lines)
    pids = next(ln for ln in lines if " on Ray: " in ln).split(" pid ")[1:]
    assert len(set(pids)) == 2
    mine = _results(tmp_path / "out")
    assert mine == {k: v for k, v in _results(serial).items() if "q8_0" in k} and len(mine) == 2


def test_a_unit_no_node_can_hold_fails_without_waiting(tmp_path, cluster, tiny):
    s = _sweep(_config(tmp_path, "out", resources={"GPU": 1}, quants=("q4_0",)), ray="auto")
    assert [f["run"] for f in s["failures"]] == ["tg.llamacpp.q4_0.ctx1024"]
    assert "needs CPU=1, GPU=1 per replica" in s["failures"][0]["reason"]


def test_sigkill_of_the_driver_then_resume_equals_an_uninterrupted_run(tmp_path, cluster, serial):
    cfg = _config(tmp_path, "out", runner={"executor": "ray", "address": cluster})
    proc = subprocess.Popen(
        [*CLI, "sweep", str(cfg)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    db = tmp_path / "out" / "store.sqlite"
    total = len(QUANTS) * len(SETTINGS) * LIMIT
    deadline = time.time() + 300
    while stored_rows(db) < 4 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    at_kill = stored_rows(db)
    assert 0 < at_kill < total, f"kill landed outside the sweep ({at_kill} of {total} stored)"
    resumed = run_cli("sweep", str(cfg))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert sum(r["throughput"]["generated"] for r in s["runs"]) == total - at_kill
    assert _results(tmp_path / "out") == _results(serial)
    assert _summary(tmp_path / "out") == _summary(serial)


def test_without_ray_installed_the_flag_names_the_extra(tmp_path):
    cfg = _config(tmp_path, "out", quants=("q4_0",))
    code = (
        "import sys; sys.modules['ray'] = None; from offline_eval.cli import main; "
        f"sys.argv = ['offline-eval', 'sweep', {str(cfg)!r}, '--ray', 'auto']; raise SystemExit(main())"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "offline-eval: error: the 'ray' executor is not installed: pip install 'offline-eval[ray]'"
    ]
    assert not (tmp_path / "out" / "results").exists()
