"""Calibration end to end on the fake engine: a LegalRikai sweep whose judge's scores are scripted, with human labels
on a random sample of each run's outputs (`human_sample: random`). summary.json's calibration rows, the leaderboard,
the verdict on the calibrated scale and the report hold the PPI++ numbers an independent computation gives (the
formulas written out here from the PPI++ paper, and ppi_py itself where it is installed); labels not drawn at random,
labels on an output that changed, labels on no output and labels on one run of a verdict pair each get their line."""

from __future__ import annotations

import csv
import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import ROOT, run_cli
from ppi_child import ppi_py_reference

from offline_eval.tasks.legalrikai import rubric

N_ITEMS = 40
SETTING = "legalrikai.amendexp"
REF, ALT = "m.fake.ref.ctx65536", "m.fake.alt.ctx65536"
CRITS = [c.code for c in rubric.criteria("amendexp")]
Z = 1.959963984540054


def _judge_scores(i: int) -> dict[str, int]:
    """The fake judge's scores of item i: CA runs 1, 2, 3; the others vary on their own cycles."""
    return {c: 1 + (i + k * (i // 3)) % 3 for k, c in enumerate(CRITS)}


def _human(i: int, run: str) -> dict[str, int]:
    """What the lawyers say: stricter than the judge on CA (one point lower on every other item), as the judge
    elsewhere, except on the alternative run's RA, a point higher where it can be."""
    got = dict(_judge_scores(i))
    if i % 2 == 0:
        got["CA"] = max(1, got["CA"] - 1)
    if run == ALT:
        got["RA"] = min(3, got["RA"] + 1)
    return got


def _data(tmp: Path) -> Path:
    base = json.loads((ROOT / "data" / "legalrikai" / "amendexp.jsonl").read_text(encoding="utf-8").splitlines()[0])
    folder = tmp / "data"
    folder.mkdir()
    lines = [
        json.dumps({**base, "id": f"amendexp-{i:03d}", "law_name": f"架空法{i:03d}"}, ensure_ascii=False)
        for i in range(N_ITEMS)
    ]
    (folder / "amendexp.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def _labels(path: Path, picks: dict[str, list[int]], extra: list[list[str]] = ()) -> Path:  # type: ignore[assignment]
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["task", "item_id", "model", "criterion", "score", "annotator"])
        for run, items in picks.items():
            for i in items:
                for c, s in _human(i, run).items():
                    w.writerow(["amendexp", f"amendexp-{i:03d}", run, c, s, "弁護士A"])
        for row in extra:
            w.writerow(row)
    return path


PICKS = {
    REF: sorted(random.Random(1).sample(range(N_ITEMS), 15)),
    ALT: sorted(random.Random(2).sample(range(N_ITEMS), 12)),
}


def _config(tmp: Path, labels: Path | None, **options: object) -> Path:
    (tmp / "w.bin").write_text("fake weights")
    (tmp / "w2.bin").write_text("other fake weights")
    judge = {
        "name": "j",
        "backend": "fake",
        "path": str(tmp / "w.bin"),
        "max_model_len": 65536,
        "engine_args": {
            "answers": {
                f"回答{i:03d}": json.dumps(
                    {c: {"rationale": "x", "score": s} for c, s in _judge_scores(i).items()}, ensure_ascii=False
                )
                for i in range(N_ITEMS)
            }
        },
    }
    cfg = {
        "output_dir": str(tmp / "out"),
        "models": [
            {
                "name": "m",
                "backend": "fake",
                "path": str(tmp / "w.bin"),
                "max_model_len": 65536,
                "engine_args": {"answers": {f"架空法{i:03d}": f"## 改正の概要\n回答{i:03d}" for i in range(N_ITEMS)}},
                "variants": {"ref": {}, "alt": {"file": str(tmp / "w2.bin")}},
            }
        ],
        "tasks": {
            "legalrikai": {
                "protocol": "offline-eval",
                "data": str(_data(tmp)),
                "judges": [judge],
                **({"human_scores": str(labels)} if labels else {}),
                **options,
            }
        },
    }
    p = tmp / "m.yaml"
    p.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    return p


def _sweep(cfg: Path) -> tuple[Path, dict, list[str]]:  # type: ignore[type-arg]
    from offline_eval.pipeline.config import load_config
    from offline_eval.pipeline.options import SweepOptions
    from offline_eval.pipeline.orchestrate import run_sweep

    log: list[str] = []
    run_sweep(load_config(cfg), SweepOptions(source=str(cfg), progress=False, log=log.append))
    out = Path(yaml.safe_load(cfg.read_text(encoding="utf-8"))["output_dir"])
    return out, json.loads((out / "summary.json").read_text(encoding="utf-8")), log


def ppi_plus_plus(y: np.ndarray, yhat: np.ndarray, yu: np.ndarray) -> tuple[float, float, float]:
    """PPI++ for a mean, written out from Angelopoulos et al. 2024 (arXiv 2311.01453, Example 6.1) with ppi_py
    0.2.3's conventions: (estimate, standard error, lambda)."""
    n, big_n = len(y), len(yu)
    cov = float(np.mean((y - y.mean()) * (yhat - yhat.mean())))
    var = float(np.var(np.concatenate([yhat, yu]), ddof=1))
    lam = 0.0 if var == 0 else min(1.0, max(0.0, cov / ((1 + n / big_n) * var)))
    est = lam * yu.mean() + float(np.mean(y - lam * yhat))
    se = math.sqrt(np.var(lam * yu) / big_n + np.var(y - lam * yhat) / n)
    return est, se, lam


def _oracle(run: str, truth, judge) -> tuple[float, float, float, int]:  # type: ignore[no-untyped-def]
    labelled = PICKS[run]
    y = np.array([truth(i) for i in labelled])
    yhat = np.array([judge(i) for i in labelled])
    yu = np.array([judge(i) for i in range(N_ITEMS) if i not in labelled])
    est, se, lam = ppi_plus_plus(y, yhat, yu)
    return est, se, lam, len(y)


def _norm(code: str, s: float) -> float:
    c = next(x for x in rubric.criteria("amendexp") if x.code == code)
    return c.normalise(s)


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, list[str]]:  # type: ignore[type-arg]
    tmp = tmp_path_factory.mktemp("calibrated")
    labels = _labels(tmp / "labels.csv", PICKS)
    return _sweep(_config(tmp, labels, human_sample="random"))


def _row(summary: dict, run: str, number: str, judge: str = "Avg") -> dict:  # type: ignore[type-arg]
    return next(
        c
        for c in summary["calibration"]
        if c["run"] == run and c["setting"] == SETTING and c["number"] == number and c["judge"] == judge
    )


def test_every_judged_number_is_the_ppi_plus_plus_estimate_an_independent_computation_gives(swept):  # type: ignore[no-untyped-def]
    out, summary, _ = swept
    assert summary["schema_version"] == 5
    # The candidates' outputs differ by item, so the judge's scripted scores land where this test put them.
    recs = [json.loads(x) for x in (out / "results" / REF / f"{SETTING}.jsonl").read_text("utf-8").splitlines()]
    assert {r["id"]: r["scores"]["CA"] for r in recs} == {
        f"amendexp-{i:03d}": _norm("CA", _judge_scores(i)["CA"]) for i in range(N_ITEMS)
    }
    for run in (REF, ALT):
        for code in CRITS:
            for judge in ("Avg", "j.fake.default.ctx65536"):
                row = _row(summary, run, code, judge)
                est, se, lam, n = _oracle(
                    run,
                    lambda i, code=code, run=run: _norm(code, _human(i, run)[code]),
                    lambda i, code=code: _norm(code, _judge_scores(i)[code]),
                )
                assert row["status"] == "calibrated" and row["n"] == n and row["N"] == N_ITEMS - n
                assert row["ppi_pp"]["estimate"] == pytest.approx(est, abs=2e-6), (run, code)
                assert row["ppi_pp"]["ci_low"] == pytest.approx(est - Z * se, abs=2e-6)
                assert row["ppi_pp"]["ci_high"] == pytest.approx(est + Z * se, abs=2e-6)
                assert row["lam"] == pytest.approx(lam, abs=2e-6) and row["method"] == "analytic"
                assert row["unscored"] == 0 and row["labels_unscored"] == 0
                judge_mean = np.mean([_norm(code, _judge_scores(i)[code]) for i in range(N_ITEMS)])
                assert row["judge_mean"] == pytest.approx(judge_mean, abs=2e-6)
                labels_only = np.mean([_norm(code, _human(i, run)[code]) for i in PICKS[run]])
                assert row["labels"]["estimate"] == pytest.approx(labels_only, abs=2e-6)
        # The sub-task's score: an output's criteria averaged, human and judge alike.
        row = _row(summary, run, "score")
        est, se, lam, n = _oracle(
            run,
            lambda i, run=run: np.mean([_norm(c, s) for c, s in _human(i, run).items()]),
            lambda i: np.mean([_norm(c, s) for c, s in _judge_scores(i).items()]),
        )
        assert row["headline"] and row["ppi_pp"]["estimate"] == pytest.approx(est, abs=2e-6)
        assert row["ppi_pp"]["se"] == pytest.approx(se, abs=2e-6)
    # The judge is lenient on CA: the calibrated estimate sits below the judge's mean, as the lawyers' labels do.
    ca = _row(summary, REF, "CA")
    assert ca["ppi_pp"]["estimate"] < ca["judge_mean"] - 0.1


def test_ppi_py_itself_agrees(swept):  # type: ignore[no-untyped-def]
    _, summary, _ = swept
    run, code = REF, "CA"
    y = [_norm(code, _human(i, run)[code]) for i in PICKS[run]]
    yhat = [_norm(code, _judge_scores(i)[code]) for i in PICKS[run]]
    yu = [_norm(code, _judge_scores(i)[code]) for i in range(N_ITEMS) if i not in PICKS[run]]
    (ref,) = ppi_py_reference([(y, yhat, yu)])
    row = _row(summary, run, code)
    assert (row["ppi_pp"]["ci_low"], row["ppi_pp"]["ci_high"]) == pytest.approx(tuple(ref["pp"][1:]), abs=2e-6)  # type: ignore[index]


def test_leaderboard_verdict_and_report_read_the_calibrated_numbers(swept):  # type: ignore[no-untyped-def]
    out, summary, _ = swept
    board = {r["run"]: r for r in summary["leaderboards"][SETTING]}
    for run in (REF, ALT):
        row = _row(summary, run, "score")
        assert (
            board[run]["calibration"]["estimate"] == row["ppi_pp"]["estimate"]
            and board[run]["calibration"]["n"] == row["n"]
        )
    # The verdict of one variant against the model's reference: the difference of two independent PPI++ estimates, its se from both.
    (model,) = summary["noninferiority"]
    (v,) = model["comparisons"]
    a, r = _row(summary, v["run"], "score")["ppi_pp"], _row(summary, model["reference"], "score")["ppi_pp"]
    se = math.hypot(a["se"], r["se"])
    assert v["scale"] == "calibrated" and v["scale_note"] is None
    assert v["estimate"] == pytest.approx(a["estimate"] - r["estimate"], abs=1e-9)
    assert (v["ci_low"], v["ci_high"]) == pytest.approx((v["estimate"] - Z * se, v["estimate"] + Z * se), abs=1e-9)
    md = (out / "report.md").read_text(encoding="utf-8")
    ref = _row(summary, REF, "score")["ppi_pp"]
    assert f"{ref['estimate']:.2f} [{ref['ci_low']:.2f}, {ref['ci_high']:.2f}] calibrated on 15 labels" in md
    assert "legalrikai: calibrated by human labels (PPI++, 95% CI) for 2 of 2 run x setting cells, on 27 labelled" in md
    assert "## Calibration by human labels" in md and "(calibrated scale)" in md
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "calibrated on 12 labels" in html


def test_verify_rebuilds_the_calibration_and_compare_carries_it(swept):  # type: ignore[no-untyped-def]
    from offline_eval.comparison import compare
    from offline_eval.verify import verify

    out, summary, _ = swept
    assert verify(out) == []
    c = compare(out, out)
    pair = next(p for p in c.calibration if p.old_run == REF and p.setting == SETTING)
    assert pair.old is not None and pair.old.ppi_pp is not None
    assert pair.old.ppi_pp.estimate == _row(summary, REF, "score")["ppi_pp"]["estimate"]


def test_labels_not_drawn_at_random_calibrate_nothing_and_the_sweep_goes_on(tmp_path):  # type: ignore[no-untyped-def]
    labels = _labels(tmp_path / "labels.csv", PICKS)
    out, summary, _ = _sweep(_config(tmp_path, labels))  # no human_sample, no draw recorded
    rows = [c for c in summary["calibration"] if c["setting"] == SETTING]
    assert rows and all(c["status"] == "uncalibrated" and "not drawn at random" in c["reason"] for c in rows)
    assert all(c.get("ppi_pp") is None and c["judge_mean"] is not None for c in rows)
    (v,) = summary["noninferiority"][0]["comparisons"]
    assert v["scale"] == "judge"
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "legalrikai: the judges' mean, uncalibrated (the labels were not drawn at random" in md
    assert "uncalibrated" in md and "calibrated on" not in md
    # The agreement tables are still there.
    assert summary["task_reports"]["legalrikai"]["human"]["matched_outputs"] == 27


def test_bad_labels_each_get_one_line_naming_file_record_and_field(tmp_path):  # type: ignore[no-untyped-def]
    extra = [
        ["amendexp", "amendexp-999", REF, "CA", "2", "弁護士A"],  # an item no run has
        ["amendexp", "amendexp-000", "nosuch.fake.x.ctx1", "CA", "2", "弁護士A"],  # a run the sweep lacks
    ]
    labels = _labels(tmp_path / "labels.csv", {REF: PICKS[REF]}, extra)  # labels on one run of the pair only
    out, summary, log = _sweep(_config(tmp_path, labels, human_sample="random"))
    notes = summary["calibration_notes"]["legalrikai"]
    rows = 1 + 6 * len(PICKS[REF])  # the header (row 1), then six criteria per output
    assert f"1 row(s): item not in this sweep (first: {labels}, row {rows + 1}, field item_id)" in notes
    assert f"1 row(s): model matches no run (first: {labels}, row {rows + 2}, field model)" in notes
    assert any(f"warning: legalrikai human labels: 1 row(s): model matches no run (first: {labels}" in x for x in log)
    (v,) = summary["noninferiority"][0]["comparisons"]
    assert v["scale"] == "judge"
    assert v["scale_note"] == (
        f"{labels}: only {REF} has calibrated labels, {ALT} none (field human_scores): label a random sample of both "
        "runs' outputs"
    )
    assert v["run"] == REF  # the model's reference is its first variant by name, alt
    assert any(f"warning: verdict of {REF} on {SETTING}: judges' scale: {labels}: only {REF}" in x for x in log)
    alt = _row(summary, ALT, "score")
    assert alt["status"] == "uncalibrated" and "no human label on this run's outputs" in alt["reason"]


def test_a_label_off_the_scale_is_refused_before_any_model_runs(tmp_path):  # type: ignore[no-untyped-def]
    labels = _labels(tmp_path / "labels.csv", {}, [["amendexp", "amendexp-001", REF, "CA", "4", "弁護士A"]])
    proc = run_cli("sweep", str(_config(tmp_path, labels, human_sample="random")))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{labels}, record row 2, field 'score': '4' is not an integer from 1 to 3" in proc.stderr
    assert not (tmp_path / "out" / "summary.json").exists()


def test_a_label_on_an_output_that_changed_is_not_used_and_is_counted(tmp_path):  # type: ignore[no-untyped-def]
    from offline_eval.tasks.kit.annotation import output_sha256

    other = next(i for i in range(N_ITEMS) if i not in PICKS[REF])
    rows = [
        ["task", "item_id", "model", "criterion", "score", "annotator", "output_sha256"],
        *[["amendexp", f"amendexp-{i:03d}", REF, c, str(s), "A", output_sha256(f"## 改正の概要\n回答{i:03d}")]
          for i in PICKS[REF] for c, s in _human(i, REF).items()],
        *[["amendexp", f"amendexp-{other:03d}", REF, c, "1", "A", "0" * 64] for c in CRITS],
    ]  # fmt: skip
    labels = tmp_path / "labels.csv"
    with labels.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)
    _, summary, _ = _sweep(_config(tmp_path, labels, human_sample="random"))
    row = _row(summary, REF, "CA")
    assert row["stale"] == 6 and row["n"] == len(PICKS[REF])
    assert "6 row(s) on AmendExp of m.fake.ref.ctx65536 not used: the output changed since it was labelled" in " ".join(
        summary["calibration_notes"]["legalrikai"]
    )


def _needed(width: float, sd: float, rho: float, total: int) -> int | None:
    """The smallest n whose effective n, n(n+N)/(n+(1-rho^2)N) with N = total - n, gives 1.96 sd/sqrt(n_eff) <= W."""
    for n in range(1, total + 1):
        big_n = total - n
        n_eff = n * (n + big_n) / (n + (1 - rho**2) * big_n)
        if Z * sd / math.sqrt(n_eff) <= width:
            return n
    return None


def test_annotate_plan_gives_each_runs_labels_from_the_pilots_correlation(swept):  # type: ignore[no-untyped-def]
    out, summary, _ = swept
    proc = run_cli("annotate", "plan", str(out), "--task", "legalrikai", "--width", "0.08")
    assert proc.returncode == 0, proc.stderr
    for run in (REF, ALT):
        row = _row(summary, run, "score")
        labelled = [np.mean([_norm(c, s) for c, s in _human(i, run).items()]) for i in PICKS[run]]
        sd = float(np.std(labelled))
        assert row["label_sd"] == pytest.approx(sd, abs=1e-6)
        need, alone = _needed(0.08, sd, max(row["rho"], 0.0), N_ITEMS), math.ceil((Z * sd / 0.08) ** 2)
        line = next(x for x in proc.stdout.splitlines() if run in x)
        want = f"{need} labels with the judges" if need is not None else f"more than its {N_ITEMS} outputs"
        assert f"pilot {row['n']} of {N_ITEMS} outputs, rho {row['rho']:.2f}" in line and want in line, line
        if need is not None and alone <= N_ITEMS:
            assert line.endswith(f"{alone} alone; the judges save {alone - need}")
    bad = run_cli("annotate", "plan", str(out), "--task", "legalrikai", "--width", "-1")
    assert bad.returncode == 2 and "'--width'" in bad.stderr and "positive half-width" in bad.stderr


def test_annotate_plan_without_a_random_pilot_says_what_to_do(tmp_path):  # type: ignore[no-untyped-def]
    out, _, _ = _sweep(_config(tmp_path, _labels(tmp_path / "labels.csv", PICKS)))  # not random: no pilot
    proc = run_cli("annotate", "plan", str(out), "--task", "legalrikai", "--width", "0.05")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "no pilot labels to plan from (the labels were not drawn at random" in proc.stderr
    assert "offline-eval annotate DIR --task legalrikai --sample 20" in proc.stderr


def test_legalevalq_labels_calibrate_the_scorers_mean_stratum_by_stratum(tmp_path):  # type: ignore[no-untyped-def]
    """LegalEval-Q's export (JSONL, each line naming its output by case id, with the page's draw) calibrates the
    scorer's 0-100 mean; the draw was stratified by split, so each split is estimated apart and the two combined
    by their sizes, as an independent computation here does."""
    from offline_eval.pipeline.analyses.calibration import build
    from offline_eval.results.records import RunEntry, RunKey
    from offline_eval.runtime.errors import InputError
    from offline_eval.tasks import make_task
    from offline_eval.tasks.kit import case_id
    from offline_eval.tasks.kit.annotation import output_sha256
    from offline_eval.tasks.legalevalq.records import LegalEvalQRecord

    run, setting, sid = "c.fake.default.ctx4096", "legalevalq", "s-0123456789ab"
    entry = RunEntry(
        model="c", variant="default", backend="fake", run=run, max_model_len=4096, task="legalevalq",
        setting=setting, options={}, prompt_format="plain", n_items=60, primary_metric="adj_score", metrics={},
        weights_mb=0.0, throughput={},
    )  # fmt: skip
    rng = np.random.default_rng(4)
    split = {f"q{i}" if i < 40 else f"val:q{i}": ("train" if i < 40 else "validation") for i in range(60)}
    scorer = {i: float(rng.uniform(30, 90)) for i in split}
    human = {i: min(100.0, max(0.0, s - 12 + float(rng.normal(0, 8)))) for i, s in scorer.items()}
    recs = [
        LegalEvalQRecord(id=i, split=sp, query=f"問{i}", output=f"答{i}", finish_reason="stop", gold=None,
                         scores={"quality": scorer[i]})
        for i, sp in split.items()
    ]  # fmt: skip
    labelled = {
        sp: sorted(random.Random(9).sample([i for i in split if split[i] == sp], 8)) for sp in ("train", "validation")
    }

    export = tmp_path / "legalevalq_annotated-s-0123456789ab-A.jsonl"
    export.write_text(
        "".join(
            json.dumps({"query": f"問{i}", "answer": f"答{i}", "comment": "c", "conclusion": "d", "score": human[i],
                        "item_id": i, "case": case_id(sid, run, setting, i), "annotator": "A", "sample": sid,
                        "output_sha256": output_sha256(f"答{i}"), "draw": "random"}, ensure_ascii=False) + "\n"
            for ids in labelled.values() for i in ids
        ),
        encoding="utf-8",
    )  # fmt: skip
    (tmp_path / "scorer").mkdir()
    task = make_task(
        "legalevalq",
        {"data": "q.json", "scorer": str(tmp_path / "scorer"), "human_scores": str(export),
         "evaluator": {"name": "ev", "backend": "fake", "path": "w.bin"}},
        str(tmp_path / "m.yaml"),
    )  # fmt: skip
    rows, notes = build([entry], {RunKey(run, setting): recs}, {"legalevalq": task})
    (row,) = rows
    assert not notes and row.status == "calibrated" and row.n == 16 and row.N == 44
    assert row.number == "mean" and row.judge == "scorer" and row.headline and row.strata == 2
    parts = []
    for sp in ("train", "validation"):
        ids = [i for i in split if split[i] == sp]
        y = np.array([human[i] for i in labelled[sp]])
        yhat = np.array([scorer[i] for i in labelled[sp]])
        yu = np.array([scorer[i] for i in ids if i not in labelled[sp]])
        est, se, _ = ppi_plus_plus(y, yhat, yu)
        parts.append((len(ids) / 60, est, se))
    est = sum(w * e for w, e, _ in parts)
    se = math.sqrt(sum((w * s) ** 2 for w, _, s in parts))
    assert row.ppi_pp is not None and row.ppi_pp.estimate == pytest.approx(est, abs=1e-5)
    assert (row.ppi_pp.ci_low, row.ppi_pp.ci_high) == pytest.approx((est - Z * se, est + Z * se), abs=1e-5)
    assert row.judge_mean == pytest.approx(np.mean(list(scorer.values())), abs=1e-5)
    assert row.ppi_pp.estimate < row.judge_mean - 5  # the scorer is lenient by about 12 points
    # An annotator's export given twice counts once; the same annotator scoring an output twice differently is
    # refused, naming the file, the row and the field.
    from offline_eval.tasks.legalevalq.human import human_labels

    again = human_labels([str(export), str(export)], None, [entry], {RunKey(run, setting): recs})
    assert (
        again is not None
        and again.by_output == human_labels(str(export), None, [entry], {RunKey(run, setting): recs}).by_output
    )  # type: ignore[union-attr]
    first = export.read_text(encoding="utf-8").splitlines()[0]
    other = tmp_path / "other.jsonl"
    other.write_text(first.replace(f'"score": {json.loads(first)["score"]}', '"score": 1.0') + "\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        human_labels([str(export), str(other)], None, [entry], {RunKey(run, setting): recs})
    assert str(other) in str(e.value) and "line 1" in str(e.value) and "'score'" in str(e.value)
