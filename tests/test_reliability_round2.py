"""Reliability, round 2, on the fake engine (offline-eval's own logic): line separators in outputs, ids and data
survive a --only re-run; HTML breakers in outputs leave report.html working; messages say what is wrong;
phases that did no work print no rate; a lone surrogate is named, never a crash."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
import yaml
from conftest import DATA, run_cli

# Every character str.splitlines() splits on besides \n and \r.
SEPARATORS = ["\u2028", "\u2029", "\x85", "\x1c", "\x1d", "\x1e", "\x0b", "\x0c"]
BREAKERS = ["<!--", "<script", "</script", "<!-- <script>", "<!--<script>", "\u2028", "\u2029", "</script><script>x"]


def rows() -> list[dict]:
    return [json.loads(x) for x in (DATA / "test.jsonl").read_text(encoding="utf-8").split("\n") if x]


def fake_sweep_config(tmp: Path, data: Path, answers: dict[str, str], mode: str = "free") -> Path:
    """A model with two variants (an ablation family and a verdict) and a twin on the same weights (the
    consistency table), all answering from `answers` (question text -> answer)."""
    weights = tmp / "w.bin"
    weights.write_text("fake weights")
    opts = {"answers": answers, "default": "0"}
    model = {"backend": "fake", "path": str(weights), "max_model_len": 8192}
    cfg = {
        "output_dir": str(tmp / "out"),
        "models": [
            {"name": "m", **model, "variants": {"bf16": {"options": opts}, "q4": {"options": opts}}},
            {"name": "twin", **model, "same_weights_as": "m", "variants": {"bf16": {"options": opts}}},
        ],
        "tasks": {
            "jbeqa": {"protocol": "offline-eval", "data": str(data), "shots": [0], "mode": [mode], "bootstrap": 200}
        },
    }
    p = tmp / "m.yaml"
    p.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    return p


def sweep(cfg: Path, **kw: object) -> dict:
    from offline_eval.pipeline.config import load_config
    from offline_eval.pipeline.options import SweepOptions
    from offline_eval.pipeline.orchestrate import run_sweep

    lines: list[str] = []
    s = run_sweep(load_config(cfg), SweepOptions(source=str(cfg), log=lines.append, progress=False, **kw)).to_json()
    s["log"] = lines
    return s


def analyses(s: dict) -> dict:
    return {k: s[k] for k in ("consistency", "ablations", "noninferiority")}


@pytest.mark.slow
def test_line_separators_in_outputs_ids_and_data_survive_an_only_rerun(tmp_path):
    """Each separator once in an id, once in a question and once in an answer: after `--only twin`, m's runs are
    read back from their results files, and every analysis and the item browser still hold them."""
    data = tmp_path / "data"
    data.mkdir()
    items = rows()
    answers = {}
    for i, ch in enumerate(SEPARATORS):
        items[i]["id"] = f"{items[i]['id']}{ch}x"
        items[8 + i]["question"] = f"{items[8 + i]['question']}{ch}続き"
        answers[items[16 + (i % 8)]["question"]] = f"1{ch}理由"
    (data / "test.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in items), "utf-8")
    cfg = fake_sweep_config(tmp_path, data, answers)
    first = sweep(cfg)
    out = tmp_path / "out"
    written = (out / "results" / "m.fake.bf16.ctx8192" / "jbeqa.0shot.free.jsonl").read_text(encoding="utf-8")
    assert all(ch in written for ch in SEPARATORS[:3])  # U+2028, U+2029 and U+0085 are written raw
    again = sweep(cfg, only=["twin"])
    assert analyses(again) == analyses(first) and again["consistency"] and again["ablations"]
    assert again["consistency"][0]["n_items"] == 26 and again["noninferiority"][0]["comparisons"][0]["n"] == 26
    from offline_eval.report.browser import browser_data
    from offline_eval.results.records import ResultsFolder
    from offline_eval.results.summary import Summary

    data_rows = browser_data(ResultsFolder(out), Summary.read(out / "summary.json"))
    assert data_rows is not None and len(data_rows["rows"]) == 26
    assert all(len(r[4]) == 3 for r in data_rows["rows"])  # every row has the answers of all three runs


def test_results_files_split_on_newlines_only(tmp_path):
    from offline_eval.results.records import PlainRecord, ResultsFolder, RunKey

    folder = ResultsFolder(tmp_path)
    key = RunKey("r", "s")
    recs = [PlainRecord(id=f"i{ch}", output=f"a{ch}b") for ch in SEPARATORS]
    folder.write_records(key, recs)  # type: ignore[arg-type]
    back = folder.read_records(key, PlainRecord.from_json)
    assert back is not None and [r.id for r in back] == [r.id for r in recs]


@pytest.mark.slow
def test_html_breakers_in_outputs_leave_the_report_working(tmp_path, offline_browser):  # type: ignore[no-untyped-def]
    """Outputs that switch the HTML parser's state inside a <script> (<!--, <script, </script), line
    separators, and a lone surrogate (a \\ud800 escape in a results file): the page keeps its title, logs no
    error, sorts its tables, and the item browser renders every row and shows the text as text."""
    items = rows()
    answers = {items[i]["question"]: b for i, b in enumerate(BREAKERS)}
    cfg = fake_sweep_config(tmp_path, DATA, answers)
    sweep(cfg)
    out = tmp_path / "out"
    results = out / "results" / "twin.fake.bf16.ctx8192" / "jbeqa.0shot.free.jsonl"
    lines = results.read_text(encoding="utf-8").split("\n")
    first = json.loads(lines[0])
    first["output"] = "lone \ud800 surrogate <!--<script>"
    from offline_eval.runtime.fileio import dumps

    lines[0] = dumps(first)
    results.write_text("\n".join(lines), encoding="utf-8")
    assert run_cli("report", str(out)).returncode == 0  # re-rendered from the files, lone surrogate included
    html = (out / "report.html").read_text(encoding="utf-8")
    payload = html[html.index('id="items-data"') : html.index("</script>", html.index('id="items-data"'))]
    assert "<!--" not in payload and "<script" not in payload.lower()
    errors: list[str] = []
    page = offline_browser.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((out / "report.html").as_uri())
    page.wait_for_load_state("load")
    assert page.title() == "offline-eval report" and not errors, errors
    page.locator("#browser summary").click()
    assert page.locator("#items tbody tr").count() == 26  # one setting, every item
    for i in (3, 7):  # "<!-- <script>" and "</script><script>x": shown as the raw output's text
        page.locator("#items tbody tr", has=page.get_by_text(items[i]["id"], exact=True)).first.click()
        assert BREAKERS[i] in page.locator("#item-detail").inner_text()
    page.locator("#items tbody tr", has=page.get_by_text(first["id"], exact=True)).first.click()
    assert "surrogate <!--<script>" in page.locator("#item-detail").inner_text()
    board = page.locator("table.sortable").first
    board.locator("th").nth(1).click()
    assert board.locator("th.asc").count() == 1  # the page's script still runs
    assert page.title() == "offline-eval report" and not errors, errors


def test_a_lone_surrogate_in_data_names_the_file_record_and_field(tmp_path):
    bad = tmp_path / "test.jsonl"
    r = rows()[0]
    text = json.dumps(r, ensure_ascii=True).replace('"question": "', '"question": "\\ud800', 1)
    bad.write_text(text + "\n", encoding="utf-8")
    proc = run_cli("data", "validate", "jbeqa", str(tmp_path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert str(bad) in proc.stderr and "line 1" in proc.stderr and "field 'question'" in proc.stderr
    assert "lone surrogate (\\ud800" in proc.stderr


@pytest.mark.slow
def test_a_phase_that_did_no_engine_work_prints_no_rate(tmp_path):
    cfg = fake_sweep_config(tmp_path, DATA, {})
    first = sweep(cfg)
    assert any("26 generated, 0 cached, " in line and "items/s" in line for line in first["log"])
    again = sweep(cfg)
    done = [line for line in again["log"] if "jbeqa.0shot.free:" in line]
    assert done and all("0 generated, 26 cached)" in line and "items/s" not in line for line in done)


# ---- messages that said something else


def test_a_read_only_store_says_so_and_does_not_suggest_fresh(tmp_path, monkeypatch):
    from offline_eval.inference import store as store_module
    from offline_eval.inference.requests import Result
    from offline_eval.inference.store import Row, Store, StoreError

    Store(tmp_path / "store.sqlite").close()
    real = sqlite3.connect
    monkeypatch.setattr(  # a store on a read-only mount (root ignores file modes, so tests cannot use chmod)
        store_module.sqlite3, "connect", lambda p, timeout=60: real(f"file:{p}?mode=ro", uri=True, timeout=timeout)
    )
    s = Store(tmp_path / "store.sqlite")
    with pytest.raises(StoreError, match="read-only") as e:
        s.put_many([Row("k", "m", "v", "{}", Result(text="1"))])
    assert "--fresh" not in str(e.value) and "make store.sqlite and its folder writable" in str(e.value)


@pytest.mark.slow
def test_an_output_path_in_the_way_is_named_before_anything_runs(tmp_path):
    from offline_eval.runtime.errors import InputError

    cfg = fake_sweep_config(tmp_path, DATA, {})
    out = tmp_path / "out"
    out.write_text("a file where the output folder goes")
    with pytest.raises(InputError, match=r"field 'output_dir': .*out is a file, where a folder is needed"):
        sweep(cfg)
    proc = run_cli("sweep", str(cfg), "--out", str(out))
    assert proc.returncode == 2 and "field '--out'" in proc.stderr and "FileExistsError" not in proc.stderr
    out.unlink()
    sweep(cfg)
    results = out / "results" / "m.fake.bf16.ctx8192" / "jbeqa.0shot.free.jsonl"
    results.unlink()
    results.mkdir()
    with pytest.raises(InputError, match=r"jbeqa\.0shot\.free\.jsonl is a folder, where a file is written"):
        sweep(cfg)


def test_a_bad_limit_on_the_command_line_is_blamed_on_the_option(tmp_path):
    cfg = fake_sweep_config(tmp_path, DATA, {})
    proc = run_cli("sweep", str(cfg), "--limit", "0")
    assert proc.returncode == 2 and "field '--limit': must be at least 1 item, got 0" in proc.stderr
    assert "tasks.jbeqa" not in proc.stderr and str(cfg) not in proc.stderr


@pytest.mark.slow
def test_a_symlink_loop_as_the_data_path_says_it_loops(tmp_path):
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    cfg = fake_sweep_config(tmp_path, loop, {})
    proc = run_cli("sweep", str(cfg))
    assert (
        proc.returncode == 2 and "is a symbolic link that loops" in proc.stderr and "does not exist" not in proc.stderr
    )
    dangling = tmp_path / "dangling"
    os.symlink(tmp_path / "nowhere", dangling)
    proc = run_cli("data", "validate", "jbeqa", str(dangling))
    assert proc.returncode == 2 and "is a symbolic link to something that does not exist" in proc.stderr
