"""`offline-eval annotate`: a sample of a finished sweep's outputs on one self-contained page; its export read back
by the sweep (LegalRikai's human_scores) without generating anything again; bad input in one line each. The
sweeps run on the fake engine, whose candidate answers with markup and script meant to break the page."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, run_cli

_NAMES = {"amendexp": "AmendExp", "statrev": "StatRev", "reqrev": "ReqRev", "riskrev": "RiskRev"}

DATA = ROOT / "data"
RUN = "m.fake.default.ctx65536"
# Text that would run as script, end the payload's <script>, open markup or break a JSON or JS string, were the
# page to parse any output as anything but text.
HOSTILE = (
    "## 第1条（目的）\n本契約は、"
    '</script><script>document.title="pwned"</script><img src=x onerror="document.title=\'pwned\'">'
    "<!-- \u2028\u2029 ]]> ${x} `\\u003c` \"' <b>bold?</b> を定める。\n"
)


def _config(tmp: Path, tasks: dict[str, object]) -> Path:
    (tmp / "w.bin").write_text("fake weights")
    cfg = {
        "output_dir": str(tmp / "out"),
        "models": [
            {
                "name": "m",
                "backend": "fake",
                "path": str(tmp / "w.bin"),
                "max_model_len": 65536,
                "engine_args": {"default": HOSTILE},
            }
        ],
        "tasks": tasks,
    }
    p = tmp / "m.yaml"
    p.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    return p


def _rikai(tmp: Path, **extra: object) -> dict[str, object]:
    judge = {"name": "j", "backend": "fake", "path": str(tmp / "w.bin"), "max_model_len": 65536}
    return {
        "legalrikai": {
            "protocol": "offline-eval",
            "data": str(DATA / "legalrikai"),
            "limit": 2,
            "judges": [judge],
            **extra,
        }
    }


def _sweep(cfg: Path, log: list[str] | None = None) -> Path:
    from offline_eval.pipeline.config import load_config
    from offline_eval.pipeline.options import SweepOptions
    from offline_eval.pipeline.orchestrate import run_sweep

    run_sweep(
        load_config(cfg),
        SweepOptions(source=str(cfg), progress=False, log=(log.append if log is not None else lambda _: None)),
    )
    return Path(yaml.safe_load(cfg.read_text(encoding="utf-8"))["output_dir"])


@pytest.fixture(scope="module")
def rikai(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("rikai")
    return _sweep(_config(tmp, _rikai(tmp)))


def test_the_sample_is_stratified_seeded_and_named_by_its_outputs(rikai):  # type: ignore[no-untyped-def]
    from offline_eval.annotate.sample import offered, read_sweep, sample, sample_id

    _, cases = offered(read_sweep(str(rikai)), "legalrikai", str(rikai))
    assert len(cases) == 8 and {c.stratum for c in cases} == {"amendexp", "statrev", "reqrev", "riskrev"}
    four = sample(cases, 4, 0, None, None)
    assert sorted(c.stratum for c in four) == ["amendexp", "reqrev", "riskrev", "statrev"]  # one per sub-task
    assert [c.key for c in sample(cases, 4, 0, None, None)] == [c.key for c in four]
    assert {c.key for c in sample(cases, 8, 1, None, None)} == {c.key for c in cases}
    assert sample_id("legalrikai", four) == sample_id("legalrikai", four[::-1]) != sample_id("legalrikai", cases)
    statrev = next(c for c in cases if c.stratum == "statrev")
    assert statrev.prompt and statrev.prompt[-1][0] == "user" and "改正" in statrev.prompt[-1][1]
    assert any(d.diff for d in statrev.shown) and statrev.export == {"task": "statrev", "item_id": statrev.item_id}
    assert [s.code for s in statrev.scales] == ["IF", "SC", "CP", "TA", "WA"]


def test_a_small_sample_crosses_sub_tasks_and_runs_alike():  # type: ignore[no-untyped-def]
    from offline_eval.annotate.sample import sample
    from offline_eval.tasks.kit.annotation import Case

    def case(run: str, sub: str, i: int) -> Case:
        return Case(run, "s", f"{sub}-{i}", sub, f"{run}{sub}{i}", [], [], [], [], {})

    subs, runs = ["amendexp", "statrev", "reqrev", "riskrev"], ["a", "b", "c"]
    cases = [case(r, s, i) for r in runs for s in subs for i in range(3)]
    for seed in range(20):
        three = sample(cases, 3, seed, None, None)
        assert len({c.stratum for c in three}) == 3 and len({c.run for c in three}) == 3
        twelve = sample(cases, 12, seed, None, None)
        assert len({(c.stratum, c.run) for c in twelve}) == 12  # every sub-task with every run once
    assert len({tuple(c.key for c in sample(cases, 3, seed, None, None)) for seed in range(20)}) > 10


def test_the_page_holds_outputs_as_escaped_text_and_allows_no_connection(rikai, tmp_path):  # type: ignore[no-untyped-def]
    page = tmp_path / "a.html"
    proc = run_cli("annotate", str(rikai), "--task", "legalrikai", "--sample", "3", "--out", str(page))
    assert proc.returncode == 0, proc.stderr
    html = page.read_text(encoding="utf-8")
    payload = html[html.index('id="payload">') : html.index("</script>", html.index('id="payload">'))]
    assert "<" not in payload[len('id="payload">') :] and "\u2028" not in payload  # nothing ends the script early
    assert "\\u003c/script\\u003e\\u003cscript\\u003edocument.title" in payload
    csp = re.search(r'Content-Security-Policy" content="([^"]+)"', html)
    assert (
        csp
        and "connect-src 'none'" in csp[1]
        and "default-src 'none'" in csp[1]
        and "unsafe-inline" not in (csp[1].split("script-src")[1].split(";")[0])
    )
    assert html.count("<script") == 2 and "http://" not in html and "https://" not in html


@pytest.mark.parametrize(
    "args, message",
    [
        (["--sample", "0"], "field '--sample': 0: give at least 1 output to annotate"),
        (["--sample", "9"], "field '--sample': 9: the sweep has 8 outputs to annotate; ask for at most that"),
        (["--runs", "nope"], "field '--runs': no outputs of nope to annotate (runs with outputs: " + RUN + ")"),
    ],
)
def test_a_sample_the_outputs_cannot_give_is_one_line(rikai, args, message):  # type: ignore[no-untyped-def]
    proc = run_cli("annotate", str(rikai), "--task", "legalrikai", *args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == f"offline-eval: error: {message}"


def test_an_empty_folder_and_a_task_with_no_outputs_are_one_line(tmp_path):  # type: ignore[no-untyped-def]
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_cli("annotate", str(empty), "--task", "legalrikai")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "no summary.json: not the output folder of a finished sweep" in proc.stderr
    jbeqa = _sweep(_config(tmp_path, {"jbeqa": {"protocol": "offline-eval", "data": str(DATA / "jbeqa"), "limit": 2}}))
    proc = run_cli("annotate", str(jbeqa), "--task", "legalrikai")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "the sweep has no legalrikai runs (it ran: jbeqa)" in proc.stderr
    skipped = tmp_path / "skipped"
    skipped.mkdir()
    cfg = _config(skipped, _rikai(skipped, overflow="skip"))
    raw = yaml.safe_load(cfg.read_text(encoding="utf-8"))
    raw["models"][0]["max_model_len"] = 512  # no LegalRikai prompt fits: every input skipped
    cfg.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    proc = run_cli("annotate", str(_sweep(cfg)), "--task", "legalrikai")
    assert proc.returncode == 2 and "have no outputs to annotate (every input was skipped)" in proc.stderr


def test_listed_pairs_instead_of_a_sample(rikai, tmp_path):  # type: ignore[no-untyped-def]
    from offline_eval.annotate.sample import offered, read_sweep, sample

    _, cases = offered(read_sweep(str(rikai)), "legalrikai", str(rikai))
    pairs = tmp_path / "pairs.csv"
    pairs.write_text(f"run,item_id\n{RUN},{cases[3].item_id}\n{RUN},{cases[0].item_id}\n", encoding="utf-8")
    assert [c.key for c in sample(cases, 30, 0, None, str(pairs))] == [cases[3].key, cases[0].key]
    # A page of listed outputs records that they were picked: its export never calibrates (docs/calibration.md).
    page = tmp_path / "picked.html"
    proc = run_cli("annotate", str(rikai), "--task", "legalrikai", "--items", str(pairs), "--out", str(page))
    assert proc.returncode == 0, proc.stderr
    assert '"draw":"picked"' in page.read_text(encoding="utf-8")
    proc = run_cli("annotate", str(rikai), "--task", "legalrikai", "--sample", "2", "--out", str(page))
    assert proc.returncode == 0 and '"draw":"random"' in page.read_text(encoding="utf-8")
    pairs.write_text(f"{RUN},no-such-item\n", encoding="utf-8")
    proc = run_cli("annotate", str(rikai), "--task", "legalrikai", "--items", str(pairs))
    assert proc.returncode == 2 and f"{pairs}, line 1: run {RUN} has no output to annotate" in proc.stderr


def _export(rikai: Path, cases: list, path: Path, sample: str, score: int = 2, annotator: str = "A",
            comment: str = "") -> Path:  # type: ignore[type-arg]  # fmt: skip
    """What the page exports for these cases (the browser test checks the page writes exactly this form): UTF-8
    with a byte order mark, each output named by its case id, formula-like cells escaped."""
    from offline_eval.tasks.kit.datafiles import escape_cell
    from offline_eval.tasks.legalrikai.human.annotate import FORM

    with path.open("w", newline="", encoding="utf-8-sig") as f:
        w = csv.writer(f)
        w.writerow(FORM.columns)
        for c in cases:
            for s in c.scales:
                w.writerow([escape_cell(str(v)) for v in (c.export["task"], c.item_id, c.case_id(sample), s.code,
                            min(score, s.hi), annotator, comment, sample, c.output_sha256, "random")])  # fmt: skip
    return path


def test_an_export_of_another_sample_or_sweep_is_refused_naming_the_mismatch(rikai, tmp_path):  # type: ignore[no-untyped-def]
    from offline_eval.annotate.sample import offered, read_sweep, sample, sample_id

    _, cases = offered(read_sweep(str(rikai)), "legalrikai", str(rikai))
    three = sample(cases, 3, 0, None, None)
    sid = sample_id("legalrikai", three)
    other = _export(rikai, sample(cases, 3, 5, None, None), tmp_path / "other.csv", "s-000000000000")
    proc = run_cli("annotate", str(rikai), "--task", "legalrikai", "--sample", "3", "--resume", str(other))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert f"{other}, record row 2, field 'sample': exported from sample s-000000000000, not this page's {sid}" in (
        proc.stderr
    )
    mine = _export(rikai, three, tmp_path / "mine.csv", sid)
    text = mine.read_text(encoding="utf-8-sig").splitlines()
    text[1] = text[1].replace(three[0].output_sha256, "0" * 64)  # scores of an output this sweep did not write
    mine.write_text("\n".join(text) + "\n", encoding="utf-8-sig")
    proc = run_cli("annotate", str(rikai), "--task", "legalrikai", "--sample", "3", "--resume", str(mine))
    assert proc.returncode == 2 and "field 'output_sha256': scores another output" in proc.stderr
    assert "exported from another sweep" in proc.stderr
    # This sample's own export starts the page from its scores, by case id.
    from offline_eval.annotate.sample import resumed
    from offline_eval.tasks.legalrikai.human.annotate import FORM

    prefill = resumed([str(_export(rikai, three, tmp_path / "ok.csv", sid, score=2))], FORM, sid, three)
    assert set(prefill) == {c.case_id(sid) for c in three} and prefill[three[0].case_id(sid)]["annotator"] == "A"
    assert all(v == "2" for p in prefill.values() for v in p["scores"].values())
    # The sweep uses none of the scores of an output that is not its own (another sweep's, or made again since):
    # they are counted, in one line, and the rest are read (docs/calibration.md).
    cfg = tmp_path / "again.yaml"
    raw = yaml.safe_load((rikai.parent / "m.yaml").read_text(encoding="utf-8"))
    raw["tasks"]["legalrikai"]["human_scores"] = str(mine)
    raw["output_dir"] = str(tmp_path / "again")
    cfg.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    proc = run_cli("sweep", str(cfg))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    stale = json.loads((tmp_path / "again" / "summary.json").read_text(encoding="utf-8"))["calibration_notes"]
    # only the first row (one criterion of one output) names another output
    assert [x for x in stale["legalrikai"] if "not used" in x] == [
        f"1 row(s) on {_NAMES[three[0].stratum]} of {RUN} not used: the output changed since it was labelled (its "
        "output_sha256 differs)"
    ]


def test_human_scores_from_several_files_agree_by_krippendorff_and_judge_bias(rikai, tmp_path):  # type: ignore[no-untyped-def]
    """Two annotators' exports, one file each: alpha (ordinal) between them from the `krippendorff` package, each
    judge's bias against their mean computed by hand, n per cell."""
    import krippendorff
    import numpy as np

    from offline_eval.annotate.sample import offered, read_sweep, sample_id

    _, cases = offered(read_sweep(str(rikai)), "legalrikai", str(rikai))
    sid = sample_id("legalrikai", cases)
    a = _export(rikai, cases, tmp_path / "a.csv", sid, score=3)
    b = _export(rikai, cases, tmp_path / "b.csv", sid, score=1, annotator="B")
    cfg = tmp_path / "two.yaml"
    raw = yaml.safe_load((rikai.parent / "m.yaml").read_text(encoding="utf-8"))
    raw["tasks"]["legalrikai"]["human_scores"] = [str(a), str(b)]
    raw["output_dir"] = str(rikai)
    cfg.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    log: list[str] = []
    summary = json.loads((_sweep(cfg, log) / "summary.json").read_text(encoding="utf-8"))
    assert not [line for line in log if re.search(r"\b[1-9]\d* generated", line)]  # all from the store
    human = summary["task_reports"]["legalrikai"]["human"]
    assert human["matched_outputs"] == 8 and str(a) in human["file"] and str(b) in human["file"]
    from offline_eval.tasks.legalrikai import rubric

    if_ = next(c for c in rubric.criteria("statrev") if c.code == "IF")
    got = [[min(3, if_.hi)] * 2, [min(1, if_.hi)] * 2]  # two statrev outputs, two annotators
    want = krippendorff.alpha(reliability_data=np.array(got, dtype=float), value_domain=list(range(if_.lo, if_.hi + 1)),
                              level_of_measurement="ordinal")  # fmt: skip
    assert human["alpha"]["statrev"]["IF"] == {"alpha": round(want, 4), "n": 2}
    # The fake judge gives every criterion its lowest point: 0 on [0, 1]; the annotators' mean is that of 3 and 1.
    mean_h = (if_.normalise(min(3, if_.hi)) + if_.normalise(min(1, if_.hi))) / 2
    bias = human["bias"]["statrev"]["j.fake.default.ctx65536"]["IF"]
    assert bias["bias"] == round(0 - mean_h, 4) and bias["n"] == 2 and bias["ci_low"] is None  # 2 items: no CI
    assert human["bias"]["statrev"]["Avg"]["IF"]["n"] == 2
    md = (rikai / "report.md").read_text(encoding="utf-8")
    assert "agreement among the annotators (Krippendorff's alpha, ordinal)" in md
    assert "each judge's bias against the annotators" in md and "(n too small: 2 items; n=2)" in md


