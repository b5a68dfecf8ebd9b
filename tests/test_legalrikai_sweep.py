"""LegalRikai end to end with real engines: the tiny model as candidate and as judge on llama.cpp and
transformers, every judge answer parsed and schema-valid, judges loaded once after the candidates, agreement
with a human-score file, resume from the store; and each overflow policy on a statute too long to fit."""

from __future__ import annotations

import csv
import json
import random
import shutil
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import yaml
from conftest import ROOT, TINY, run_cli, statute, typed
from scipy import stats

from offline_eval.tasks.legalrikai import rubric

DATA = ROOT / "data" / "legalrikai"
GGUF_JUDGE = "judge-gguf.llamacpp.default.ctx8192"
HF_JUDGE = "judge-hf.transformers.default.ctx8192"


def _human_scores(path: Path) -> None:
    rng = random.Random(3)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["task", "item_id", "model", "criterion", "score", "annotator"])
        for sub in rubric.SUBTASKS:
            for line in (DATA / f"{sub}.jsonl").read_text(encoding="utf-8").splitlines():
                item = json.loads(line)["id"]
                for model in ("cand-gguf", "cand-hf"):
                    for c in rubric.criteria(sub):
                        a = rng.randint(c.lo, c.hi)
                        w.writerow([sub, item, model, c.code, a, "A"])
                        w.writerow(
                            [sub, item, model, c.code, a if rng.random() < 0.7 else rng.randint(c.lo, c.hi), "B"]
                        )


def _config(tmp: Path) -> Path:
    _human_scores(tmp / "human.csv")
    cfg = {
        "output_dir": str(tmp / "out"),
        "models": [
            {
                "name": "cand-gguf",
                "backend": "llamacpp",
                "path": str(TINY / "gguf" / "tiny-q8_0.gguf"),
                "max_model_len": 4096,
            },
            {"name": "cand-hf", "backend": "transformers", "path": str(TINY / "hf"), "max_model_len": 4096},
        ],
        "tasks": {
            "legalrikai": {
                "data": str(DATA),
                # ours: a 48-token cap on every sub-task, and the cut answers judged (paper's: test_legalrikai_protocol)
                "protocol": "offline-eval",
                "max_tokens": 48,
                "judge_max_tokens": 400,
                "rationale_max_chars": 10,
                "human_scores": str(tmp / "human.csv"),
                "judges": [
                    {
                        "name": "judge-gguf",
                        "backend": "llamacpp",
                        "path": str(TINY / "gguf" / "tiny-f16.gguf"),
                        "max_model_len": 8192,
                    },
                    {"name": "judge-hf", "backend": "transformers", "path": str(TINY / "hf"), "max_model_len": 8192},
                ],
            }
        },
    }
    p = tmp / "m.yaml"
    p.write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return p


def _records(out: Path, run: str, setting: str) -> list[dict]:
    return [
        json.loads(x) for x in (out / "results" / run / f"{setting}.jsonl").read_text(encoding="utf-8").splitlines()
    ]


