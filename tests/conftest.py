"""Shared fixtures: the tiny local models (built by scripts/setup.sh) and one engine of each kind per session."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "models" / "tiny"
DATA = ROOT / "data" / "jbeqa"
CLI = [sys.executable, "-m", "offline_eval.cli"]

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")


@pytest.fixture(scope="session")
def tiny() -> Path:
    if not (TINY / "hf" / "config.json").exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_model.py"), str(TINY)], check=True)
    return TINY


# vLLM eager in the tests that load it directly: a compile of the model (a minute or more on two cores, the first
# time) costs more than their few requests; compiling is test_compile_cache's and the compile benchmark's to test.
EAGER = {"compile": "never"}


def eager(backend: str) -> dict[str, str]:
    return dict(EAGER) if backend == "vllm" else {}


def spec_for(backend: str, tiny: Path, **kw):  # type: ignore[no-untyped-def]
    from offline_eval.inference.backends.spec import LoadSpec

    kw.setdefault("engine_options", eager(backend))
    path = tiny / "gguf" / "tiny-q8_0.gguf" if backend == "llamacpp" else tiny / "hf"
    return LoadSpec(name=f"tiny-{backend}", backend=backend, path=str(path), max_model_len=kw.pop("ctx", 2048), **kw)


_ENGINES: dict[str, object] = {}


@pytest.fixture(scope="session", params=["vllm", "llamacpp", "transformers"])
def engine(request, tiny):  # type: ignore[no-untyped-def]
    """Each real engine once per session (vLLM takes ~20 s to start)."""
    from offline_eval.inference.backends.registry import load_backend

    name = request.param
    if name not in _ENGINES:
        _ENGINES[name] = load_backend(spec_for(name, tiny))
    yield _ENGINES[name]


# A test that takes the tiny models or a real engine starts an engine: it belongs to `make test`, not to
# the fast tier (`make test-fast` runs `-m "not engine"` with no engine installed).
_ENGINE_FIXTURES = {"tiny", "engine", "bert", "fixed_bert"}


# `make test` runs the fast tier first, in its engine-free venv (scripts/test.sh): the tests that passed there are
# listed in the file OFFLINE_EVAL_RECORD_PASSED names and left out of the run on the real engines
# (OFFLINE_EVAL_SKIP_PASSED), so none runs twice; a test the fast tier skipped (a library it lacks, a model set-up
# builds) runs on the engines as before. Both are read once and taken out of the environment: a test that runs
# pytest itself (test_task_in_tree) must neither skip nor record.
_RECORD = os.environ.pop("OFFLINE_EVAL_RECORD_PASSED", None)
_SKIP_PASSED = os.environ.pop("OFFLINE_EVAL_SKIP_PASSED", None)
_outcomes: dict[str, bool] = {}


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    for item in items:
        if _ENGINE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.engine)
    if listed := _SKIP_PASSED:
        done = set(Path(listed).read_text("utf-8").split("\n")) if Path(listed).is_file() else set()
        config.hook.pytest_deselected(items=[i for i in items if i.nodeid in done])
        items[:] = [i for i in items if i.nodeid not in done]


def pytest_runtest_logreport(report):  # type: ignore[no-untyped-def]
    if _RECORD:
        passed = report.passed and not (report.when == "call" and hasattr(report, "wasxfail"))
        _outcomes[report.nodeid] = _outcomes.get(report.nodeid, True) and passed


def pytest_sessionfinish(session, exitstatus):  # type: ignore[no-untyped-def]
    for b in _ENGINES.values():
        b.close()  # type: ignore[attr-defined]
    if target := _RECORD:
        Path(target).write_text("".join(f"{n}\n" for n, ok in sorted(_outcomes.items()) if ok), "utf-8")


def stored_rows(db: Path) -> int:
    """Outputs committed to a store so far (0 while it does not exist or is being created): for kill-mid-run tests."""
    import sqlite3

    if not db.exists():
        return 0
    try:
        con = sqlite3.connect(str(db), timeout=1)
        try:
            return int(con.execute("SELECT COUNT(*) FROM outputs").fetchone()[0])
        finally:
            con.close()
    except sqlite3.OperationalError:
        return 0


# What says how and when a sweep was invoked, not what it computed: another command line, config file or clock.
INVOCATION = ("command", "config", "config_sha256", "started", "ended")


def comparable(summary: dict) -> dict:  # type: ignore[type-arg]
    """What two sweeps over the same data and models must agree on: everything but the wall clock (timings, each
    run's throughput, what each engine's start did) and the invocation's own provenance; every load's and setting's
    provenance is kept."""
    out = {k: v for k, v in summary.items() if k != "timings"}
    out["runs"] = [{k: v for k, v in r.items() if k != "throughput"} for r in summary["runs"]]
    prov = dict(out["provenance"])
    prov["sweep"] = {k: v for k, v in prov["sweep"].items() if k not in INVOCATION}
    prov["loads"] = [{k: v for k, v in x.items() if k != "engine_start"} for x in prov.get("loads") or []]
    out["provenance"] = prov
    return out


def run_cli(*args: str, cwd: Path | None = None, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd or ROOT, capture_output=True, text=True, timeout=timeout)


def run_tiny_jbeqa(*args: str, gguf: str = "tiny-q8_0.gguf") -> subprocess.CompletedProcess[str]:
    """`offline-eval run` of JBE-QA (the sample data) on a tiny GGUF with llama.cpp, plus `args`."""
    model = str(TINY / "gguf" / gguf)
    return run_cli(
        "run", "--backend", "llamacpp", "--model", model, "--task", "jbeqa", "--data", str(DATA),
        "--protocol", "offline-eval", *args,
    )  # fmt: skip


def statute(
    n: int,
    changed: dict[int, str],
    title: str = "架空法",
    body: str = "事業者は、第{i}号の事項を遵守しなければならない。",
) -> str:
    """An e-Gov-style statute of n captioned articles; `changed` replaces some articles' text."""
    return (
        title
        + "\n\n"
        + "".join(f"（第{i}条の見出し）\n第{i}条　{changed.get(i, body.format(i=i))}\n\n" for i in range(1, n + 1))
    )


