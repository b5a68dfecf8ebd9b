"""`offline-eval verify DIR` rebuilds summary.json and results/ from the store, the data, the config and the weights
with the sweep's own stages, and compares them whole: exit 0 on an untouched folder (listing what it takes as
claimed), exit 1 with one line per mismatch after each tamper, exit 2 on a folder that is not a sweep's. Every
tamper runs through the CLI on a real folder made by a sweep (the fake engine, JBE-QA and LegalRikai with a
judge)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import DATA, ROOT, metric, run_cli
from test_i18n import english_left

pytestmark = pytest.mark.slow  # sweeps and a CLI per case: `make test` runs them, the fast tier does not

JBEQA = "jbeqa.0shot.constrained"
BF16, SAME, BROKEN = "m.fake.bf16.ctx65536", "m.fake.same.ctx65536", "m.fake.broken.ctx65536"


def _golds() -> dict[str, str]:
    from test_verdicts import _golds as golds

    return golds()


def _make(tmp: Path) -> Path:
    """A sweep folder whose config names everything relative to itself, so the whole tree can be copied."""
    shutil.copytree(DATA, tmp / "data" / "jbeqa")
    shutil.copytree(ROOT / "data" / "legalrikai", tmp / "data" / "legalrikai")
    (tmp / "w.bin").write_text("fake weights")
    right = {"answers": _golds(), "default": "1"}
    judge = {"name": "j", "backend": "fake", "path": "w.bin", "max_model_len": 65536}
    cfg = {
        "output_dir": "out",
        "models": [
            {
                "name": "m",
                "backend": "fake",
                "path": "w.bin",
                "max_model_len": 65536,
                "variants": {
                    "bf16": {"options": right},
                    "same": {"options": right},
                    "broken": {"options": {"default": "0"}},
                },
            }
        ],
        "tasks": {
            "jbeqa": {"protocol": "offline-eval", "data": "data/jbeqa", "shots": [0], "mode": ["constrained"]},
            "legalrikai": {
                "protocol": "offline-eval",
                "data": "data/legalrikai",
                "limit": 1,
                "subtasks": ["reqrev"],
                "judges": [judge],
            },
        },
    }
    (tmp / "m.yaml").write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    proc = run_cli("sweep", str(tmp / "m.yaml"), cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    return tmp


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make(tmp_path_factory.mktemp("swept"))


@pytest.fixture
def copy(swept: Path, tmp_path: Path) -> Path:
    """The whole tree copied: summary.json's absolute paths (config, data, weights) rewritten to the copy's."""
    dst = tmp_path / "c"
    shutil.copytree(swept, dst, symlinks=True)
    for name in ("summary.json", "report.md", "report.html"):  # the report shows the provenance too
        f = dst / "out" / name
        f.write_text(f.read_text(encoding="utf-8").replace(str(swept), str(dst)), encoding="utf-8")
    return dst


def _verify(folder: Path) -> tuple[int, list[str]]:
    proc = run_cli("verify", str(folder))
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr + proc.stdout
    return proc.returncode, [x for x in proc.stdout.split("\n") if x]


def _edit(copy: Path, change: Callable[[dict[str, Any]], None]) -> None:
    summary = copy / "out" / "summary.json"
    raw = json.loads(summary.read_text(encoding="utf-8"))
    change(raw)
    summary.write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")


def _results(copy: Path, run: str, setting: str = JBEQA) -> Path:
    return copy / "out" / "results" / run / f"{setting}.jsonl"


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").split("\n") if x]


def _write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(x, ensure_ascii=False, sort_keys=True) + "\n" for x in rows), encoding="utf-8")


def _tampered(copy: Path, *needles: str) -> list[str]:
    code, lines = _verify(copy / "out")
    assert code == 1, lines
    for needle in needles:
        assert any(needle in line for line in lines), (needle, lines)
    return lines


def test_an_untouched_folder_verifies_and_lists_what_it_takes_as_claimed(copy):
    code, lines = _verify(copy / "out")
    assert code == 0, lines
    assert lines[-1].endswith(
        "OK (summary.json and every results file rebuilt from the store, the data, the "
        "config and the weights match; every constrained answer keeps its constraint)"
    )
    claimed = lines[lines.index("claimed, not checked (nothing can recompute them):") + 1 : -1]
    assert len(claimed) == 5 and any("timings" in x and "throughput" in x for x in claimed)
    assert any("engine_start" in x for x in claimed)
    assert any("git revision" in x for x in claimed)


def test_a_hand_edited_metric_is_named_with_both_values(copy):
    real: list[float] = []

    def change(raw: dict[str, Any]) -> None:
        run = next(r for r in raw["runs"] if r["variant"] == "broken" and r["task"] == "jbeqa")
        real.append(metric(run, "accuracy"))
        run["metrics"]["values"]["accuracy"]["value"] = 0.99

    _edit(copy, change)
    _tampered(
        copy,
        f"summary.json: runs[{BROKEN} / {JBEQA} / m / jbeqa / broken].metrics.values.accuracy.value: the file says "
        f"0.99, the rebuild gives {real[0]}",
    )


def test_forged_verdicts_with_a_wider_margin_are_named(copy):
    def change(raw: dict[str, Any]) -> None:
        for c in raw["noninferiority"][0]["comparisons"]:
            c["margin"], c["verdict"] = 0.9, "non-inferior"

    _edit(copy, change)
    _tampered(copy, "].margin: the file says 0.9", "].verdict: the file says 'non-inferior'")


def test_a_rewritten_leaderboard_is_named(copy):
    def change(raw: dict[str, Any]) -> None:
        board = raw["leaderboards"][JBEQA]
        board.reverse()

    _edit(copy, change)
    _tampered(copy, f"summary.json: leaderboards.{JBEQA}: the file's order is")


def test_a_removed_run_and_an_invented_comparison_are_named(copy):
    def change(raw: dict[str, Any]) -> None:
        raw["runs"] = [r for r in raw["runs"] if not (r["variant"] == "same" and r["task"] == "jbeqa")]
        model = raw["noninferiority"][0]
        model["comparisons"].append({**model["comparisons"][0], "run": "m.fake.invented.ctx65536", "variant": "x"})

    _edit(copy, change)
    _tampered(
        copy,
        f"summary.json: runs[{SAME} / {JBEQA} / m / jbeqa / same]: in the rebuild, not in the file",
        "m.fake.invented.ctx65536",
    )


def test_an_output_changed_while_parsed_and_scores_stay_is_named(copy):
    path = _results(copy, BF16)
    rows = _rows(path)
    i = next(k for k, r in enumerate(rows) if r["output"] == "1")
    rows[i]["output"] = "0"
    _write_rows(path, rows)
    _tampered(
        copy, f"line {i + 1} (record {rows[i]['id']}): output: the file says '0', the rebuild from the store gives '1'"
    )


def test_a_judges_raw_answer_rewritten_is_named(copy):
    path = _results(copy, BF16, "legalrikai.reqrev")
    rows = _rows(path)
    (judge,) = rows[0]["judges"]
    raw = rows[0]["judges"][judge]["raw"]
    assert '"score":1' in raw
    rows[0]["judges"][judge]["raw"] = raw.replace('"score":1', '"score":0')
    _write_rows(path, rows)
    _tampered(copy, f"line 1 (record {rows[0]['id']}): judges.{judge}.raw: the file says")


def test_a_store_answer_rewritten_or_deleted_is_named(copy):
    db = sqlite3.connect(copy / "out" / "store.sqlite")
    (key,) = db.execute("SELECT key FROM outputs WHERE text = '1' LIMIT 1").fetchone()
    with db:
        db.execute("UPDATE outputs SET text = '0' WHERE key = ?", (key,))
    db.close()
    _tampered(copy, "the rebuild from the store gives '0'")
    db = sqlite3.connect(copy / "out" / "store.sqlite")
    with db:
        db.execute("DELETE FROM outputs WHERE key = ?", (key,))
    db.close()
    _tampered(copy, "in the file, not in the rebuild", "failures", "fails in the rebuild: store.sqlite lacks outputs")


def test_provenance_digests_rewritten_are_named(copy):
    def change(raw: dict[str, Any]) -> None:
        prov = raw["provenance"]
        prov["loads"][0]["weights_digest"] = "0" * 64
        prov["settings"][0]["data_files"] = prov["settings"][0]["data_files"][1:]

    _edit(copy, change)
    _tampered(copy, ".weights_digest: the file says '0000", "data_files")
    _edit(copy, lambda raw: raw["provenance"]["sweep"].update(config_sha256="f" * 64))
    _tampered(copy, "provenance.sweep.config_sha256: the file says ffff")


def test_a_hand_edited_report_is_named(copy):
    report = copy / "out" / "report.md"
    report.write_text(report.read_text(encoding="utf-8").replace(BROKEN, "m.fake.best.ctx65536", 1), encoding="utf-8")
    _tampered(copy, f"{report}: differs from the report rendered from the rebuilt summary")


def test_a_report_drawn_by_an_earlier_offline_eval_is_said_to_be_not_called_changed(copy):
    """A report drawn in an earlier format (before the format was written: 1) differs from today's drawing without
    a number differing: verify says so in one line and passes; a report in today's format is compared whole."""
    from offline_eval.report.write import REPORT_FORMAT, report_format

    report = copy / "out" / "report.md"
    assert report_format(report) == REPORT_FORMAT
    text = report.read_text(encoding="utf-8")
    report.write_text(
        text[: text.rindex("<!-- offline-eval report format")].replace("Verdicts", "Old verdicts"), "utf-8"
    )
    got = run_cli("verify", str(copy / "out"))
    assert got.returncode == 0, got.stdout + got.stderr
    assert (
        f"rendered by an older offline-eval (report format 1, this one draws {REPORT_FORMAT}): not compared"
        in got.stderr
    )