def test_all_four_tasks_with_tiny_candidates_and_judges_on_two_backends(tmp_path, tiny):
    cfg = _config(tmp_path)
    proc = run_cli("sweep", str(cfg))
    assert proc.returncode == 0, proc.stderr[-3000:]
    err = proc.stderr
    # Each judge is loaded once, after both candidates.
    assert err.count("loading llamacpp model from " + str(TINY / "gguf" / "tiny-f16.gguf")) == 1
    assert err.count("loading transformers model") == 2  # the HF candidate, then the HF judge
    assert err.index(f"[evaluator] {GGUF_JUDGE}") > err.index("[2/2]")
    out = tmp_path / "out"
    s = json.loads((out / "summary.json").read_text())
    runs = {(r["run"], r["setting"]): r for r in s["runs"]}
    assert len(runs) == 8 and not s["failures"]
    n_judged = 0
    for (run, setting), entry in runs.items():
        sub = setting.split(".")[1]
        crits = rubric.criteria(sub)
        schema = rubric.judge_schema(sub, 30)
        recs = _records(out, run, setting)
        assert len(recs) == 3 and all(r["input"] == "full" for r in recs)
        for r in recs:
            assert set(r["judges"]) == {GGUF_JUDGE, HF_JUDGE}
            for j in r["judges"].values():
                # Every judge answer parses and validates against the rubric's schema.
                assert j["scores"] is not None, j
                jsonschema.validate(json.loads(j["raw"]), schema)
                assert all(len(x) <= 10 for x in j["rationales"].values())
                n_judged += 1
            for c in crits:  # Avg = mean over judges of (s - min)/(max - min)
                want = np.mean([(j["scores"][c.code] - c.lo) / (c.hi - c.lo) for j in r["judges"].values()])
                assert r["scores"][c.code] == pytest.approx(want)
            if sub == "statrev":
                assert r["revised"].startswith(r["gold"][:20]) and "checks" in r
            if sub != "amendexp":
                assert r["checks"]["diff_chars"] >= 0 and 0 <= r["checks"]["changed_precision"] <= 1
        m = typed(entry)
        for c in crits:
            assert m[c.code] == pytest.approx(np.mean([r["scores"][c.code] for r in recs]), abs=1e-4)
            for j in (GGUF_JUDGE, HF_JUDGE):
                assert m.judges[j].criteria[c.code] == pytest.approx(
                    np.mean([(r["judges"][j]["scores"][c.code] - c.lo) / (c.hi - c.lo) for r in recs]), abs=1e-4
                )
        assert m.judges[GGUF_JUDGE].failures == 0 and m["n_judged"] == 3
        assert entry["evaluator"]["runs"] == [GGUF_JUDGE, HF_JUDGE]
    assert n_judged == 2 * 12 * 2
    # Agreement with the human file: Spearman and MAE of Avg on StatRev's IF, recomputed here with scipy.
    rep = s["task_reports"]["legalrikai"]
    h = rep["human"]
    assert h["matched_outputs"] == 24 and not h["unmatched"]
    human: dict[tuple[str, str], list[float]] = {}
    with (tmp_path / "human.csv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row["task"] == "statrev" and row["criterion"] == "IF":
                human.setdefault((row["model"], row["item_id"]), []).append((int(row["score"]) - 1) / 2)
    pairs = []
    for model, run in (
        ("cand-gguf", "cand-gguf.llamacpp.default.ctx4096"),
        ("cand-hf", "cand-hf.transformers.default.ctx4096"),
    ):
        for r in _records(out, run, "legalrikai.statrev"):
            pairs.append((r["scores"]["IF"], np.mean(human[(model, r["id"])])))
    a, b = zip(*pairs)
    got = h["spearman"]["statrev"]["Avg"]["IF"]
    ref = stats.spearmanr(a, b)
    if np.isnan(ref.statistic):
        assert got["rho"] is None
    else:
        assert got["rho"] == pytest.approx(ref.statistic, abs=1e-4) and got["p"] == pytest.approx(ref.pvalue, abs=1e-4)
    assert h["mae"]["statrev"]["Avg"]["IF"]["mae"] == pytest.approx(np.mean(np.abs(np.array(a) - b)), abs=1e-4)
    # IF has 3 points (1-3): on them, as the paper's Table 8, the MAE is twice that on [0, 1]
    assert h["mae"]["statrev"]["Avg"]["IF"]["mae_points"] == pytest.approx(
        np.mean(np.abs(2 * np.array(a) - 2 * np.array(b))), abs=1e-4
    )
    report = (out / "report.md").read_text(encoding="utf-8")
    for title in (
        "judge scores (Avg of 2 judge(s), Table 6 layout)",
        "human scores (Table 6)",
        "Cohen's kappa between annotators (Table 5)",
        "Spearman's rho, judges vs humans (Table 7)",
        "mean absolute error, judges vs humans, in rubric points (Table 8: the paper's scale)",
        "mean absolute error, judges vs humans, on [0, 1] (offline-eval's scale)",
        "inputs under the overflow policy, and answers cut off",
    ):
        assert title in report
    # Re-run: candidates and judges come from the store; no engine starts; the results are identical.
    before = {p: p.read_bytes() for p in (out / "results").rglob("*.jsonl")}
    again = run_cli("sweep", str(cfg))
    assert again.returncode == 0 and "loading" not in again.stderr, again.stderr[-2000:]
    assert {p: p.read_bytes() for p in before} == before


# ---- overflow: a 60-article statute with one amended article (~6.5k tokens in full, ~1.7k focused)
def _long_statute(n: int, changed: dict[int, str]) -> str:
    return statute(
        n, changed, "電子取引推進法（架空）", "事業者は、電子取引に関する第{i}号の事項を遵守しなければならない。"
    )


def _overflow_config(tmp: Path, policy: str) -> Path:
    data = tmp / "data"
    data.mkdir(exist_ok=True)
    src = json.loads((DATA / "statrev.jsonl").read_text(encoding="utf-8").splitlines()[0])
    item = {
        **src,
        "id": "long-1",
        "statute_pre": _long_statute(60, {}),
        "statute_post": _long_statute(60, {30: "事業者は、電子取引に関する記録を七年間保存しなければならない。"}),
    }
    (data / "statrev.jsonl").write_text(json.dumps(item, ensure_ascii=False) + "\n", encoding="utf-8")
    cfg = {
        "output_dir": str(tmp / f"out-{policy}"),
        "models": [
            {
                "name": "cand",
                "backend": "llamacpp",
                "path": str(TINY / "gguf" / "tiny-q8_0.gguf"),
                "max_model_len": [2048, 8192],
            }
        ],
        "tasks": {
            "legalrikai": {
                "data": str(data),
                "overflow": policy,
                "protocol": "offline-eval",  # a 48-token cap: the focused prompt fits 2k (paper's cap would not)
                "max_tokens": 48,
                "judge_max_tokens": 400,
                "rationale_max_chars": 10,
                "judges": [
                    {
                        "name": "judge",
                        "backend": "llamacpp",
                        "path": str(TINY / "gguf" / "tiny-f16.gguf"),
                        "max_model_len": 4096,
                    }
                ],
            }
        },
    }
    p = tmp / f"{policy}.yaml"
    p.write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return p


def test_overflow_focus_skip_and_fail(tmp_path, tiny):
    judge = "judge.llamacpp.default.ctx4096"
    small, big = "cand.llamacpp.default.ctx2048", "cand.llamacpp.default.ctx8192"
    # focus: the 2k-context candidate sees the changed article and its neighbours; the 8k one the whole statute.
    # The 4k judge cannot read the whole statute either, so it judges the 8k answer on the focused prompt.
    p = run_cli("sweep", str(_overflow_config(tmp_path, "focus")))
    assert p.returncode == 0, p.stderr[-2000:]
    out = tmp_path / "out-focus"
    rs, rb = _records(out, small, "legalrikai.statrev")[0], _records(out, big, "legalrikai.statrev")[0]
    assert (rs["input"], rb["input"]) == ("focused", "full")
    assert rs["prompt_tokens"] < 2048 < rb["prompt_tokens"]
    assert rs["judges"][judge]["scores"] and not rs["judges"][judge]["focused"]
    assert rb["judges"][judge]["scores"] and rb["judges"][judge]["focused"]
    s = json.loads((out / "summary.json").read_text())
    m = {r["run"]: typed(r) for r in s["runs"]}
    share = {k: v.groups("criterion", "focused_share")["IF"].value for k, v in m.items()}
    assert (m[small]["n_focused"], m[small]["n_full"], share[small]) == (1, 0, 1.0)
    assert (m[big]["n_focused"], m[big]["n_full"], share[big]) == (0, 1, 0.0)
    report = (out / "report.md").read_text(encoding="utf-8")
    assert f"| {small} | legalrikai.statrev | focus | 0 | 1 | 0 | 1.00 |" in report
    again = run_cli("sweep", str(_overflow_config(tmp_path, "focus")))
    assert again.returncode == 0 and "loading" not in again.stderr  # focused results come from the store too

    # skip: the 2k candidate's item is recorded and counted, not judged; the judge's own overflow is a failure.
    p = run_cli("sweep", str(_overflow_config(tmp_path, "skip")))
    assert p.returncode == 0, p.stderr[-2000:]
    out = tmp_path / "out-skip"
    rs, rb = _records(out, small, "legalrikai.statrev")[0], _records(out, big, "legalrikai.statrev")[0]
    assert rs["input"] == "skipped" and rs["judges"] == {} and rs["scores"] == {}
    assert rb["input"] == "full" and rb["judges"][judge]["finish_reason"] == "overflow"
    m = {r["run"]: typed(r) for r in json.loads((out / "summary.json").read_text())["runs"]}
    assert m[small]["n_skipped"] == 1 and "IF" not in m[small]
    assert m[big].judges[judge].failures == 1 and m[big].judges[judge].overflow == 1

    # fail: stops with the item named, before any judge, without a traceback.
    shutil.rmtree(tmp_path / "out-skip")
    p = run_cli("sweep", str(_overflow_config(tmp_path, "fail")))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "statrev/long-1" in p.stderr and "overflow policy 'fail'" in p.stderr and "[evaluator]" not in p.stderr


def test_bad_legalrikai_input_stops_before_any_engine(tmp_path, tiny):
    cfg = _config(tmp_path)
    raw = yaml.safe_load(cfg.read_text(encoding="utf-8"))
    bad = tmp_path / "bad"
    bad.mkdir()
    recs = [json.loads(x) for x in (DATA / "reqrev.jsonl").read_text(encoding="utf-8").splitlines()]
    recs[1]["instructions"] = []
    (bad / "reqrev.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), encoding="utf-8")
    raw["tasks"]["legalrikai"]["data"] = str(bad)
    cfg.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    p = run_cli("sweep", str(cfg))
    assert p.returncode == 2 and "Traceback" not in p.stderr and "loading" not in p.stderr
    assert f"{bad / 'reqrev.jsonl'}" in p.stderr and "line 2" in p.stderr and "'instructions'" in p.stderr
    raw["tasks"]["legalrikai"]["data"] = str(DATA)
    (tmp_path / "human.csv").write_text(
        "item_id,model,criterion,score,annotator\nreqrev-001,cand-hf,SC,3,A\n", encoding="utf-8"
    )
    cfg.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    p = run_cli("sweep", str(cfg))
    assert p.returncode == 2 and "Traceback" not in p.stderr and "loading" not in p.stderr
    assert "human.csv" in p.stderr and "row 2" in p.stderr and "'score'" in p.stderr
