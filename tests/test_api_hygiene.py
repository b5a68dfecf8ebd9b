"""A sweep from the Python API leaves the process as it found it (issue 30, item 4): a user's notebook session, in a
fresh interpreter, runs a served-model sweep (the scripted server, vLLM's reply forms) and a fake-engine sweep,
then connects a local socket, reads matplotlib's settings and the live threads, and raises from its log callback.
Beside it, the API's refusals: a config of the wrong type, an unknown run, check=True, load() during a sweep."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import DATA, ROOT

pytestmark = pytest.mark.slow  # two sweeps in a subprocess, and a report with plots

NOTEBOOK = """
import json, socket, sys, threading
import matplotlib
sys.path.insert(0, {tests!r})
from hostile_server import HostileServer
import offline_eval

matplotlib.use("svg")  # the user's own choices, which a sweep must leave as they were
matplotlib.rcParams["font.family"] = "serif"
before = dict(matplotlib.rcParams)
threads = {{t.name for t in threading.enumerate()}}
out = {{}}

server = HostileServer()
served = {{
    "output_dir": {tmp!r} + "/served",
    "models": [{{"name": "s", "backend": "openai", "base_url": server.url, "model": "hostile", "max_model_len": 4096}}],
    "tasks": {{"jbeqa": {{"protocol": "offline-eval", "data": {data!r}, "shots": [0], "mode": ["constrained"],
                        "limit": 4}}}},
}}
offline_eval.sweep(served, progress=False, log=lambda _: None)
server.close()

fake = {{
    "output_dir": {tmp!r} + "/fake",
    "models": [{{"name": "m", "backend": "fake", "path": {weights!r}, "max_model_len": 4096,
                "variants": {{"a": {{}}, "b": {{"options": {{"default": "0"}}}}}}}}],
    "tasks": {{"jbeqa": {{"protocol": "offline-eval", "data": {data!r}, "shots": [0], "mode": ["constrained"],
                        "limit": 4}}}},
}}
summary = offline_eval.sweep(fake, log=lambda _: None)

listener = socket.create_server(("127.0.0.2", 0))  # a loopback host no config named
socket.create_connection(listener.getsockname(), timeout=5).close()
out["socket"] = "connected"
out["rc_changed"] = sorted(k for k, v in matplotlib.rcParams.items() if before.get(k) != v)
out["backend"] = matplotlib.get_backend()
out["new_threads"] = sorted({{t.name for t in threading.enumerate() if t.is_alive()}} - threads)

class Mine(Exception):
    pass

def log(line):
    if "[1/" in line:
        raise Mine("the user's own bug")

try:
    offline_eval.sweep(fake, log=log)
    out["raised"] = None
except Mine as e:
    out["raised"] = ["Mine", str(e)]
except Exception as e:
    out["raised"] = [type(e).__name__, str(e)]
print(json.dumps(out))
"""


def test_a_notebook_session_is_left_as_it_was(tmp_path):
    (tmp_path / "w.bin").write_text("fake weights")
    code = NOTEBOOK.format(
        tests=str(ROOT / "tests"), tmp=str(tmp_path), data=str(DATA), weights=str(tmp_path / "w.bin")
    )
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().split("\n")[-1])
    assert out["socket"] == "connected"
    assert out["rc_changed"] == [] and out["backend"] == "svg"
    assert out["new_threads"] == []
    assert out["raised"] == ["Mine", "the user's own bug"]
    # The raising callback's sweep recorded no failure for the model: it stopped, as the user's bug said.
    summary = json.loads((tmp_path / "fake" / "summary.json").read_text(encoding="utf-8"))
    assert summary["failures"] == []


def _fake(tmp: Path, **model: object) -> Path:
    (tmp / "w.bin").write_text("fake weights")
    cfg = {
        "output_dir": str(tmp / "out"),
        "models": [{"name": "m", "backend": "fake", "path": str(tmp / "w.bin"), "max_model_len": 4096, **model}],
        "tasks": {
            "jbeqa": {"protocol": "offline-eval", "data": str(DATA), "shots": [0], "mode": ["constrained"], "limit": 4}
        },
    }
    p = tmp / "m.yaml"
    p.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return p


def test_the_apis_refusals_are_one_clear_error(tmp_path):
    import offline_eval
    from offline_eval.runtime.errors import InputError, SweepFailed
    from offline_eval.runtime.lock import OutputLock

    with pytest.raises(InputError, match="takes a models.yaml path or a mapping, not list"):
        offline_eval.sweep([str(_fake(tmp_path))])
    offline_eval.sweep(str(_fake(tmp_path)), progress=False, log=lambda _: None)
    done = offline_eval.load(tmp_path / "out")
    with pytest.raises(InputError, match="no run 'typo'"):
        done.records("typo", "jbeqa.0shot.constrained")
    with pytest.raises(InputError, match="no run 'typo'"):
        done.dataframe(run="typo")

    missing = _fake(tmp_path, variants={"ok": {}, "gone": {"options": {"no_such_option": 1}}})
    failed = offline_eval.sweep(str(missing), progress=False, log=lambda _: None)
    assert [f.variant for f in failed.failures] == ["gone"]  # the default: failures are in the summary
    with pytest.raises(SweepFailed, match="m.fake.gone.ctx4096: "):
        offline_eval.sweep(str(missing), progress=False, log=lambda _: None, check=True)

    with OutputLock(tmp_path / "out"):  # a sweep writing into the folder
        with pytest.raises(InputError, match="a sweep is writing into this folder"):
            offline_eval.load(tmp_path / "out")
        with pytest.raises(InputError, match="a sweep is writing into this folder"):
            done.records(done.runs[0].run, done.runs[0].setting)
    offline_eval.sweep(str(_fake(tmp_path, engine_args={"default": "0"})), progress=False, log=lambda _: None)
    with pytest.raises(InputError, match="summary.json was rewritten since it was loaded"):
        done.records(done.runs[0].run, done.runs[0].setting)


def test_an_option_the_sweep_does_not_know_is_refused_naming_it(tmp_path: Path) -> None:
    import offline_eval
    from offline_eval.runtime.errors import InputError

    with pytest.raises(InputError, match="unknown option 'lmit'; the options are debug, dry_run, engine_log"):
        offline_eval.sweep(str(_fake(tmp_path)), lmit=3, log=lambda _: None)
    assert callable(offline_eval.sweep) and offline_eval.sweep.__module__ == "offline_eval.api"
