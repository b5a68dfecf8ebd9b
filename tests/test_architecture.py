"""The architecture's contracts, on the fake engine (fast tier): one engine registry, tasks found by folder and
owning their report sections, records flowing forward with each output file written once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import DATA, run_cli


def _config(tmp: Path, **jbeqa: object) -> Path:
    weights = tmp / "w.bin"
    weights.write_text("fake weights")
    cfg = tmp / "m.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "output_dir": str(tmp / "out"),
                "models": [
                    {
                        "name": "yes",
                        "backend": "fake",
                        "path": str(weights),
                        "max_model_len": 4096,
                        "engine_args": {"default": "1"},
                    },
                    {
                        "name": "no",
                        "backend": "fake",
                        "path": str(weights),
                        "max_model_len": 4096,
                        "engine_args": {"default": "0"},
                    },
                ],
                "tasks": {
                    "jbeqa": {
                        "protocol": "offline-eval",
                        "data": str(DATA),
                        "shots": [0, 4],
                        "mode": ["constrained", "logprob"],
                        **jbeqa,
                    }
                },
            }
        )
    )
    return cfg


def test_the_registry_is_the_only_list_of_engines():
    from offline_eval.cli import build_parser
    from offline_eval.inference.backends.registry import engine_names, get_engine

    names = engine_names()
    assert {"vllm", "llamacpp", "transformers", "fake"} <= set(names)
    run = next(
        a
        for a in build_parser()._subparsers._group_actions[0].choices["run"]._actions  # type: ignore[union-attr]
        if a.dest == "backend"
    )
    assert tuple(run.choices) == names
    assert get_engine("llamacpp").path_problem(str(DATA)) == "llamacpp needs a .gguf file"
    assert get_engine("fake").path_problem(str(DATA)) is None


def test_tasks_are_found_by_folder_and_own_their_report_sections():
    from partial import summary as typed

    from offline_eval.report.tables import detail_sections
    from offline_eval.tasks import get_task_class, task_names

    def build_tables(summary):  # type: ignore[no-untyped-def]
        return [t for _, tables in detail_sections(summary) for t in tables]

    assert set(task_names()) >= {"jbeqa", "legalevalq", "legalrikai"}  # a shipped task may join them
    jbeqa = get_task_class("jbeqa")
    assert jbeqa.metrics[0].name == jbeqa.primary_metric == "f1"
    run = {
        "run": "a",
        "setting": "jbeqa.0shot.constrained",
        "task": "jbeqa",
        "model": "a",
        "metrics": {"f1": 0.5, "f1_ci_low": 0.25, "f1_ci_high": 0.75, "subject.民法.f1": 0.5},
        "throughput": {},
    }
    titles = [t.title for t in build_tables(typed({"runs": [run]}))]
    assert titles[:2] == ["jbeqa: every metric per run", "JBE-QA: F1 per subject"]
    # A task this installation lacks still gets a leaderboard by its recorded primary metric.
    other = {**run, "task": "gone", "primary_metric": "f1"}
    assert "gone: every metric per run" in [t.title for t in build_tables(typed({"runs": [other]}))]


@pytest.mark.slow
def test_a_sweep_writes_each_output_file_once_and_the_report_from_memory(tmp_path, monkeypatch):
    from offline_eval.pipeline.config import load_config
    from offline_eval.pipeline.options import SweepOptions
    from offline_eval.pipeline.orchestrate import run_sweep
    from offline_eval.results.records import ResultsFolder

    writes: list[str] = []
    real = ResultsFolder.write_records
    monkeypatch.setattr(
        ResultsFolder, "write_records", lambda self, key, recs: (writes.append(str(key)), real(self, key, recs))[1]
    )
    cfg = _config(tmp_path)
    summary = run_sweep(load_config(cfg), SweepOptions(source=str(cfg), progress=False, log=lambda _: None)).to_json()
    assert sorted(writes) == sorted(set(writes)) and len(writes) == 8  # 2 models x 4 settings, once each
    out = tmp_path / "out"
    assert json.loads((out / "summary.json").read_text())["runs"] == json.loads(json.dumps(summary["runs"]))
    board = summary["leaderboards"]["jbeqa.0shot.constrained"]
    assert [r["run"] for r in board] == ["yes.fake.default.ctx4096", "no.fake.default.ctx4096"]
    # `offline-eval report` from the file renders what the sweep rendered from memory.
    before = (out / "report.md").read_text()
    assert run_cli("report", str(out)).returncode == 0
    assert (out / "report.md").read_text() == before


def test_an_evaluator_is_one_load(tmp_path):
    cfg = _config(tmp_path)
    raw = yaml.safe_load(cfg.read_text())
    raw["tasks"] = {
        "legalevalq": {
            "protocol": "offline-eval",
            "data": str(DATA.parent / "legalevalq" / "queries.json"),
            "scorer": str(tmp_path),
            "evaluator": {"name": "ev", "backend": "fake", "path": "w.bin", "max_model_len": [1024, 2048]},
        }
    }
    cfg.write_text(yaml.safe_dump(raw))
    proc = run_cli("models", "check", str(cfg))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "tasks.legalevalq.evaluator" in proc.stderr and "one variant and one max_model_len" in proc.stderr


@pytest.mark.parametrize("answers, expected", [({"default": "1"}, "1"), ({"answers": {"記述": "0"}}, "0")])
def test_the_fake_engine_is_scripted_and_honours_constraints(tmp_path, answers, expected):
    from offline_eval.inference.backends.registry import load_backend
    from offline_eval.inference.backends.spec import LoadSpec
    from offline_eval.inference.constraints import Choice, JsonSchema
    from offline_eval.inference.requests import Request, Sampling

    w = tmp_path / "w"
    w.write_text("x")
    b = load_backend(LoadSpec(name="f", backend="fake", path=str(w), engine_args=answers))
    ask = Request.chat([{"role": "user", "content": "記述：…"}], Sampling(max_tokens=4), Choice(["0", "1"]))
    (res,) = b.generate([ask])
    assert res.text == expected and res.prompt_tokens == len(b.render(ask).encode())
    schema = {"type": "object", "required": ["score"], "properties": {"score": {"type": "integer", "minimum": 1}}}
    (js,) = b.generate([Request.chat([{"role": "user", "content": "x"}], Sampling(max_tokens=64), JsonSchema(schema))])
    assert json.loads(js.text) == {"score": 1}


@pytest.mark.slow
def test_throughput_keeps_the_engine_start_apart(tmp_path, monkeypatch):
    """A phase that starts the engine reports the start as load_s; its wall_s and items/s are the phase's own."""
    import time

    from offline_eval.inference.backends.fake_backend import FakeBackend
    from offline_eval.pipeline.config import load_config
    from offline_eval.pipeline.options import SweepOptions
    from offline_eval.pipeline.orchestrate import run_sweep

    real_init = FakeBackend.__init__

    def slow_start(self, spec):  # type: ignore[no-untyped-def]
        time.sleep(0.6)
        real_init(self, spec)

    monkeypatch.setattr(FakeBackend, "__init__", slow_start)
    cfg = _config(tmp_path)
    summary = run_sweep(
        load_config(cfg), SweepOptions(source=str(cfg), only=["yes"], progress=False, log=lambda _: None)
    ).to_json()
    first, *rest = sorted(summary["runs"], key=lambda r: r["setting"])
    t = first["throughput"]
    assert t["load_s"] >= 0.6 and t["wall_s"] < 0.6, t
    assert t["items_per_s"] > first["n_items"] / 0.6  # the rate of the phase, not of the start
    assert all(r["throughput"]["load_s"] == 0 for r in rest)  # the engine started once