def test_a_report_made_again_by_the_report_command_still_verifies(copy):
    assert run_cli("report", str(copy / "out")).returncode == 0
    code, lines = _verify(copy / "out")
    assert code == 0, lines


def test_a_report_in_japanese_changes_no_number_no_result_and_no_store_row_and_still_verifies(copy):
    out = copy / "out"
    kept = {f: f.read_bytes() for f in [out / "summary.json", *sorted((out / "results").rglob("*.jsonl"))]}
    with sqlite3.connect(out / "store.sqlite") as db:
        rows = sorted(db.execute("SELECT * FROM outputs").fetchall())
    got = run_cli("report", str(out), "--lang", "ja")
    assert got.returncode == 0, got.stderr
    assert (out / "report.md").read_text("utf-8").startswith("# offline-eval レポート\n")
    assert english_left(out) == {}  # a judged task without labels: its reasons are read back into Japanese too
    assert {f: f.read_bytes() for f in kept} == kept
    with sqlite3.connect(out / "store.sqlite") as db:
        assert sorted(db.execute("SELECT * FROM outputs").fetchall()) == rows
    code, lines = _verify(out)
    assert code == 0, lines
    report = out / "report.md"  # compared in the language it was written in
    report.write_text(report.read_text(encoding="utf-8").replace("導入候補", "導入", 1), encoding="utf-8")
    _tampered(copy, f"{report}: differs from the report rendered from the rebuilt summary")