@pytest.mark.slow
def test_annotate_in_chromium_blind_then_export_and_sweep_again(rikai, tmp_path, offline_browser):  # type: ignore[no-untyped-def]
    """Three outputs scored on the page, offline, with hostile outputs in it: nothing injected runs, nothing
    connects anywhere, the run and the judges stay hidden until each is scored (and shown then only from the
    reveal file loaded into the page), a reload keeps the scores, and the export, given to the sweep as
    human_scores, shows in the agreement tables with nothing generated."""
    page_file = tmp_path / "annotate.html"
    proc = run_cli("annotate", str(rikai), "--task", "legalrikai", "--sample", "3", "--seed", "2", "--out",
                   str(page_file), "--annotator", "弁護士A")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    errors: list[str] = []
    remote: list[str] = []
    context = offline_browser.new_context(accept_downloads=True)
    page = context.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))

    def route(r):  # type: ignore[no-untyped-def]
        if r.request.url.startswith(("file:", "blob:", "data:")):
            return r.continue_()
        remote.append(r.request.url)
        return r.abort()

    page.route("**/*", route)
    page.goto(page_file.as_uri())
    title = page.title()
    assert title.startswith("offline-eval: annotate LegalRikai (3 outputs, sample s-")
    reveal = page_file.with_name("annotate.reveal.json")
    for k in range(3):
        text = page.locator("body").inner_text()
        assert RUN not in text and "Judge j" not in text  # blind until saved
        # The output, as text (a diff view shows the answer as written behind a toggle: textContent reads it there).
        assert '</script><script>document.title="pwned"</script><img src=x' in page.locator("#case").text_content()
        assert page.locator("#case img, #case b, script:not([id=payload])").count() == 1  # the page's own script only
        page.locator("details.gold summary").click()
        for fieldset in page.locator("fieldset.scale").all():
            fieldset.locator("input[type=radio]").last.check()
        page.locator("button.save").click()
        if k == 0:  # saved, but the page holds no run: it says where to find it
            assert page.locator(".revealed").count() == 0 and "reveal file" in page.locator(".unrevealed").inner_text()
            assert RUN not in page.locator("body").inner_text()
            page.locator("#reveal").set_input_files(str(reveal))
        assert RUN in page.locator(".revealed").inner_text()
        assert "Judge j" in page.locator(".revealed").inner_text()
        if k < 2:
            page.locator("#next").click()
    assert page.locator("#progress").inner_text().startswith("done 3 · skipped 0 · left 0")
    page.reload()
    assert page.locator("#progress").inner_text().startswith("done 3")
    assert page.locator("#annotator").input_value() == "弁護士A"
    assert page.locator("fieldset.scale input[type=radio]:checked").count() == len(page.locator("fieldset.scale").all())
    with page.expect_download() as got:
        page.locator("#export").click()
    sid = re.search(r"sample (s-[0-9a-f]{12})", title).group(1)  # type: ignore[union-attr]
    assert got.value.suggested_filename == f"human_scores-{sid}-弁護士A.csv"  # one file per annotator
    export = tmp_path / "human_scores.csv"
    got.value.save_as(export)
    assert page.title() == title and errors == [] and remote == []
    context.close()
    rows = list(csv.DictReader(export.read_text(encoding="utf-8-sig").splitlines()))
    assert list(rows[0]) == ["task", "item_id", "case", "criterion", "score", "annotator", "comment", "sample",
                             "output_sha256", "draw"]  # fmt: skip
    assert {r["draw"] for r in rows} == {"random"}  # the page's seeded draw: its scores calibrate
    assert len({(r["task"], r["item_id"]) for r in rows}) == 3 and {r["annotator"] for r in rows} == {"弁護士A"}
    # The sweep again, with the export: the agreement tables from the store.
    cfg = tmp_path / "again.yaml"
    raw = yaml.safe_load((rikai.parent / "m.yaml").read_text(encoding="utf-8"))
    raw["tasks"]["legalrikai"]["human_scores"] = str(export)
    raw["output_dir"] = str(tmp_path / "again")
    cfg.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    (tmp_path / "again").mkdir()
    (tmp_path / "again" / "store.sqlite").write_bytes((rikai / "store.sqlite").read_bytes())
    log: list[str] = []
    summary = json.loads((_sweep(cfg, log) / "summary.json").read_text(encoding="utf-8"))
    assert not [line for line in log if re.search(r"\b[1-9]\d* generated", line)]
    assert summary["task_reports"]["legalrikai"]["human"]["matched_outputs"] == 3
    labelled = [c for c in summary["calibration"] if c["headline"] and c.get("n")]
    assert len(labelled) == 3 and all(c["status"] == "calibrated" for c in labelled), summary["calibration"]
    md = (tmp_path / "again" / "report.md").read_text(encoding="utf-8")
    assert "human scores (Table 6)" in md and "(n=1)" in md