def test_debug_is_an_option_of_the_sweep_raising_what_would_fail_a_run(tmp_path, monkeypatch):
    """An unexpected error in a run (here a task's bug) fails that run only; with SweepOptions(debug=True) (the CLI's --debug) it is
    raised, traceback and all, and nothing reads the environment for it."""
    from offline_eval.pipeline.config import load_config
    from offline_eval.pipeline.options import SweepOptions
    from offline_eval.pipeline.orchestrate import run_sweep
    from offline_eval.tasks.jbeqa.task import JBEQATask

    def broken(self, records, setting):  # type: ignore[no-untyped-def]
        raise RuntimeError("a bug in a task")

    monkeypatch.setattr(JBEQATask, "aggregate", broken)
    monkeypatch.setenv("OFFLINE_EVAL_DEBUG", "1")  # no longer how a sweep is told
    cfg = _config(tmp_path)
    quiet = SweepOptions(source=str(cfg), only=["yes"], progress=False, log=lambda _: None)
    summary = run_sweep(load_config(cfg), quiet)
    assert [f.reason for f in summary.failures] == ["RuntimeError: a bug in a task"], summary.failures
    with pytest.raises(RuntimeError, match="a bug in a task"):
        run_sweep(load_config(cfg), SweepOptions(source=str(cfg), only=["yes"], progress=False, log=lambda _: None,
                                                 out_dir=str(tmp_path / "again"), debug=True))  # fmt: skip