def test_a_sweep_writes_its_report_in_the_configs_language_and_the_command_line_overrides_it(swept, tmp_path):
    dst = tmp_path / "c"
    shutil.copytree(swept, dst, symlinks=True, ignore=shutil.ignore_patterns("out"))
    cfg = yaml.safe_load((dst / "m.yaml").read_text(encoding="utf-8"))
    (dst / "m.yaml").write_text(yaml.safe_dump({**cfg, "lang": "ja"}, allow_unicode=True), encoding="utf-8")
    assert run_cli("sweep", str(dst / "m.yaml"), cwd=dst).returncode == 0
    assert (dst / "out" / "report.md").read_text("utf-8").startswith("# offline-eval レポート\n")
    assert run_cli("sweep", str(dst / "m.yaml"), "--lang", "en", cwd=dst).returncode == 0
    assert (dst / "out" / "report.md").read_text("utf-8").startswith("# offline-eval report\n")
    (dst / "m.yaml").write_text(yaml.safe_dump({**cfg, "lang": "fr"}, allow_unicode=True), encoding="utf-8")
    got = run_cli("sweep", str(dst / "m.yaml"), cwd=dst)
    assert got.returncode == 2 and "lang" in got.stderr and len(got.stderr.strip().splitlines()) == 1, got.stderr


def test_a_results_file_no_run_lists_is_named(copy):
    extra = copy / "out" / "results" / "m.fake.ghost.ctx65536" / f"{JBEQA}.jsonl"
    extra.parent.mkdir()
    shutil.copy(_results(copy, BF16), extra)
    _tampered(copy, f"{extra}: a results file that no run of the rebuilt summary writes")


def test_malformed_records_are_mismatch_lines_never_a_crash(copy):
    path = _results(copy, BF16)
    rows = _rows(path)
    del rows[0]["scores"]["faithful"]
    _write_rows(path, rows)
    text = path.read_text(encoding="utf-8").split("\n")
    text[1] = "{not json"
    path.write_text("\n".join(text), encoding="utf-8")
    _tampered(
        copy,
        f"line 1 (record {rows[0]['id']}): scores.faithful: not in the file",
        "line 2 (record",
        "not a JSON record",
    )
    other = _results(copy, SAME)
    other.unlink()
    other.mkdir()
    _tampered(copy, f"{other}: is a folder where the results file")


