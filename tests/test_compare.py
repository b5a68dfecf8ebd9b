"""`offline-eval compare OLD NEW` on the fake engine: two sweeps of a JBE-QA set in the release's form (era-year
ids, 3 statements per question), with known flips. The verdicts are the verdicts' own statistics, computed here
independently from the two results files: Tango's interval with the design effect (metrics.paired) against a
margin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import DATA, run_cli

QUESTIONS = 30
ERAS = ["平成２７年", "平成２８年", "令和元年", "令和２年", "令和６年"]
SUBJECTS = [("Civil Law", "民法"), ("Criminal Law", "刑法"), ("Constitution", "憲法")]


def _data(folder: Path) -> list[dict[str, Any]]:
    """90 statements: question q's statements k = 1..3 ("令和２年-民法-7-2"), labels alternating."""
    folder.mkdir(parents=True, exist_ok=True)
    items = []
    for q in range(QUESTIONS):
        en, jp = SUBJECTS[q % 3]
        for k in range(1, 4):
            items.append(
                {
                    "id": f"{ERAS[q % 5]}-{jp}-{q + 1}-{k}",
                    "year": ERAS[q % 5].replace("２７", "27").replace("２８", "28"),
                    "subject": en,
                    "subject_jp": jp,
                    "theme": "None",
                    "question_type": "MRQ",
                    "instruction": "次の記述の正誤を判断しなさい。",
                    "remark": "",
                    "label": "Y" if (q + k) % 2 else "N",
                    "lead_in": "",
                    "question": f"設問{q + 1}の記述{k}について、法の定めるところによる。",
                    "answer": bool((q + k) % 2),
                }  # fmt: skip
            )
    (folder / "test.jsonl").write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items), "utf-8")
    (folder / "train.jsonl").write_text((DATA / "train.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    return items


def _sweep(tmp: Path, name: str, items: list[dict[str, Any]], wrong: set[str], data: str = "data") -> Path:
    """A sweep of the data in tmp/`data` that answers every statement right but those in `wrong`."""
    answers = {i["question"]: str(int(i["answer"]) ^ (i["id"] in wrong)) for i in items}
    weights = tmp / "w.bin"
    weights.write_text("fake weights")
    cfg = {
        "output_dir": str(tmp / name),
        "models": [
            {
                "name": "m",
                "backend": "fake",
                "path": str(weights),
                "max_model_len": 4096,
                "engine_args": {"answers": answers},
            }
        ],  # fmt: skip
        "tasks": {
            "jbeqa": {"protocol": "offline-eval", "data": str(tmp / data), "shots": [0], "mode": ["constrained"]}
        },
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    got = run_cli("sweep", str(path))
    assert got.returncode == 0, got.stderr
    return tmp / name


def _ids(q: int) -> set[str]:
    return {f"{ERAS[q % 5]}-{SUBJECTS[q % 3][1]}-{q + 1}-{k}" for k in range(1, 4)}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("compare")
    items = _data(tmp / "data")
    one = sorted(_ids(9))[0]
    return {
        "base": _sweep(tmp, "base", items, set()),
        "same": _sweep(tmp, "same", items, set()),
        # 3 whole questions right -> wrong, and 1 statement wrong -> right
        "flipped": _sweep(tmp, "flipped", items, _ids(0) | _ids(1) | _ids(2)),
        "fixed_one": _sweep(tmp, "fixed_one", items, {one}),
        "worse": _sweep(tmp, "worse", items, set().union(*(_ids(q) for q in range(0, QUESTIONS, 2)))),
        "one": one,
        "tmp": tmp,
    }


def _reference(old: Path, new: Path, margin: float) -> tuple[float, float, float]:
    """Tango's interval, widened by the clustered design effect, from the results files alone."""
    import numpy as np

    from offline_eval.metrics.paired import clustered_interval

    def scores(folder: Path) -> dict[str, float]:
        f = folder / "results" / "m.fake.default.ctx4096" / "jbeqa.0shot.constrained.jsonl"
        return {r["id"]: float(r["scores"]["correct"]) for r in map(json.loads, f.read_text("utf-8").splitlines())}

    a, b = scores(old), scores(new)
    ids = sorted(a)
    x, y = np.array([b[i] for i in ids]), np.array([a[i] for i in ids])
    from offline_eval.metrics.bootstrap import Clusters

    clusters = Clusters.of([i.rsplit("-", 1)[0] for i in ids])
    estimate, low, high, _ = clustered_interval(x, y, clusters)
    return float(estimate), float(low), float(high)


def test_the_verdicts_flips_and_what_changed(folders) -> None:  # type: ignore[no-untyped-def]
    import offline_eval

    base = folders["base"]
    same = offline_eval.compare(base, folders["same"], margins={"accuracy": 0.15})
    [s] = same.settings  # no discordant pair, 30 questions of 3: the guarded design effect (3.06) widens it to +-0.116
    assert (s.verdict, s.n_items, s.right_to_wrong, s.wrong_to_right, s.answers_differ) == ("non-inferior", 90, 0, 0, 0)
    assert s.same_inputs and not s.engine_or_tool_change and not same.flips

    flipped = offline_eval.compare(folders["fixed_one"], folders["flipped"])
    [s] = flipped.settings
    assert (s.right_to_wrong, s.wrong_to_right) == (9, 1)
    assert {f.id for f in flipped.flips if f.direction == "right->wrong"} == _ids(0) | _ids(1) | _ids(2)
    assert [f.id for f in flipped.flips if f.direction == "wrong->right"] == [folders["one"]]
    estimate, low, high = _reference(folders["fixed_one"], folders["flipped"], 0.02)
    assert s.statistics is not None and s.statistics.estimate == pytest.approx(estimate) == pytest.approx(-8 / 90)
    assert (s.statistics.ci_low, s.statistics.ci_high) == (pytest.approx(low), pytest.approx(high))
    expected = "regressed" if high < -0.02 else "inconclusive" if low <= -0.02 else "non-inferior"
    assert s.verdict == expected, (low, high)
    # The fake's script is an engine argument: the load options differ, so these are not the same inputs.
    assert any(c.what == "load options" for c in flipped.changes)
    assert not s.same_inputs and not s.engine_or_tool_change

    worse = offline_eval.compare(base, folders["worse"]).settings[0]
    assert worse.verdict == "regressed" and worse.right_to_wrong == 45
    better = offline_eval.compare(folders["worse"], base).settings[0]
    assert better.verdict == "improved" and better.wrong_to_right == 45


def test_the_command_writes_flips_and_a_page_and_exits_for_ci(folders) -> None:  # type: ignore[no-untyped-def]
    out = folders["tmp"] / "cmp"
    got = run_cli("compare", str(folders["base"]), str(folders["worse"]), "--out", str(out))
    assert got.returncode == 0, got.stderr
    assert (
        "jbeqa.0shot.constrained (offline-eval protocol)  m.fake.default.ctx4096 -> m.fake.default.ctx4096: regressed"
        in got.stdout
    )
    assert "mcnemar p " in got.stdout and "cluster bootstrap p " in got.stdout
    flips = [json.loads(x) for x in (out / "flips.jsonl").read_text("utf-8").splitlines()]
    assert len(flips) == 45 and {f["direction"] for f in flips} == {"right->wrong"}
    assert json.loads((out / "comparison.json").read_text("utf-8"))["settings"][0]["verdict"] == "regressed"
    page = (out / "compare.html").read_text("utf-8")
    assert "Item browser" in page and "regressed" in page
    assert run_cli("compare", str(folders["base"]), str(folders["worse"]), "--out", str(out),
                   "--fail-on", "inferior").returncode == 1  # fmt: skip
    assert run_cli("compare", str(folders["base"]), str(folders["same"]), "--out", str(out),
                   "--fail-on", "inconclusive", "--margin", "accuracy=0.15").returncode == 0  # fmt: skip
    assert run_cli("compare", str(folders["base"]), str(folders["same"]), "--out", str(out),
                   "--fail-on", "inconclusive").returncode == 1  # margin 0.02: 90 items cannot show it  # fmt: skip
    as_json = run_cli("compare", str(folders["base"]), str(folders["same"]), "--out", str(out), "--json",
                      "--margin", "accuracy=0.15")  # fmt: skip
    assert json.loads(as_json.stdout)["settings"][0]["verdict"] == "non-inferior"
    # A margin that is not a number, and a run --map does not know, are refused naming the flag.
    bad = run_cli("compare", str(folders["base"]), str(folders["same"]), "--margin", "accuracy=x")
    assert bad.returncode == 2 and "--margin" in bad.stderr
    bad = run_cli("compare", str(folders["base"]), str(folders["same"]), "--map", "nope=m.fake.default.ctx4096")
    assert bad.returncode == 2 and "--map" in bad.stderr and "nope" in bad.stderr


def test_changed_data_is_refused_naming_the_file(folders) -> None:  # type: ignore[no-untyped-def]
    import offline_eval

    tmp = folders["tmp"]
    items = _data(tmp / "changed-data")  # its own copy: both sweeps' data files stay as they were (both verify)
    items[0]["question"] += "（改）"
    (tmp / "changed-data" / "test.jsonl").write_text(
        "".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items), "utf-8"
    )
    changed = _sweep(tmp, "changed", items, set(), data="changed-data")
    [s] = offline_eval.compare(folders["base"], changed).settings
    assert s.verdict == "refused" and s.reason is not None and "data/test.jsonl" in s.reason
    assert any(c.what == "data files (name: sha256)" for c in offline_eval.compare(folders["base"], changed).changes)
    # the items that did not change, by their digests in both provenances: exactly the edited one is left out
    [s] = offline_eval.compare(folders["base"], changed, allow_changed_data=True).settings
    assert (s.n_items, s.n_left_out, s.verdict) == (89, 1, "inconclusive"), s
    got = run_cli("compare", str(folders["base"]), str(changed), "--allow-changed-data", "--out", str(tmp / "c2"))
    assert got.returncode == 0 and "1 changed items left out" in got.stdout, got.stdout + got.stderr


HOSTILE = [
    "</script><script>window.PWNED = 1</script>",
    '<img src=x onerror="window.PWNED = 2">',
    '"><svg onload="window.PWNED = 3">',
    "</textarea><iframe srcdoc='<script>parent.PWNED = 4</script>'>",
    "<!--<script>window.PWNED = 5</script>-->",
]


def test_the_page_renders_every_flip_as_text_in_chromium(folders, offline_browser) -> None:  # type: ignore[no-untyped-def]
    tmp = folders["tmp"]
    items = _data(tmp / "data")
    # on statements that are true: a parse failure is scored "false", so these are right -> wrong
    bad = {i["id"]: h for i, h in zip([i for i in items if i["answer"]], HOSTILE)}
    answers = {i["question"]: bad.get(i["id"], str(int(i["answer"]))) for i in items}
    for name, script in (("free", {i["question"]: str(int(i["answer"])) for i in items}), ("hostile", answers)):
        cfg = yaml.safe_load((tmp / "base.yaml").read_text("utf-8"))
        cfg["output_dir"] = str(tmp / name)
        cfg["models"][0]["engine_args"] = {"answers": script}
        cfg["tasks"]["jbeqa"]["mode"] = ["free"]  # the answers as written: a hostile one is a parse failure
        cfg["tasks"]["jbeqa"]["max_tokens"] = 128
        (tmp / f"{name}.yaml").write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
        assert run_cli("sweep", str(tmp / f"{name}.yaml")).returncode == 0
    out = tmp / "cmp-hostile"
    got = run_cli("compare", str(tmp / "free"), str(tmp / "hostile"), "--out", str(out))
    assert got.returncode == 0, got.stderr
    errors: list[str] = []
    page = offline_browser.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((out / "compare.html").as_uri())
    page.wait_for_load_state("load")
    assert "right→wrong" in page.locator("table").first.inner_text()
    page.locator("#browser summary").click()
    rows = page.locator("#items tbody tr")
    assert rows.count() == len(HOSTILE)
    shown = []
    for k in range(rows.count()):
        rows.nth(k).click()
        shown.append(page.locator("#item-detail").inner_text())
    assert all(any(h in s for s in shown) for h in HOSTILE), shown
    assert page.evaluate("typeof window.PWNED") == "undefined" and errors == []


def test_a_run_that_failed_in_new_is_missing_and_fails_the_check(folders) -> None:  # type: ignore[no-untyped-def]
    import offline_eval

    tmp = folders["tmp"]
    cfg = yaml.safe_load((tmp / "base.yaml").read_text("utf-8"))
    cfg["output_dir"] = str(tmp / "broken")
    cfg["models"][0]["path"] = str(tmp / "gone.bin")  # the load fails: no results, one failure
    (tmp / "gone.bin").write_text("x")
    (tmp / "broken.yaml").write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    (tmp / "gone.bin").unlink()
    run_cli("sweep", str(tmp / "broken.yaml"))
    c = offline_eval.compare(folders["base"], tmp / "broken")
    [s] = c.settings
    assert s.verdict == "missing" and "NEW has no results" in (s.reason or "") and not c.unmatched_old
    assert c.fails("inferior") and c.fails("inconclusive") and not c.fails(None)


def test_a_folder_against_itself_and_a_graded_task_has_no_flips(tmp_path: Path) -> None:
    import shutil

    from conftest import ROOT

    import offline_eval

    v3 = tmp_path / "v3"
    shutil.copytree(ROOT / "tests" / "fixtures" / "v3-demo", v3)
    # a migrated folder does not verify in this checkout (its LegalEval-Q scorer was trained by another setup)
    c = offline_eval.compare(v3, v3, verify=False)
    assert not c.verified
    assert c.settings and not c.flips and not c.changes
    by = {s.setting: s for s in c.settings if s.old_run.startswith("gemma")}
    assert {s.verdict for s in c.settings} <= {"non-inferior", "inconclusive"}
    assert all(s.answers_differ == 0 and s.engine_or_tool_change is False for s in c.settings)
    # LegalEval-Q's AdjScore (mu^2 / (mu + sigma) of the quality scores), as the summary gives it
    q = by["legalevalq"]
    run = offline_eval.load(v3)
    entry = next(r for r in run.runs if r.run == q.old_run and r.setting == "legalevalq")
    assert q.metric == "adj_score" and q.old_mean == pytest.approx(entry.metrics["adj_score"])


def test_the_same_inputs_with_other_answers_are_an_engine_or_tool_change(folders, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A copy of a folder whose one answer another engine build wrote differently (edited in its results file,
    so the copy no longer verifies: compared with verify=False, as `--no-verify` would)."""
    import shutil

    import offline_eval

    other = tmp_path / "upgraded"
    shutil.copytree(folders["same"], other)
    f = other / "results" / "m.fake.default.ctx4096" / "jbeqa.0shot.constrained.jsonl"
    recs = [json.loads(x) for x in f.read_text("utf-8").splitlines()]
    recs[0]["output"] = recs[0]["output"] + " "
    f.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), "utf-8")
    [s] = offline_eval.compare(folders["same"], other, verify=False).settings
    assert s.same_inputs and s.answers_differ == 1 and s.engine_or_tool_change
