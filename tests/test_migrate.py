"""Old folders read forward: the version-3 and version-2 folders kept in tests/fixtures (made by the demo's
llama.cpp part before schema 4, and before schema 3) open in load(), report, annotate, compare and verify, each
saying in one line that it migrated; every one of their numbers is where scripts/v3_to_v4.py's own mapping says it
is; a re-sweep writes the current version (SCHEMA_VERSION)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

import offline_eval
from offline_eval.metrics.values import MetricValue, RunMetrics
from offline_eval.results.records import RunEntry
from offline_eval.results.summary import SCHEMA_VERSION, Summary
from offline_eval.runtime.errors import InputError

FIXTURE = ROOT / "tests" / "fixtures" / "v3-demo"
MADE_AT = "/work/main/"  # the checkout the fixture was made in: its paths are rewritten to this one's
V2 = ROOT / "tests" / "fixtures" / "v2-demo"
V2_MADE_AT = "/tmp/v2wt/"  # a worktree of git 2674d2a, the last commit that wrote version 2


def made_at(tmp_path: Path) -> Path:
    """The checkout the fixtures were made in, as far as they read it: this one's models (a link) and data, but data/jbeqa
    as it was then (tests/fixtures/demo-data: its instructions are the release's since), and the fixtures'
    configs, byte for byte (the summaries hash them)."""
    root = tmp_path / "made-at"
    if not root.is_dir():
        (root / "tests" / "fixtures").mkdir(parents=True)
        (root / "models").symlink_to(ROOT / "models")
        (root / "data").mkdir()
        for d in (ROOT / "data").iterdir():  # copies: paths are resolved, and must stay under this root
            if d.name != "jbeqa":
                shutil.copytree(d, root / "data" / d.name)
        shutil.copytree(ROOT / "tests" / "fixtures" / "demo-data" / "jbeqa", root / "data" / "jbeqa")
        for f in ("v2-demo.yaml", "v3-demo.yaml"):
            shutil.copy(ROOT / "tests" / "fixtures" / f, root / "tests" / "fixtures" / f)
    return root


def resweep_config(tmp_path: Path, name: str) -> str:
    """The fixture's config for a sweep with today's code: it names no protocol, and ran offline-eval's (the
    default is the papers' since), so its copy says so."""
    root = made_at(tmp_path)
    text = (root / "tests" / "fixtures" / name).read_text("utf-8")
    for task in ("jbeqa", "legalevalq", "legalrikai"):
        text = text.replace(f"\n  {task}:\n", f"\n  {task}:\n    protocol: offline-eval\n", 1)
    out = root / "tests" / "fixtures" / f"resweep-{name}"
    out.write_text(text, "utf-8")
    return str(out)


def v3_copy(tmp_path: Path, fixture: Path = FIXTURE, made: str = MADE_AT) -> Path:
    out = tmp_path / fixture.name
    shutil.copytree(fixture, out)
    s = out / "summary.json"
    text = s.read_text("utf-8")
    text = text.replace(f"{made}models/", "\0models/")  # resolved paths: made_at's models/ is a link to this one's
    s.write_text(text.replace(made, f"{made_at(tmp_path)}/").replace("\0", f"{ROOT}/"), "utf-8")
    return out


def v2_copy(tmp_path: Path) -> Path:
    return v3_copy(tmp_path, V2, V2_MADE_AT)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "offline_eval.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def migrated_lines(err: str) -> list[str]:
    return [x for x in err.splitlines() if f"read forward to version {SCHEMA_VERSION}" in x]


def every_number_where_it_was(old: dict, s: Summary, tmp_path: Path, capsys) -> None:
    """By scripts/v3_to_v4.py's own mapping of every number (not the migration's), and more than 900 of them."""
    new, was = tmp_path / "v4.json", tmp_path / "v3.json"
    new.write_text(json.dumps(s.to_json(), ensure_ascii=False), "utf-8")
    was.write_text(json.dumps(old, ensure_ascii=False), "utf-8")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import v3_to_v4
    finally:
        sys.path.pop(0)
    capsys.readouterr()
    assert v3_to_v4.main([str(was), str(new)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("v3 -> v4: ") and " 0 differ, 0 unaccounted" in out
    assert int(out.split()[3]) > 900  # every number of 33 or 37 runs


def test_load_reads_a_v3_folder_forward_in_one_line_and_every_number_is_where_it_was(tmp_path, capsys):
    folder = v3_copy(tmp_path)
    s = offline_eval.load(folder)
    [line] = migrated_lines(capsys.readouterr().err)
    assert "schema version 3" in line and str(folder / "summary.json") in line
    assert s.schema_version == SCHEMA_VERSION == 5 and s.migrated_from == 3
    raw = json.loads((folder / "summary.json").read_text("utf-8"))
    assert raw["schema_version"] == 3  # the file is left as it is
    # by hand, one run: Gemma's 0-shot constrained JBE-QA, flat keys against typed fields
    flat = next(r for r in raw["runs"] if r["run"].startswith("gemma") and r["setting"] == "jbeqa.0shot.constrained")
    m = next(r for r in s.runs if r.run == flat["run"] and r.setting == flat["setting"]).metrics
    old = flat["metrics"]
    assert m["f1"] == old["f1"] and m["accuracy"] == old["accuracy"] and m["n_clusters"] == old["n_clusters"]
    f1 = m.metric("f1")
    assert f1 is not None and f1.design_effect == old["design_effect"] and f1.n_clusters == old["n_clusters"]
    civil = m.groups("subject", "f1")["民法"]
    assert (civil.value, civil.n, civil.n_clusters) == tuple(
        old[f"subject.民法.{k}"] for k in ("f1", "n", "n_clusters")
    )
    assert civil.note == "n too small" and civil.ci_low is None  # 2 clusters: withheld, and why
    assert set(m.groups("year", "accuracy")) == {k.split(".")[1] for k in old if k.startswith("year.")}
    every_number_where_it_was(raw, s, tmp_path, capsys)
    # no key string carries structure any more
    keys = {k for r in s.runs for k in r.metrics.values}
    assert not {k for k in keys if "." in k or "@" in k or k.endswith(("_ci_low", "_ci_high"))}
    again = Summary.parse(s.to_json(), "round trip")
    assert again.runs == s.runs and again.migrated_from is None


def test_the_proof_script_finds_a_number_moved_or_changed(tmp_path, capsys):
    """The script is an oracle that can fail: a changed F1 and a lost subject are found and exit 1."""
    folder = v3_copy(tmp_path)
    s = offline_eval.load(folder).to_json()
    run = s["runs"][0]
    run["metrics"]["values"]["f1"]["value"] = 0.123
    del run["metrics"]["breakdowns"]["subject"]["民法"]
    new = tmp_path / "v4.json"
    new.write_text(json.dumps(s, ensure_ascii=False), "utf-8")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "v3_to_v4.py"), str(folder / "summary.json"), str(new)],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 1
    first = proc.stdout.splitlines()[0]
    assert first.startswith("v3 -> v4:") and " 0 differ" not in first
    assert "f1 = " in proc.stdout and "0.123" in proc.stdout and "subject.民法.f1 = " in proc.stdout


def test_report_and_annotate_open_a_v3_folder_saying_so_once(tmp_path):
    folder = v3_copy(tmp_path)
    rep = cli("report", str(folder))
    assert rep.returncode == 0, rep.stderr
    assert len(migrated_lines(rep.stderr)) == 1
    md = (folder / "report.md").read_text("utf-8")
    assert "JBE-QA: F1 per subject" in md and "民法" in md and "n too small" in md
    ann = cli("annotate", str(folder), "--task", "legalrikai", "--sample", "2", "--out", str(tmp_path / "a.html"))
    assert ann.returncode == 0, ann.stderr
    assert len(migrated_lines(ann.stderr)) == 1 and (tmp_path / "a.html").is_file()


def test_other_versions_are_refused_in_one_line(tmp_path):
    for version in (1, SCHEMA_VERSION + 1):
        raw = json.loads((FIXTURE / "summary.json").read_text("utf-8"))
        raw["schema_version"] = version
        with pytest.raises(InputError) as e:
            Summary.parse(raw, "s.json")
        assert f"version {version}" in str(e.value) and f"reads versions 2 to {SCHEMA_VERSION}" in str(e.value)


def test_load_reads_a_v2_folder_forward_and_every_number_is_where_it_was(tmp_path, capsys):
    """Version 2 is version 3's JSON without provenance, its version under `version`: the same numbers, read on
    through 3 -> 4."""
    folder = v2_copy(tmp_path)
    s = offline_eval.load(folder)
    [line] = migrated_lines(capsys.readouterr().err)
    assert "schema version 2" in line and str(folder / "summary.json") in line
    assert s.migrated_from == 2 and s.provenance is None and len(s.runs) == 33
    raw = json.loads((folder / "summary.json").read_text("utf-8"))
    assert raw["version"] == 2 and "schema_version" not in raw and "provenance" not in raw  # left as it is
    by_hand = next(r for r in raw["runs"] if r["run"].startswith("gemma") and r["setting"] == "jbeqa.0shot.constrained")
    m = next(r for r in s.runs if r.key == (by_hand["run"], by_hand["setting"])).metrics
    assert m["f1"] == by_hand["metrics"]["f1"] == pytest.approx(0.857143)
    assert s.dataframe(setting="jbeqa.0shot.constrained").shape[0] == 12  # 3 runs x 4 items, typed records
    every_number_where_it_was({**{k: v for k, v in raw.items() if k != "version"}, "schema_version": 3}, s,
                              tmp_path, capsys)  # fmt: skip
    # version 2 kept an entry's version-1 keys as they were: no reader uses them, and they go
    raw["runs"][0]["legacy_key"] = 1
    assert Summary.parse(raw, "s.json").runs[0] == s.runs[0]


def test_report_annotate_verify_and_compare_open_a_v2_folder_saying_so_once(tmp_path):
    folder = v2_copy(tmp_path)
    rep = cli("report", str(folder))
    assert rep.returncode == 0, rep.stderr
    assert len(migrated_lines(rep.stderr)) == 1 and "schema version 2" in rep.stderr
    md = (folder / "report.md").read_text("utf-8")
    assert "JBE-QA: F1 per subject" in md and "judge scores" in md and "0.857" in md
    # Version 2 recorded no data digests: annotate needs the sweep's config to rebuild the prompts, and says what
    # it cannot check; without it, one line naming --config.
    page = tmp_path / "a.html"
    refused = cli("annotate", str(folder), "--task", "legalrikai", "--sample", "2", "--out", str(page))
    assert refused.returncode == 2 and "--config" in refused.stderr and "Traceback" not in refused.stderr
    config = str(made_at(tmp_path) / "tests" / "fixtures" / "v2-demo.yaml")
    ann = cli("annotate", str(folder), "--task", "legalrikai", "--sample", "2", "--out", str(page), "--config", config)
    assert ann.returncode == 0, ann.stderr
    assert len(migrated_lines(ann.stderr)) == 1 and "recorded no digest of the data" in ann.stderr and page.is_file()
    got = cli("verify", str(folder))
    assert got.returncode == 2 and len(migrated_lines(got.stderr)) == 1
    assert "schema version 2 recorded none" in got.stderr and "re-run the sweep" in got.stderr
    # compare matches the runs and says it could check nothing about the inputs; two v2 folders, which recorded
    # no task options, are refused setting by setting in words
    # (--no-verify: a v2 folder recorded no provenance, so verify can check nothing of it)
    both = cli("compare", str(folder), str(v2_copy(tmp_path / "again")), "--out", str(tmp_path / "c2"), "--no-verify")
    assert both.returncode == 0, both.stderr
    assert (
        "none recorded in either folder" in both.stdout
        and "neither folder recorded the setting's task options" in both.stdout
    )
    fresh = v3_copy(tmp_path)
    cmp = cli("compare", str(folder), str(fresh), "--out", str(tmp_path / "cmp"), "--no-verify")
    assert cmp.returncode == 0, cmp.stderr
    assert len(migrated_lines(cmp.stderr)) == 2  # each folder says so once
    assert "sweep: provenance: none recorded: its data, weights and prompts are not checked" in cmp.stdout
    assert (
        "jbeqa.0shot.constrained (offline-eval protocol)  gemma-gguf.llamacpp.default.ctx4096 -> gemma-gguf"
        in cmp.stdout
    )


def test_version_3_flat_metrics_are_read_forward_by_migrate_only():
    """The model takes today's form alone (as the shipped JSON Schema does); migrate.forward reads version 3's flat
    map forward and gives the design effect to the run's primary metric."""
    from pydantic import ValidationError

    from offline_eval.results.migrate import forward

    flat = {"adj_score": 50.0, "adj_score_ci_low": 40.0, "adj_score_ci_high": 60.0, "mean": 51.0,
            "mean_ci_low": None, "mean_ci_high": None, "n_clusters": 3, "design_effect": 1.5,
            "mean.train": 49.0, "mean.validation": 53.0}  # fmt: skip
    fields = dict(model="m", variant="v", backend="b", run="r", max_model_len=1, task="legalevalq",
                  setting="legalevalq", options={}, prompt_format=None, n_items=3, primary_metric="adj_score",
                  weights_mb=0.0, throughput={})  # fmt: skip
    with pytest.raises(ValidationError, match="adj_score_ci_low"):
        RunEntry(**fields, metrics=flat)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        RunMetrics.model_validate(flat)
    raw = forward(
        {"schema_version": 3, "runs": [{**fields, "metrics": flat}]}, 3, SCHEMA_VERSION, RunEntry.model_fields
    )
    e = RunEntry.model_validate(raw["runs"][0])
    assert e.metrics.metric("adj_score") == MetricValue(
        value=50.0, ci_low=40.0, ci_high=60.0, n_clusters=3, design_effect=1.5
    )
    assert e.metrics.metric("mean") == MetricValue(value=51.0, n_clusters=3, note="n too small")
    assert {g: x["mean"].value for g, x in e.metrics.breakdowns["split"].items()} == {"train": 49.0, "validation": 53.0}
    assert RunMetrics.model_validate({}).values == {}


@pytest.mark.engine
def test_verify_rebuilds_a_v3_folder_and_a_resweep_writes_v4(tmp_path):
    """verify recomputes the migrated summary from the store with today's code: every number matches, except
    LegalEval-Q's where this checkout's setup trained another scorer (its files' digests say so)."""
    folder = v3_copy(tmp_path)
    got = cli("verify", str(folder))
    assert len(migrated_lines(got.stderr)) == 1 and "were rendered by an older offline-eval" in got.stderr
    # The scorer's libraries load while it rebuilds (torchao's kernels, torch's deprecations): not on the terminal.
    assert all(x.startswith("offline-eval") for x in got.stderr.splitlines()), got.stderr
    problems = [x for x in got.stdout.splitlines() if x and not x.startswith(("claimed, not checked", "  - "))]
    assert all("legalevalq" in x for x in problems), problems
    # each checkout's setup builds its own tiny BERT and trains its own scorer: a mismatch must name their files
    scorer_changed = any(("tiny-scorer/" in x or "tiny-bert/" in x) and " changed" in x for x in problems)
    assert scorer_changed or not problems
    again = cli("sweep", resweep_config(tmp_path, "v3-demo.yaml"), "--out", str(folder))
    assert again.returncode == 0, again.stderr[-2000:]
    counts = re.findall(r"\((\d+) generated, (\d+) cached", again.stdout + again.stderr)
    assert counts and all(g == "0" for g, _ in counts)  # the store served every output
    assert json.loads((folder / "summary.json").read_text("utf-8"))["schema_version"] == SCHEMA_VERSION
    assert not migrated_lines(cli("report", str(folder)).stderr)


@pytest.mark.engine
def test_a_resweep_of_a_v2_folder_writes_v4_from_its_store_and_verifies(tmp_path):
    """The way forward verify names: the sweep again into the v2 folder, every output served by its store, the
    results files as version 2 wrote them, and a version-4 summary that verify rebuilds."""
    folder = v2_copy(tmp_path)
    again = cli("sweep", resweep_config(tmp_path, "v2-demo.yaml"), "--out", str(folder))
    assert again.returncode == 0, again.stderr[-2000:]
    counts = re.findall(r"\((\d+) generated, (\d+) cached", again.stdout + again.stderr)
    counts += re.findall(r": (\d+) generated, (\d+) cached", again.stdout + again.stderr)
    assert counts and all(g == "0" for g, _ in counts)
    # (LegalEval-Q's depend on the scorer, which each checkout's setup trains anew: see the v3 test above)
    kept = [p for p in (V2 / "results").rglob("*.jsonl") if not p.name.startswith("legalevalq")]
    assert len(kept) == 30
    for old in kept:
        assert (folder / old.relative_to(V2)).read_bytes() == old.read_bytes(), old
    assert json.loads((folder / "summary.json").read_text("utf-8"))["schema_version"] == SCHEMA_VERSION
    got = cli("verify", str(folder))
    assert got.returncode == 0 and not migrated_lines(got.stderr), got.stdout[-2000:]