def test_reordered_records_are_named(copy):
    path = _results(copy, BF16)
    rows = _rows(path)
    _write_rows(path, rows[::-1])
    _tampered(copy, "line 1 (record")


def test_a_changed_data_file_is_named(copy):
    f = copy / "data" / "jbeqa" / "test.jsonl"
    f.write_text(f.read_text(encoding="utf-8").replace("保証契約", "保証の契約", 1), encoding="utf-8")
    _tampered(copy, f"setting {JBEQA}: data file {f} changed: sha256 ")


def test_changed_or_missing_weights_are_named(copy):
    (copy / "w.bin").write_text("other fake weights")
    _tampered(copy, f"weights file {copy / 'w.bin'} changed: sha256")
    (copy / "w.bin").unlink()
    _tampered(copy, f"weights file {copy / 'w.bin'} is missing")


def test_a_folder_that_is_not_a_sweeps_is_exit_2(tmp_path):
    proc = run_cli("verify", str(tmp_path))
    assert proc.returncode == 2 and "no summary.json here" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("verify", str(tmp_path / "nowhere"))
    assert proc.returncode == 2 and "not a folder" in proc.stderr


def test_weights_behind_a_symlinked_subfolder_are_hashed_and_key_the_store(tmp_path):
    """A model folder whose shards live behind a symlinked subfolder: replacing them changes the store key, so
    the next sweep generates again instead of serving old outputs for new weights."""
    from offline_eval.modelfiles.fingerprint import files_fingerprint, forget_hashes

    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "model-00001.safetensors").write_text("weights one")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    os.symlink(shards, model / "weights")
    os.symlink(model, model / "weights" / "loop")  # a link loop is read once, never forever
    before = files_fingerprint(model)
    assert "weights/model-00001.safetensors" in before
    (shards / "model-00001.safetensors").write_text("weights two")
    forget_hashes()
    assert files_fingerprint(model) != before

    cfg = {
        "output_dir": "out",
        "models": [{"name": "m", "backend": "fake", "path": "model", "max_model_len": 4096}],
        "tasks": {
            "jbeqa": {"protocol": "offline-eval", "data": str(DATA), "shots": [0], "mode": ["constrained"], "limit": 3}
        },
    }
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    first = run_cli("sweep", str(tmp_path / "m.yaml"), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    (shards / "model-00001.safetensors").write_text("weights three")
    second = run_cli("sweep", str(tmp_path / "m.yaml"), cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "(3 generated, 0 cached" in second.stderr, second.stderr


def test_a_sweep_given_a_relative_config_path_verifies_from_another_folder(tmp_path):
    (tmp_path / "w.bin").write_text("fake weights")
    cfg = {
        "output_dir": "out",
        "models": [{"name": "m", "backend": "fake", "path": "w.bin", "max_model_len": 4096}],
        "tasks": {
            "jbeqa": {"protocol": "offline-eval", "data": str(DATA), "shots": [0], "mode": ["constrained"], "limit": 4}
        },
    }
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    assert run_cli("sweep", "m.yaml", cwd=tmp_path).returncode == 0
    raw = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert raw["provenance"]["sweep"]["config"] == str(tmp_path / "m.yaml")
    code, lines = _verify(tmp_path / "out")  # run from the repository root
    assert code == 0, lines


def test_a_sweep_of_a_config_mapping_verifies_from_its_copy(tmp_path):
    """The Python API's mapping has no file: the sweep keeps it (as validated) in OUT/config.json, and verify
    rebuilds from that copy, refusing one edited since."""
    import offline_eval

    (tmp_path / "w.bin").write_text("fake weights")
    config = {
        "output_dir": str(tmp_path / "out"),
        "models": [{"name": "m", "backend": "fake", "path": str(tmp_path / "w.bin"), "max_model_len": 4096}],
        "tasks": {
            "jbeqa": {"protocol": "offline-eval", "data": str(DATA), "shots": [0], "mode": ["constrained"], "limit": 4}
        },
    }
    offline_eval.sweep(config, progress=False, log=lambda _: None)
    code, lines = _verify(tmp_path / "out")
    assert code == 0, lines
    copy = tmp_path / "out" / "config.json"
    copy.write_text(copy.read_text(encoding="utf-8").replace('"limit": 4', '"limit": 3'), encoding="utf-8")
    code, lines = _verify(tmp_path / "out")
    assert code == 1 and any("provenance.sweep.config_sha256" in x and "config changed" in x for x in lines), lines
