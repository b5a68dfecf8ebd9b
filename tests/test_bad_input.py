"""Bad input: one clear line naming file, record and field; exit code != 0; nothing finished is lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import DATA, ROOT, TINY, run_cli, typed


def write_config(
    tmp: Path,
    data: str,
    *,
    model_path: str | None = None,
    extra: dict | None = None,
    task_extra: dict | None = None,
    max_model_len: int = 2048,
) -> Path:
    cfg = {
        "output_dir": str(tmp / "out"),
        "models": [
            {
                "name": "tiny-gguf",
                "backend": "llamacpp",
                "path": model_path or str(TINY / "gguf" / "tiny-q8_0.gguf"),
                "max_model_len": max_model_len,
            }
        ],
        "tasks": {"jbeqa": {"protocol": "offline-eval", "data": data, "shots": [0], **(task_extra or {})}},
    }
    cfg.update(extra or {})
    p = tmp / "models.yaml"
    p.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    return p


def good_rows() -> list[str]:
    return (DATA / "test.jsonl").read_text(encoding="utf-8").splitlines()


def assert_one_line_error(proc, *needles: str) -> str:  # type: ignore[no-untyped-def]
    assert proc.returncode != 0, proc.stdout + proc.stderr
    err = proc.stderr.strip()
    assert "Traceback" not in err, err
    last = err.splitlines()[-1]
    assert last.startswith("offline-eval: error:"), err
    for n in needles:
        assert n in last, (n, last)
    return last


def sweep_with_rows(tmp: Path, lines: list[str] | bytes):  # type: ignore[no-untyped-def]
    f = tmp / "test.jsonl"
    f.write_bytes(lines if isinstance(lines, bytes) else ("\n".join(lines) + "\n").encode("utf-8"))
    return f, run_cli("sweep", str(write_config(tmp, str(f))))


def test_malformed_jsonl_line_names_file_and_line(tmp_path, tiny):
    lines = good_rows()
    lines[3] = lines[3][:-5]
    f, proc = sweep_with_rows(tmp_path, lines)
    assert_one_line_error(proc, str(f), "line 4", "malformed JSON")


def test_missing_field(tmp_path, tiny):
    lines = good_rows()
    row = json.loads(lines[2])
    del row["question"]
    lines[2] = json.dumps(row, ensure_ascii=False)
    f, proc = sweep_with_rows(tmp_path, lines)
    assert_one_line_error(proc, str(f), "line 3", f"id {row['id']}", "field 'question'", "missing")


def test_wrong_type(tmp_path, tiny):
    lines = good_rows()
    row = json.loads(lines[1])
    row["answer"] = "true"
    lines[1] = json.dumps(row, ensure_ascii=False)
    f, proc = sweep_with_rows(tmp_path, lines)
    assert_one_line_error(proc, str(f), "line 2", "field 'answer'", "'true'")


def test_label_not_y_or_n(tmp_path, tiny):
    lines = good_rows()
    row = json.loads(lines[5])
    row["label"] = "T"
    lines[5] = json.dumps(row, ensure_ascii=False)
    f, proc = sweep_with_rows(tmp_path, lines)
    assert_one_line_error(proc, str(f), "line 6", "field 'label'", "'Y' or 'N'")


def test_empty_file(tmp_path, tiny):
    f, proc = sweep_with_rows(tmp_path, b"")
    assert_one_line_error(proc, str(f), "empty")


def test_not_utf8(tmp_path, tiny):
    lines = good_rows()
    data = ("\n".join(lines[:4]) + "\n").encode("utf-8") + lines[4].encode("shift_jis") + b"\n"
    f, proc = sweep_with_rows(tmp_path, data)
    assert_one_line_error(proc, str(f), "line 5", "not UTF-8")


def test_url_as_data_path(tmp_path, tiny):
    proc = run_cli("sweep", str(write_config(tmp_path, "https://huggingface.co/datasets/x/jbe-qa")))
    assert_one_line_error(proc, "tasks.jbeqa.data", "URLs are refused")


def test_url_as_model_path(tmp_path, tiny):
    cfg = write_config(tmp_path, str(DATA), model_path="hf://org/model")
    for cmd in (["sweep", str(cfg)], ["models", "check", str(cfg)]):
        proc = run_cli(*cmd)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr
        assert "models.0.path" in proc.stderr and "URLs are refused" in proc.stderr


def test_model_path_does_not_exist(tmp_path, tiny):
    cfg = write_config(tmp_path, str(DATA), model_path=str(tmp_path / "nope.gguf"))
    last = assert_one_line_error(run_cli("sweep", str(cfg)), str(cfg), "models.0.path", "does not exist")
    assert "nope.gguf" in last
    proc = run_cli("models", "check", str(cfg))
    assert proc.returncode != 0 and "does not exist" in proc.stderr


def test_unknown_config_key(tmp_path, tiny):
    cfg = write_config(tmp_path, str(DATA), extra={"modles": []})
    assert_one_line_error(run_cli("sweep", str(cfg)), str(cfg), "field 'modles'", "unknown key")
    raw = yaml.safe_load(cfg.read_text())
    raw.pop("modles")
    raw["models"][0]["gpu_layers"] = 3
    cfg.write_text(yaml.safe_dump(raw))
    assert_one_line_error(run_cli("models", "check", str(cfg)), "field 'models.0.gpu_layers'", "unknown key")
    raw["models"][0].pop("gpu_layers")
    raw["tasks"]["jbeqa"]["shot"] = 4
    cfg.write_text(yaml.safe_dump(raw))
    assert_one_line_error(run_cli("sweep", str(cfg)), "field 'tasks.jbeqa.shot'", "unknown key")


def test_wrong_value_names_field_and_expectation(tmp_path, tiny):
    cfg = write_config(tmp_path, str(DATA))
    raw = yaml.safe_load(cfg.read_text())
    raw["models"][0]["backend"] = "ollama"
    cfg.write_text(yaml.safe_dump(raw))
    last = assert_one_line_error(run_cli("models", "check", str(cfg)), "models.0.backend", "Input should be")
    assert all(f"'{name}'" in last for name in ("vllm", "llamacpp", "transformers")), last


def test_bad_input_loses_nothing_already_computed(tmp_path, tiny):
    cfg = write_config(tmp_path, str(DATA), task_extra={"limit": 6})
    ok = run_cli("sweep", str(cfg))
    assert ok.returncode == 0, ok.stderr
    out = tmp_path / "out"
    before = {p: p.read_bytes() for p in [out / "summary.json", *sorted((out / "results").rglob("*.jsonl"))]}
    store_rows = _count(out / "store.sqlite")
    assert store_rows == 6
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n", encoding="utf-8")
    raw = yaml.safe_load(cfg.read_text())
    raw["tasks"]["jbeqa"]["data"] = str(bad)
    cfg.write_text(yaml.safe_dump(raw))
    assert_one_line_error(run_cli("sweep", str(cfg)), str(bad), "line 1")
    assert {p: p.read_bytes() for p in before} == before
    assert _count(out / "store.sqlite") == store_rows


def test_overflow_skip_is_counted_and_fail_names_the_item(tmp_path, tiny):
    # 0-shot prompts fit in 320 tokens; 4-shot prompts do not.
    cfg = write_config(tmp_path, str(DATA), max_model_len=320, task_extra={"shots": [0, 4], "limit": 5})
    proc = run_cli("sweep", str(cfg))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    by = {r["setting"]: typed(r) for r in summary["runs"]}
    assert by["jbeqa.0shot.constrained"]["n_skipped"] == 0
    assert by["jbeqa.4shot.constrained"]["n_skipped"] == 5
    assert "skipped (overflow)" in (tmp_path / "out" / "report.md").read_text()
    raw = yaml.safe_load(cfg.read_text())
    raw["tasks"]["jbeqa"]["overflow"] = "fail"
    cfg.write_text(yaml.safe_dump(raw))
    assert_one_line_error(run_cli("sweep", str(cfg)), "record ", "max_model_len 320", "overflow policy 'fail'")


def test_missing_engine_names_the_extra(tmp_path, tiny):
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['llama_cpp'] = None; from offline_eval.cli import main; "
        f"sys.exit(main(['run', '--backend', 'llamacpp', '--model', {str(TINY / 'gguf' / 'tiny-q8_0.gguf')!r}, "
        f"'--task', 'jbeqa', '--data', {str(DATA)!r}, '--limit', '2', '--out', {str(tmp_path / 'o')!r}]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode != 0
    assert "pip install 'offline-eval[llamacpp]'" in proc.stderr
    assert "Traceback" not in proc.stderr
    # Other commands still work without that engine.
    code2 = (
        "import sys; sys.modules['llama_cpp'] = None; sys.modules['vllm'] = None; "
        "from offline_eval.cli import main; "
        f"sys.exit(main(['data', 'validate', 'jbeqa', {str(DATA)!r}]))"
    )
    proc2 = subprocess.run([sys.executable, "-c", code2], capture_output=True, text=True, cwd=ROOT)
    assert proc2.returncode == 0, proc2.stderr
    assert "all: 38 items" in proc2.stdout  # the paper's protocol, the default, scores every split


def _count(db: Path) -> int:
    import sqlite3

    con = sqlite3.connect(str(db))
    try:
        return int(con.execute("SELECT COUNT(*) FROM outputs").fetchone()[0])
    finally:
        con.close()


@pytest.mark.parametrize("cmd", [[], ["sweep"], ["run"], ["report"], ["data", "validate"], ["models", "check"]])
@pytest.mark.slow
def test_every_command_has_help(cmd):
    proc = run_cli(*cmd, "--help")
    assert proc.returncode == 0 and "usage:" in proc.stdout


@pytest.mark.slow
def test_report_on_missing_dir(tmp_path):
    assert_one_line_error(run_cli("report", str(tmp_path)), "no summary.json")
