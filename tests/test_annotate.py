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
    return {"legalrikai": {"data": str(DATA / "legalrikai"), "limit": 2, "judges": [judge], **extra}}


def _sweep(cfg: Path, log: list[str] | None = None) -> Path:
    from offline_eval.config import load_config
    from offline_eval.sweep import run_sweep

    run_sweep(
        load_config(cfg), source=str(cfg), progress=False, log=(log.append if log is not None else lambda _: None)
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
    assert any(d.diff for d in statrev.shown) and statrev.export == {"task": "statrev", "item_id": statrev.item_id,
                                                                      "model": RUN}  # fmt: skip
    assert [s.code for s in statrev.scales] == ["IF", "SC", "CP", "TA", "WA"]


def test_a_small_sample_crosses_sub_tasks_and_runs_alike():  # type: ignore[no-untyped-def]
    from offline_eval.annotate.sample import sample
    from offline_eval.annotation import Case

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
    jbeqa = _sweep(_config(tmp_path, {"jbeqa": {"data": str(DATA / "jbeqa"), "limit": 2}}))
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
    pairs.write_text(f"{RUN},no-such-item\n", encoding="utf-8")
    proc = run_cli("annotate", str(rikai), "--task", "legalrikai", "--items", str(pairs))
    assert proc.returncode == 2 and f"{pairs}, line 1: run {RUN} has no output to annotate" in proc.stderr


def _export(rikai: Path, cases: list, path: Path, sample: str, score: int = 2) -> Path:  # type: ignore[type-arg]
    """What the page exports for these cases (the browser test checks the page writes exactly this form)."""
    from offline_eval.tasks.legalrikai.annotate import FORM

    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(FORM.columns)
        for c in cases:
            for s in c.scales:
                w.writerow([c.export["task"], c.item_id, c.run, s.code, min(score, s.hi), "A", "", sample,
                            c.output_sha256])  # fmt: skip
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
    text = mine.read_text(encoding="utf-8").splitlines()
    text[1] = text[1].replace(three[0].output_sha256, "0" * 64)  # scores of an output this sweep did not write
    mine.write_text("\n".join(text) + "\n", encoding="utf-8")
    proc = run_cli("annotate", str(rikai), "--task", "legalrikai", "--sample", "3", "--resume", str(mine))
    assert proc.returncode == 2 and "field 'output_sha256': scores another output" in proc.stderr
    assert "exported from another sweep" in proc.stderr
    # The sweep refuses it the same way: these scores are not for its outputs.
    cfg = tmp_path / "again.yaml"
    raw = yaml.safe_load((rikai.parent / "m.yaml").read_text(encoding="utf-8"))
    raw["tasks"]["legalrikai"]["human_scores"] = str(mine)
    cfg.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    proc = run_cli("sweep", str(cfg))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{mine}, record row 2, field 'output_sha256': scores another output of {RUN}" in proc.stderr


def test_human_scores_from_several_files_agree_by_krippendorff_and_judge_bias(rikai, tmp_path):  # type: ignore[no-untyped-def]
    """Two annotators' exports, one file each: alpha (ordinal) between them from the `krippendorff` package, each
    judge's bias against their mean computed by hand, n per cell."""
    import krippendorff
    import numpy as np

    from offline_eval.annotate.sample import offered, read_sweep, sample_id

    _, cases = offered(read_sweep(str(rikai)), "legalrikai", str(rikai))
    sid = sample_id("legalrikai", cases)
    a = _export(rikai, cases, tmp_path / "a.csv", sid, score=3)
    b = _export(rikai, cases, tmp_path / "b.csv", sid, score=1)
    rows = b.read_text(encoding="utf-8").splitlines()
    b.write_text("\n".join(r.replace(",A,", ",B,") for r in rows) + "\n", encoding="utf-8")
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
    connects anywhere, the run and the judges stay hidden until each is scored, a reload keeps the scores, and
    the export, given to the sweep as human_scores, shows in the agreement tables with nothing generated."""
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
    rows = list(csv.DictReader(export.read_text(encoding="utf-8").splitlines()))
    assert list(rows[0]) == ["task", "item_id", "model", "criterion", "score", "annotator", "comment", "sample",
                             "output_sha256"]  # fmt: skip
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
    tasks = {"legalevalq": {"data": str(DATA / "legalevalq" / "queries.json"), "limit": 6, "evaluator": ev,
                            "scorer": str(ROOT / "models" / "tiny-scorer")}}  # fmt: skip
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
    from offline_eval.datafiles import read_table
    from offline_eval.errors import InputError

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