def _code_tokens(text: str):  # type: ignore[no-untyped-def]
    """The tokens of a module's code: its comments and docstrings left out."""
    import io
    import tokenize

    prev = tokenize.NEWLINE
    for t in tokenize.generate_tokens(io.StringIO(text).readline):
        starts_statement = prev in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)
        if t.type in (tokenize.NAME, tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)) and not (
            t.type == tokenize.STRING and starts_statement
        ):
            yield t
        if t.type not in (tokenize.NL, tokenize.COMMENT):
            prev = t.type


@pytest.mark.slow
def test_outside_the_tasks_no_code_line_names_a_task_or_its_metrics():
    """Only a task's folder may know its name, its title and its parts (and, with the metric library, its
    metrics): the sweep, the report, the CLI, the engines and the executors render and rank what tasks declare.
    Comments and docstrings may name them; code (identifiers and strings) may not."""
    import re

    from offline_eval.tasks import get_task_class, task_names

    shared = {"mean", "score", "n_skipped", "n_scored", "parse_failures"}  # conventions every task may emit
    words, metrics = set(), set()
    for t in task_names():
        cls = get_task_class(t)
        words |= {t, cls.title, *cls.data_kinds} - {""}
        metrics |= {m.name for m in cls.metrics} - shared
    assert {"jbeqa", "JBE-QA", "legalrikai", "statrev", "legalevalq"} <= words
    spelled = re.compile("|".join(re.escape(w).replace("\\-", "-?") for w in sorted(words)), re.IGNORECASE)
    package = Path(__file__).resolve().parent.parent / "offline_eval"
    generic = [p for p in package.rglob("*.py") if "tasks" not in p.relative_to(package).parts]
    found = []
    for p in generic:
        for tok in _code_tokens(p.read_text(encoding="utf-8")):
            quoted = tok.string.strip("\"'")
            in_metrics = p.relative_to(package).parts[0] == "metrics"  # the library that computes them
            if spelled.search(tok.string) or (quoted in metrics and not in_metrics):
                found.append(f"{p.relative_to(package)}:{tok.start[0]}: {tok.string[:60]}")
    assert len(generic) > 40
    assert found == []


def test_validating_a_config_leaves_the_environment_alone():
    """Every engine module is imported to validate a config; none may change this process's environment (vLLM's
    module set VLLM_USE_V2_MODEL_RUNNER at import, for every sweep, vLLM or not)."""
    import os
    import subprocess
    import sys

    code = (
        "import os, json, offline_eval\n"  # the package itself turns the HF libraries offline, on purpose
        "before = dict(os.environ)\n"
        "from offline_eval.inference.backends.registry import engine_names, get_engine\n"
        "for n in engine_names(): get_engine(n).declared_class()\n"
        "print(json.dumps(sorted(set(os.environ.items()) ^ set(before.items()))))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_modules_stay_small_and_the_sweep_an_orchestrator():
    pkg = Path(__file__).resolve().parent.parent / "offline_eval"
    sizes = {
        p.relative_to(pkg).as_posix(): len(p.read_text(encoding="utf-8").split("\n")) - 1 for p in pkg.rglob("*.py")
    }
    assert len(sizes) > 100
    assert {m: n for m, n in sizes.items() if n > 450} == {}
    assert sizes["pipeline/orchestrate.py"] < 200


def test_no_function_is_over_100_lines_and_no_folder_over_16_modules():
    import ast

    pkg = Path(__file__).resolve().parent.parent / "offline_eval"
    long = {
        f"{p.relative_to(pkg).as_posix()}:{f.name}": n
        for p in pkg.rglob("*.py")
        for f in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and (n := (f.end_lineno or 0) - f.lineno + 1) > 100
    }
    assert long == {}
    crowded = {
        d.relative_to(pkg).as_posix(): n for d in [pkg, *pkg.rglob("*/")] if (n := len(list(d.glob("*.py")))) > 16
    }
    assert crowded == {}
