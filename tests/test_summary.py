"""summary.json is one typed model: written and read by `Summary` only, its JSON Schema shipped and current, other
schema versions refused in one line, provenance filled from local facts (null with a reason, never guessed), and
the Python API returns it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from conftest import ROOT, run_cli
from test_verdicts import _config

from offline_eval.results.summary import SCHEMA_FILE, SCHEMA_VERSION, Summary, json_schema


@pytest.fixture
def swept(tmp_path: Path) -> Path:
    from offline_eval.pipeline.config import load_config
    from offline_eval.pipeline.options import SweepOptions
    from offline_eval.pipeline.orchestrate import run_sweep

    cfg = _config(tmp_path)
    run_sweep(
        load_config(cfg), SweepOptions(source=str(cfg), log=lambda _: None, command=["offline-eval", "sweep", str(cfg)])
    )
    return tmp_path / "out"


def test_the_shipped_schema_is_the_models_and_the_cli_prints_it():
    assert json.loads(SCHEMA_FILE.read_text(encoding="utf-8")) == json_schema(), (
        "offline_eval/schemas/summary.schema.json is out of date: run scripts/write_schema.py"
    )
    proc = run_cli("schema", "summary")
    assert proc.returncode == 0 and json.loads(proc.stdout) == json_schema()


def test_a_written_summary_validates_against_the_shipped_schema_and_reads_back_the_same(swept):
    raw = json.loads((swept / "summary.json").read_text(encoding="utf-8"))
    jsonschema.validate(raw, json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))  # an independent validator
    again = Summary.read(swept / "summary.json")
    assert again.to_json() == raw and raw["schema_version"] == SCHEMA_VERSION
    assert "version" not in raw  # the old untyped key


@pytest.mark.slow
def test_another_schema_version_is_refused_in_one_line(swept):
    raw = json.loads((swept / "summary.json").read_text(encoding="utf-8"))
    raw["schema_version"] = 1  # versions 2 and 3 are read forward (test_migrate.py); 1 is refused
    raw["provenance"]["sweep"]["offline_eval_version"] = "0.0.9"
    (swept / "summary.json").write_text(json.dumps(raw), encoding="utf-8")
    proc = run_cli("report", str(swept))
    err = proc.stderr.strip()
    assert proc.returncode == 2 and "Traceback" not in err and len(err.splitlines()) == 1
    assert "written by offline-eval 0.0.9 in summary schema version 1" in err and "re-run the sweep" in err


@pytest.mark.slow
def test_provenance_names_code_machine_loads_and_settings(swept):
    s = Summary.read(swept / "summary.json")
    assert s.provenance is not None
    sw = s.provenance.sweep
    assert sw.command[:2] == ["offline-eval", "sweep"] and sw.config and Path(sw.config).name == "m.yaml"
    assert len(sw.config_sha256) == 64 and sw.python and sw.os and sw.cpu_count
    assert sw.started <= (sw.ended or "") and sw.offline_eval_version
    if (ROOT / ".git").exists():
        assert sw.git_revision is not None and len(sw.git_revision) == 40 and isinstance(sw.git_dirty, bool)
    for field in ("git_revision", "git_dirty", "cpu_model", "gpus"):  # null only with a reason
        assert getattr(sw, field) is not None or field in sw.unknown
    (load, *_) = s.provenance.loads
    assert {x.run for x in s.provenance.loads} == {r.run for r in s.runs}
    weights = Path(load.path)
    assert load.files and load.files[0].size == weights.stat().st_size
    import hashlib

    assert load.files[0].sha256 == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert load.weights_digest and load.store_fingerprint and load.prompt_format == "plain"
    (setting,) = s.provenance.settings
    assert setting.n_items == 26 and setting.constraint == {"type": "choice", "choices": ["0", "1"]}
    assert [Path(f.path).name for f in setting.data_files] == ["test.jsonl"]
    assert setting.task_options["bootstrap"] == 1000 and len(setting.prompt_template_sha256) == 64
    html = (swept / "report.html").read_text(encoding="utf-8")
    assert f"weights {load.weights_digest[:12]}" in html  # the item browser names each run's weights
    md = (swept / "report.md").read_text(encoding="utf-8")
    assert "## Provenance" in md and "### Provenance: each load" in md


@pytest.mark.slow
def test_the_python_api_sweeps_and_loads_typed_records(tmp_path):
    import yaml

    import offline_eval

    cfg = yaml.safe_load(_config(tmp_path).read_text(encoding="utf-8"))
    first = offline_eval.sweep(cfg, progress=False, log=lambda _: None)
    again = offline_eval.sweep(cfg, progress=False, log=lambda _: None)  # a plain function: callable twice
    assert isinstance(first, Summary) and len(again.runs) == 3
    assert first.provenance is not None and first.provenance.sweep.config is None
    loaded = offline_eval.load(tmp_path / "out")
    run = loaded.runs[0]
    recs = loaded.records(run.run, run.setting)
    from offline_eval.tasks.jbeqa.task import JBEQARecord

    assert len(recs) == 26 and all(isinstance(r, JBEQARecord) for r in recs)
    pd = pytest.importorskip("pandas")
    frame = loaded.dataframe(setting=run.setting)
    assert isinstance(frame, pd.DataFrame) and len(frame) == 3 * 26 and {"run", "id", "parsed"} <= set(frame.columns)
