"""backend: openai in models.yaml: its own keys are validated with errors that name the field (no server)."""

from __future__ import annotations

import pytest
import yaml

from offline_eval.pipeline.config import load_config
from offline_eval.runtime.errors import InputError


def _write(tmp_path, model: dict) -> str:  # type: ignore[no-untyped-def]
    p = tmp_path / "models.yaml"
    p.write_text(
        yaml.safe_dump({"models": [model], "tasks": {"jbeqa": {"protocol": "offline-eval", "data": "d"}}}),
        encoding="utf-8",
    )
    return str(p)


@pytest.mark.parametrize(
    "extra, field, words",
    [
        ({}, "models.0.base_url", "Field required"),
        ({"base_url": "ftp://x/v1"}, "models.0.base_url", "http://host:port/v1"),
        ({"base_url": "http://u:secret@h:1/v1"}, "models.0.base_url", "api_key_env"),
        ({"base_url": "http://h:1/v1", "path": "m"}, "models.0.path", "takes no `path`"),
        ({"base_url": "http://h:1/v1", "server": "tgi"}, "models.0.server", "'auto', 'vllm' or 'llamacpp'"),
        ({"base_url": "http://h:1/v1", "tokenizer": "https://hub/x"}, "models.0.tokenizer", "URLs are refused"),
    ],
)
def test_openai_keys_are_checked_and_named(tmp_path, extra, field, words):  # type: ignore[no-untyped-def]
    model = {"name": "s", "backend": "openai", "model": "tiny", **extra}
    with pytest.raises(InputError) as e:
        load_config(_write(tmp_path, model))
    assert f"field '{field}'" in str(e.value) and words in str(e.value)


def test_server_keys_belong_to_their_engine(tmp_path):  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as e:
        load_config(_write(tmp_path, {"name": "m", "backend": "vllm", "path": "p", "base_url": "http://h/v1"}))
    assert "field 'models.0.base_url'" in str(e.value) and "unknown key" in str(e.value)


def test_served_model_spec(tmp_path):  # type: ignore[no-untyped-def]
    (tmp_path / "tok").mkdir()
    cfg = load_config(
        _write(
            tmp_path,
            {
                "name": "s",
                "backend": "openai",
                "base_url": "http://10.0.0.5:8000/v1/",
                "model": "m",
                "tokenizer": "tok",
            },
        )
    )
    m = cfg.models[0]
    spec = m.load_spec("default")
    assert m.run_name("default", 0) == "s.openai.default.ctxserver" and spec.max_model_len == 0
    assert spec.engine_options["base_url"] == "http://10.0.0.5:8000/v1"
    assert spec.engine_options["tokenizer"] == str(tmp_path / "tok") and spec.engine_options["max_concurrency"] is None
    assert m.server_urls() == ["http://10.0.0.5:8000/v1"] and m.path_problem("default", "f", 0) is None


def test_a_judges_and_an_evaluators_relative_tokenizer_resolve_against_the_config_file(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """The same key, the same rule, wherever the model is declared: under `models:`, as a LegalRikai judge, as
    LegalEval-Q's evaluator (it used to be resolved only at the top level)."""
    from offline_eval.tasks import make_task

    (tmp_path / "tok").mkdir()
    served = {"backend": "openai", "base_url": "http://10.0.0.5:8000/v1", "model": "m", "tokenizer": "tok"}
    (tmp_path / "models.yaml").write_text(
        yaml.safe_dump(
            {
                "models": [{"name": "s", **served}],
                "tasks": {
                    "legalrikai": {"protocol": "offline-eval", "data": "d", "judges": [{"name": "j", **served}]},
                    "legalevalq": {
                        "protocol": "offline-eval",
                        "data": "q.json",
                        "scorer": "sc",
                        "evaluator": {"name": "e", **served},
                    },
                },
            }
        ),
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path.parent)  # the working directory is not the config's folder
    cfg = load_config(tmp_path / "models.yaml")
    want = str(tmp_path / "tok")
    assert cfg.models[0].engine_options["tokenizer"] == want
    (judge,) = make_task("legalrikai", cfg.tasks["legalrikai"]).options.judges  # type: ignore[attr-defined]
    evaluator = make_task("legalevalq", cfg.tasks["legalevalq"]).options.evaluator  # type: ignore[attr-defined]
    assert judge.engine_options["tokenizer"] == want and evaluator.engine_options["tokenizer"] == want


def test_a_task_without_judges_or_an_evaluator_is_read_as_written(tmp_path):  # type: ignore[no-untyped-def]
    """Resolving the paths of a task's models leaves an absent key absent: it was set to null, which LegalRikai
    refused as 'judges: Input should be a valid list' and LegalEval-Q blamed on the evaluator's type."""
    from offline_eval.tasks import make_task

    (tmp_path / "models.yaml").write_text(
        yaml.safe_dump(
            {
                "models": [{"name": "m", "backend": "fake", "path": "w.bin"}],
                "tasks": {
                    "legalrikai": {"protocol": "offline-eval", "data": "d"},
                    "legalevalq": {"protocol": "offline-eval", "data": "q.json", "scorer": "sc"},
                },
            }
        ),
        encoding="utf-8",
    )
    cfg = load_config(tmp_path / "models.yaml")
    assert "judges" not in cfg.tasks["legalrikai"] and "evaluator" not in cfg.tasks["legalevalq"]
    assert make_task("legalrikai", cfg.tasks["legalrikai"]).options.judges == []  # type: ignore[attr-defined]
    with pytest.raises(InputError, match=r"tasks\.legalevalq\.evaluator': Field required"):
        make_task("legalevalq", cfg.tasks["legalevalq"])