@pytest.fixture(scope="session")
def demo_in_both_languages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The demo's folder (tests/fixtures/v3-demo) drawn again by `offline-eval report --lang` in each language,
    once per session: the i18n and the Chromium tests read the same two folders."""
    import shutil

    out = {}
    for lang in ("en", "ja"):
        folder = tmp_path_factory.mktemp(f"demo-{lang}") / "demo"
        shutil.copytree(ROOT / "tests" / "fixtures" / "v3-demo", folder)
        got = run_cli("report", str(folder), "--lang", lang)
        assert got.returncode == 0, got.stderr
        out[lang] = folder
    return out


@pytest.fixture
def offline_browser():  # type: ignore[no-untyped-def]
    """Debian's chromium under Playwright with its own network features off: reports must render offline."""
    import shutil

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (scripts/test.sh installs it where it can)")
    from playwright.sync_api import sync_playwright

    args = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"]
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium, args=[*args, "--disable-component-update", "--disable-sync"]
        )
        yield browser
        browser.close()


def metric(run: dict, name: str):  # type: ignore[no-untyped-def,type-arg]
    """A run's named metric's value, as summary.json (schema 4) holds it: runs[].metrics.values[name].value."""
    return run["metrics"]["values"][name]["value"]


def has_metric(run: dict, name: str) -> bool:  # type: ignore[type-arg]
    return name in run["metrics"]["values"]


def typed(run: dict):  # type: ignore[no-untyped-def,type-arg]
    """A run's metrics from summary.json's JSON, as the typed RunMetrics."""
    from offline_eval.metrics.values import RunMetrics

    return RunMetrics.model_validate(run["metrics"])


@functools.cache
def int4_kernel_problem() -> str | None:
    """Why vLLM's CPU build on this machine cannot run a W4A16/GPTQ/AWQ folder (its AVX2 build has no int4 kernel),
    as the engine says it; None where it can."""
    from offline_eval.inference.backends.vllm.quantized import int4_kernel_problem as problem

    return problem()


@pytest.fixture(autouse=True)
def _llvmlite_stays_out():  # type: ignore[no-untyped-def]
    """numba's llvmlite.binding, once imported, crashes every later vLLM start in this process (vLLM's CPU kernel
    rebinding scans sys.modules and trips on llvmlite's lazy library object): the test that imports it fails here,
    not the next twenty vLLM tests. Run such a library in a child, as tests/ppi_child.py does."""
    before = "llvmlite.binding" in sys.modules
    yield
    if not before and "llvmlite.binding" in sys.modules:
        pytest.fail("this test imported llvmlite.binding (numba) in the test process; run it in a child process")