@pytest.mark.slow
def test_a_legalevalq_export_trains_the_scorer(tmp_path, offline_browser):  # type: ignore[no-untyped-def]
    pytest.importorskip("torch")
    if not (ROOT / "models" / "tiny-scorer" / "scorer_config.json").is_file():
        pytest.skip("the tiny scorer is built by scripts/setup.sh")
    tmp = tmp_path / "leq"
    tmp.mkdir()
    ev = {"name": "ev", "backend": "fake", "path": str(tmp / "w.bin"), "max_model_len": 65536}
    tasks = {"legalevalq": {"protocol": "offline-eval", "data": str(DATA / "legalevalq" / "queries.json"), "limit": 6,
                            "evaluator": ev, "scorer": str(ROOT / "models" / "tiny-scorer")}}  # fmt: skip
    out = _sweep(_config(tmp, tasks))
    page_file = tmp_path / "leq.html"
    proc = run_cli("annotate", str(out), "--task", "legalevalq", "--sample", "6", "--out", str(page_file))
    assert proc.returncode == 0, proc.stderr
    context = offline_browser.new_context(accept_downloads=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(page_file.as_uri())
    page.locator("#annotator").fill("reviewer")
    assert "The evaluator's comment" in page.locator("body").inner_text()
    for k in range(6):
        page.locator("fieldset.scale input[type=number]").fill(str(15 * k + 10))
        page.locator("button.save").click()
        page.locator("#next").click()
    with page.expect_download() as got:
        page.locator("#export").click()
    export = tmp_path / "annotated.jsonl"
    got.value.save_as(export)
    context.close()
    assert errors == []
    rows = [json.loads(line) for line in export.read_text(encoding="utf-8").split("\n") if line]
    assert len(rows) == 6 and sorted(r["score"] for r in rows) == [10, 25, 40, 55, 70, 85]
    assert {"query", "answer", "comment", "conclusion", "score"} <= set(rows[0])
    assert rows[0]["answer"] == HOSTILE
    scorer = tmp_path / "scorer"
    proc = run_cli("legaleval-q", "train", "--data", str(export), "--encoder", str(ROOT / "models" / "tiny-bert"),
                   "--out", str(scorer), "--epochs", "1", "--val-fraction", "0.34", "--lr", "1e-3")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (scorer / "scorer.safetensors").is_file()


def test_tables_split_records_where_csv_and_jsonl_do_not_where_str_splitlines_does(tmp_path):  # type: ignore[no-untyped-def]
    from offline_eval.runtime.errors import InputError
    from offline_eval.tasks.kit.datafiles import read_table

    comment = "第一\u2028第二\x85第三\n次の行"
    c = tmp_path / "a.csv"
    with c.open("w", encoding="utf-8-sig", newline="") as fh:
        csv.writer(fh).writerows([["item_id", "comment"], ["x1", comment], ["x2", "ok"]])
    assert read_table(c) == [
        ("row 2", {"item_id": "x1", "comment": comment}),
        ("row 3", {"item_id": "x2", "comment": "ok"}),
    ]
    j = tmp_path / "a.jsonl"
    j.write_bytes(("\ufeff" + json.dumps({"c": comment}, ensure_ascii=False) + "\n\n" + '{"c": 2}\n').encode())
    assert read_table(j) == [("line 1", {"c": comment}), ("line 3", {"c": 2})]
    j.write_text('{"c": 1}\n{"c": \n', encoding="utf-8")
    with pytest.raises(InputError, match="line 2"):
        read_table(j)


def test_data_changed_since_the_sweep_is_refused_in_one_line_unless_allowed(tmp_path):  # type: ignore[no-untyped-def]
    """The page rebuilds documents and prompts from the data: edited after the sweep, it would show them beside
    outputs made from the old data. Refused naming the file; --allow-changed-data goes on and the page says so."""
    import shutil

    data = tmp_path / "legalrikai"
    shutil.copytree(DATA / "legalrikai", data)
    cfg = _config(tmp_path, _rikai(tmp_path))
    raw = yaml.safe_load(cfg.read_text(encoding="utf-8"))
    raw["tasks"]["legalrikai"]["data"] = str(data)
    raw["tasks"]["legalrikai"]["human_scores"] = str(data / "human_scores.csv")
    cfg.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    out = _sweep(cfg)
    assert run_cli("annotate", str(out), "--task", "legalrikai", "--sample", "2").returncode == 0
    # The human scores are not what the page is built from: a second round of annotation may change them.
    with (data / "human_scores.csv").open("a", encoding="utf-8") as fh:
        fh.write("\n")
    assert run_cli("annotate", str(out), "--task", "legalrikai", "--sample", "2").returncode == 0
    edited = data / "statrev.jsonl"
    edited.write_text(edited.read_text(encoding="utf-8").replace("契約", "約款", 1), encoding="utf-8")
    proc = run_cli("annotate", str(out), "--task", "legalrikai", "--sample", "2")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert f"{edited.resolve()}, field 'data_files': changed since the sweep (sha256 " in proc.stderr
    assert "run the sweep again, or give --allow-changed-data" in proc.stderr
    page_file = tmp_path / "changed.html"
    proc = run_cli("annotate", str(out), "--task", "legalrikai", "--sample", "2", "--allow-changed-data", "--out",
                   str(page_file))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "offline-eval: warning: The data changed since the sweep" in proc.stderr and str(edited.resolve()) in (
        proc.stderr
    )
    html = page_file.read_text(encoding="utf-8")
    assert '<p class="warning">The data changed since the sweep: ' + str(edited.resolve()) in html
    edited.unlink()
    proc = run_cli("annotate", str(out), "--task", "legalrikai", "--sample", "2")
    assert proc.returncode == 2 and f"{edited.resolve()}, field 'data_files': is missing" in proc.stderr


def test_the_page_source_holds_no_run_name_judge_score_or_rationale_before_save(rikai, tmp_path):  # type: ignore[no-untyped-def]
    """Blind in the source, not only on screen: the page names outputs by case id; the reveal file beside it
    holds each case's run and the judges' scores and rationales (--unblind puts them in the page)."""
    from offline_eval.annotate.sample import offered, read_sweep

    page_file = tmp_path / "blind.html"
    proc = run_cli("annotate", str(rikai), "--task", "legalrikai", "--sample", "8", "--out", str(page_file))
    assert proc.returncode == 0, proc.stderr
    reveal_file = tmp_path / "blind.reveal.json"
    assert f"wrote {reveal_file}: which run wrote each output" in proc.stdout
    html = page_file.read_text(encoding="utf-8")
    _, cases = offered(read_sweep(str(rikai)), "legalrikai", str(rikai))
    judged = [c for c in cases if any(d.title.startswith("Judge ") for d in c.hidden)]
    assert judged
    for secret in (RUN, "m.fake", "j.fake", "Judge j", "rationale", '"hidden"', '"run"', "\\tlegalrikai."):
        assert secret not in html, secret
    reveal = json.loads(reveal_file.read_text(encoding="utf-8"))
    sid = reveal["sample"]
    assert sid in html and set(reveal["cases"]) == {c.case_id(sid) for c in cases}
    for c in cases:
        assert c.case_id(sid) in html
        got = reveal["cases"][c.case_id(sid)]
        assert got["run"] == RUN and [d["title"] for d in got["hidden"]] == [d.title for d in c.hidden]
    judge = next(d for d in reveal["cases"][judged[0].case_id(sid)]["hidden"] if d["title"].startswith("Judge "))
    code = judged[0].scales[0].code  # the fake judge gives each criterion 1, with the rationale "x"
    assert judge["title"] == "Judge j.fake.default.ctx65536" and f"{code}: 1\n" in judge["text"]
    assert f"{code}: x" in judge["text"]
    open_file = tmp_path / "open.html"
    assert run_cli("annotate", str(rikai), "--task", "legalrikai", "--sample", "8", "--unblind", "--out",
                   str(open_file)).returncode == 0  # fmt: skip
    assert "Judge j.fake.default.ctx65536" in open_file.read_text(encoding="utf-8")


def test_the_same_annotator_name_in_two_files_is_refused_naming_both_files(rikai, tmp_path):  # type: ignore[no-untyped-def]
    """Two people who typed the same name would be merged into one (or one contradicting themselves)."""
    from offline_eval.annotate.sample import offered, read_sweep, sample_id
    from offline_eval.runtime.errors import InputError
    from offline_eval.tasks.legalrikai.human.agreement import read_human_scores

    _, cases = offered(read_sweep(str(rikai)), "legalrikai", str(rikai))
    sid = sample_id("legalrikai", cases)
    a = _export(rikai, cases, tmp_path / "a.csv", sid, score=3, annotator="弁護士A")
    b = _export(rikai, cases, tmp_path / "b.csv", sid, score=1, annotator="弁護士A")
    with pytest.raises(InputError) as e:
        read_human_scores([str(a), str(b)])
    assert str(e.value).startswith(
        f"{b}, record row 2, field 'annotator': annotator '弁護士A' is in {a} (row 2) and in"
    )
    assert "give each annotator a name of their own" in str(e.value)
    cfg = tmp_path / "same.yaml"
    raw = yaml.safe_load((rikai.parent / "m.yaml").read_text(encoding="utf-8"))
    raw["tasks"]["legalrikai"]["human_scores"] = [str(a), str(b)]
    cfg.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    proc = run_cli("sweep", str(cfg))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert str(a) in proc.stderr and str(b) in proc.stderr
    with pytest.raises(InputError, match="given twice"):
        read_human_scores([str(a), str(a)])
    # Several annotators in one file stay several people, and two files of two names are read.
    assert len(read_human_scores([str(a), str(_export(rikai, cases, tmp_path / "c.csv", sid, annotator="B"))])) > 0


def test_a_cp932_resave_is_refused_with_the_command_that_converts_it(rikai, tmp_path):  # type: ignore[no-untyped-def]
    """Japanese Excel saves "CSV" as cp932: refused in one line, with the iconv line that converts it; the
    converted file is read."""
    import shlex
    import shutil
    import subprocess

    from offline_eval.annotate.sample import offered, read_sweep, sample_id
    from offline_eval.tasks.legalrikai.human.agreement import read_human_scores

    _, cases = offered(read_sweep(str(rikai)), "legalrikai", str(rikai))
    sid = sample_id("legalrikai", cases)
    utf8 = _export(rikai, cases[:1], tmp_path / "utf8.csv", sid, annotator="弁護士A", comment="条文の引用が正確")
    resaved = tmp_path / "excel.csv"
    resaved.write_bytes(utf8.read_text(encoding="utf-8-sig").encode("cp932"))  # no BOM: as Excel writes it
    cfg = tmp_path / "cp932.yaml"
    raw = yaml.safe_load((rikai.parent / "m.yaml").read_text(encoding="utf-8"))
    raw["tasks"]["legalrikai"]["human_scores"] = str(resaved)
    cfg.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    proc = run_cli("sweep", str(cfg))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    fixed = tmp_path / "excel.utf8.csv"
    command = f"iconv -f CP932 -t UTF-8 {shlex.quote(str(resaved))} > {shlex.quote(str(fixed))}"
    assert f"{resaved}, line 2: not UTF-8 but cp932" in proc.stderr and proc.stderr.strip().endswith(command)
    if shutil.which("iconv"):
        subprocess.run(command, shell=True, check=True)
        assert {r["annotator"] for r in read_human_scores(str(fixed))} == {"弁護士A"}
    # Bytes that are not cp932 Japanese either are refused as not UTF-8, with no wrong advice.
    resaved.write_bytes(b"task,item_id\nstatrev,\xff\xfe\n")
    proc = run_cli("sweep", str(cfg))
    assert proc.returncode == 2 and "line 2: not UTF-8 text (byte 0xff): save it as UTF-8" in proc.stderr


def test_csv_cells_a_spreadsheet_would_evaluate_are_unescaped_on_read(tmp_path):  # type: ignore[no-untyped-def]
    """OWASP's CSV injection rule: a cell starting with =, +, -, @, tab or CR is written with a leading quote (one
    more for a cell already starting with quotes before one), and read back as it was; other quotes stay."""
    from offline_eval.tasks.kit.datafiles import escape_cell, read_table, unescape_cell

    cells = ["=1+1", "+81 3", "-引用条文", "@SUM(A1)", "\tタブ", "\r改行", "'=引用", "''-x", "'quoted", "正常", ""]
    for c in cells:
        assert unescape_cell(escape_cell(c)) == c
        assert escape_cell(c)[:1] not in ("=", "+", "-", "@", "\t", "\r")
    p = tmp_path / "x.csv"
    with p.open("w", encoding="utf-8-sig", newline="") as fh:
        csv.writer(fh).writerows([["comment"], *[[escape_cell(c)] for c in cells]])
    assert [r["comment"] for _, r in read_table(p)] == cells


def _browser_export(browser, page_file: Path, annotator: str, comments: list[str], save_as: Path) -> Path:  # type: ignore[no-untyped-def]
    """Every output of the page scored (the lowest score), its comments filled in turn from `comments`, exported."""
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(page_file.as_uri())
    page.locator("#annotator").fill(annotator)
    n = int(re.search(r"of (\d+)\)", page.locator("#progress").inner_text()).group(1))  # type: ignore[union-attr]
    k = 0
    for _ in range(n):
        for fieldset in page.locator("fieldset.scale").all():
            fieldset.locator("input[type=radio]").first.check()
            fieldset.locator("textarea.comment").fill(comments[k % len(comments)])
            k += 1
        page.locator("button.save").click()
        page.locator("#next").click()
    with page.expect_download() as got:
        page.locator("#export").click()
    got.value.save_as(save_as)
    context.close()
    assert errors == []
    return save_as


@pytest.mark.slow
def test_csv_cells_a_spreadsheet_would_evaluate_are_escaped_on_export(rikai, tmp_path, offline_browser):  # type: ignore[no-untyped-def]
    """Comments and a name starting with =, +, -, @ or tab leave the page with a leading quote (a spreadsheet
    shows them as text, runs nothing), as datafiles.escape_cell writes them, and the sweep reads them as typed."""
    from offline_eval.tasks.kit.datafiles import escape_cell, read_table
    from offline_eval.tasks.legalrikai.human.agreement import read_human_scores

    page_file = tmp_path / "escape.html"
    assert (
        run_cli("annotate", str(rikai), "--task", "legalrikai", "--sample", "2", "--out", str(page_file)).returncode
        == 0
    )
    comments = ['=HYPERLINK("http://x","y")', "+81 3", "-引用条文が違う", "@SUM(A1)", "\tタブ", "'=引用", "普通"]
    name = "=cmd|' /C calc'!A0"
    export = _browser_export(offline_browser, page_file, name, comments, tmp_path / "escape.csv")
    raw = list(csv.reader(export.read_text(encoding="utf-8-sig").splitlines()))
    col = raw[0].index("comment")
    assert [r[col] for r in raw[1:]] == [escape_cell(comments[i % len(comments)]) for i in range(len(raw) - 1)]
    assert {r[raw[0].index("annotator")] for r in raw[1:]} == {"'" + name}
    assert not [cell for r in raw for cell in r if cell[:1] in ("=", "+", "-", "@", "\t", "\r")]
    back = [r for _, r in read_table(export)]
    assert [r["comment"] for r in back] == [comments[i % len(comments)] for i in range(len(back))]
    assert {r["annotator"] for r in read_human_scores(str(export))} == {name}
    # Every row carries the page's draw: a seeded sample is random, and the sweep calibrates with it.
    assert {r[raw[0].index("draw")] for r in raw[1:]} == {"random"}
    assert {r["draw"] for r in read_human_scores(str(export))} == {"random"}


@pytest.mark.slow
def test_the_export_is_utf8_with_a_bom_and_the_reader_accepts_it(rikai, tmp_path, offline_browser):  # type: ignore[no-untyped-def]
    """Japanese Excel reads a CSV without a byte order mark as cp932 (mojibake): the page writes one; the sweep's
    reader skips it, so the first column is `task`, not "\\ufefftask"."""
    from offline_eval.tasks.legalrikai.human.agreement import read_human_scores

    page_file = tmp_path / "bom.html"
    assert (
        run_cli("annotate", str(rikai), "--task", "legalrikai", "--sample", "1", "--out", str(page_file)).returncode
        == 0
    )
    export = _browser_export(offline_browser, page_file, "弁護士A", ["条文の引用が正確"], tmp_path / "bom.csv")
    data = export.read_bytes()
    assert data.startswith(b"\xef\xbb\xbftask,item_id,case,") and data.count(b"\xef\xbb\xbf") == 1
    rows = read_human_scores(str(export))
    assert rows and {r["annotator"] for r in rows} == {"弁護士A"} and all(r["task"] for r in rows)
