"""Issue 49's findings on `offline-eval compare OLD NEW`, each through the CLI on real sweep folders (the fake
engine, as tests/test_compare.py builds them): --margin checked by models.yaml's own rule; both folders verified
before anything is paired (--no-verify says so everywhere); right->wrong counts only on right/wrong metrics;
--out refused in one line where it is a file or inside a compared folder, and named after the resolved folders;
compare.html isolating every string from the folders for bidirectional text."""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, run_cli
from test_compare import QUESTIONS, _data, _ids, _sweep

RUN = "m.fake.default.ctx4096"
RESULTS = Path("results") / RUN / "jbeqa.0shot.constrained.jsonl"
RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE
BIDI_CONTROLS = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("round4")
    items = _data(tmp / "data")
    half = set().union(*(_ids(q) for q in range(0, QUESTIONS, 2)))  # 45 of 90 wrong: a 50-point drop
    return {
        "tmp": tmp,
        "items": items,
        "base": _sweep(tmp, "base", items, set()),
        "worse": _sweep(tmp, "worse", items, half),
    }


def _one_line(got) -> str:  # type: ignore[no-untyped-def]
    assert got.returncode == 2, (got.returncode, got.stdout, got.stderr)
    # the error's one line (a migrated folder's reader notes "read forward" beside it)
    lines = [x for x in got.stderr.strip().splitlines() if "read forward" not in x and "rendered by an older" not in x]
    assert len(lines) == 1 and lines[0].startswith("offline-eval: error: ") and "Traceback" not in got.stderr, (
        got.stderr
    )
    return lines[0]


# ---- 1. --margin: the config's own rule (config.margin_problem), one line naming the flag and the value


@pytest.mark.parametrize(
    ("flag", "named"),
    [
        ("accuracy=2", "accuracy=2"),
        ("accuracy=1", "accuracy=1"),  # the whole range of a share: any drop would be non-inferior
        ("accuracy=inf", "accuracy=inf"),
        ("accuracy=1e999", "accuracy=inf"),
        ("accuracy=nan", "accuracy=nan"),
        ("accuracy=0", "accuracy=0"),
        ("accuracy=-1", "accuracy=-1"),
        ("nosuch=0.1", "nosuch=0.1"),
        ("f1=0.1", "f1=0.1"),  # JBE-QA tests accuracy for non-inferiority, not F1
    ],
)
def test_a_bad_margin_flag_is_refused_by_the_configs_rule(sweeps, flag, named) -> None:  # type: ignore[no-untyped-def]
    base, worse = str(sweeps["base"]), str(sweeps["worse"])
    out = str(sweeps["tmp"] / "cmp-margin")
    line = _one_line(run_cli("compare", base, worse, "--margin", flag, "--fail-on", "inferior", "--out", out))
    assert "--margin" in line and named in line, line
    assert "ValueError" not in line


def test_a_good_margin_flag_still_fails_a_fifty_point_drop(sweeps) -> None:  # type: ignore[no-untyped-def]
    base, worse = str(sweeps["base"]), str(sweeps["worse"])
    out = str(sweeps["tmp"] / "cmp-good-margin")
    got = run_cli("compare", base, worse, "--margin", "accuracy=0.1", "--fail-on", "inferior", "--out", out)
    assert got.returncode == 1 and ": regressed" in got.stdout and "margin 0.1" in got.stdout, got.stdout + got.stderr


def test_the_configs_margin_must_be_finite_on_a_metric_with_no_range(tmp_path: Path) -> None:
    """LegalEval-Q's AdjScore declares no range: an infinite margin passed models.yaml before the shared rule."""
    (tmp_path / "w.bin").write_text("w")
    cfg = tmp_path / "m.yaml"
    cfg.write_text(
        "models: [{name: m, backend: fake, path: " + str(tmp_path / "w.bin") + "}]\n"
        "tasks: {legalevalq: {protocol: offline-eval, data: " + str(tmp_path) + "}}\nmargin: {adj_score: .inf}\n",
        encoding="utf-8",
    )
    line = _one_line(run_cli("models", "check", str(cfg)))
    assert "margin.adj_score" in line and "finite" in line, line


# ---- 2. compare verifies both folders first; --no-verify skips it, and every output says so


def _edited(src: Path, dst: Path) -> Path:
    """A copy of a sweep whose results file was edited after the sweep: every wrong answer scored right."""
    shutil.copytree(src, dst)
    f = dst / RESULTS
    recs = [json.loads(x) for x in f.read_text("utf-8").splitlines()]
    for r in recs:
        r["scores"]["correct"] = 1
    f.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), "utf-8")
    return dst


def test_compare_refuses_a_folder_whose_scores_were_edited(sweeps) -> None:  # type: ignore[no-untyped-def]
    tmp = sweeps["tmp"]
    base = str(sweeps["base"])
    # a verified pair says so on the terminal, in comparison.json and on the page
    good = run_cli("compare", base, str(sweeps["worse"]), "--out", str(tmp / "cmp-verified"))
    assert good.returncode == 0 and good.stdout.startswith("verified: "), good.stdout + good.stderr
    assert json.loads((tmp / "cmp-verified" / "comparison.json").read_text("utf-8"))["verified"] is True
    # an untouched copy of a folder verifies (the check is of the folder, not of where it lies) ...
    copy = tmp / "copy-of-worse"
    shutil.copytree(sweeps["worse"], copy)
    assert run_cli("compare", base, str(copy), "--out", str(tmp / "cmp-copy")).returncode == 0
    # ... and one whose scores were edited is refused, in one line naming it and its first mismatch
    edited = _edited(sweeps["worse"], tmp / "edited")
    out = tmp / "cmp-edited"
    line = _one_line(run_cli("compare", base, str(edited), "--out", str(out), "--fail-on", "inferior"))
    assert str(edited) in line and "does not verify" in line and "jbeqa.0shot.constrained.jsonl" in line, line
    assert "--no-verify" in line and not out.exists()
    # --no-verify compares it as it is (the edit hides the 50-point drop), and every output says so
    got = run_cli("compare", base, str(edited), "--out", str(out), "--no-verify", "--fail-on", "inferior")
    assert got.returncode == 0, got.stdout + got.stderr
    assert got.stdout.startswith("NOT VERIFIED (--no-verify)") and ": regressed" not in got.stdout, got.stdout
    assert json.loads((out / "comparison.json").read_text("utf-8"))["verified"] is False
    assert "NOT VERIFIED (--no-verify)" in (out / "compare.html").read_text("utf-8")
    as_json = run_cli("compare", base, str(edited), "--out", str(out), "--no-verify", "--json")
    assert json.loads(as_json.stdout)["verified"] is False


def test_a_migrated_folder_that_cannot_verify_is_refused_unless_no_verify(tmp_path: Path) -> None:
    """tests/fixtures/v3-demo does not verify in this checkout (another setup trained its LegalEval-Q scorer):
    refused by default in one line, compared with --no-verify (tests/test_migrate.py compares v2 folders so)."""
    v3 = tmp_path / "v3"
    shutil.copytree(ROOT / "tests" / "fixtures" / "v3-demo", v3)
    line = _one_line(run_cli("compare", str(v3), str(v3), "--out", str(tmp_path / "c")))
    assert str(v3) in line and "OLD does not verify" in line, line
    got = run_cli("compare", str(v3), str(v3), "--out", str(tmp_path / "c"), "--no-verify")
    assert got.returncode == 0 and "NOT VERIFIED" in got.stdout, got.stderr


# ---- 3. right->wrong only where the paired metric is right or wrong; --out; bidirectional text


def test_right_to_wrong_counts_only_where_the_paired_metric_is_binary(sweeps) -> None:  # type: ignore[no-untyped-def]
    """JBE-QA (accuracy: right or wrong) and LegalRikai (the judges' graded scores) in one pair of sweeps."""
    tmp = sweeps["tmp"]
    folders = []
    for name in ("graded-a", "graded-b"):
        cfg = yaml.safe_load((tmp / "base.yaml").read_text("utf-8"))
        cfg["output_dir"] = str(tmp / name)
        model = cfg["models"][0]
        model["max_model_len"] = 65536  # a contract and its statutes
        model["engine_args"]["default"] = "## 第1条（目的）\n本契約は、甲乙間の取引について定める。\n"
        judge = {"name": "j", "backend": "fake", "path": model["path"], "max_model_len": 65536}
        cfg["tasks"]["legalrikai"] = {
            "protocol": "offline-eval", "data": str(ROOT / "data" / "legalrikai"), "limit": 2, "judges": [judge],
            "subtasks": ["statrev"],
        }  # fmt: skip
        (tmp / f"{name}.yaml").write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
        got = run_cli("sweep", str(tmp / f"{name}.yaml"))
        assert got.returncode == 0, got.stderr
        folders.append(str(tmp / name))
    out = tmp / "cmp-graded"
    got = run_cli("compare", *folders, "--out", str(out))
    assert got.returncode == 0, got.stderr
    lines = {x.split(" ", 1)[0]: x for x in got.stdout.splitlines() if x.startswith(("jbeqa", "legalrikai"))}
    binary, graded = lines["jbeqa.0shot.constrained"], lines["legalrikai.statrev"]
    assert "0 right->wrong, 0 wrong->right" in binary, binary
    assert "score 0.000 -> 0.000" in graded and "right->wrong" not in graded, graded  # compared, nothing counted
    c = {s["setting"]: s for s in json.loads((out / "comparison.json").read_text("utf-8"))["settings"]}
    assert c["legalrikai.statrev"]["n_items"] == 2 and c["jbeqa.0shot.constrained"]["n_items"] == 90
    assert c["legalrikai.statrev"]["right_to_wrong"] is None and c["legalrikai.statrev"]["wrong_to_right"] is None
    assert (c["jbeqa.0shot.constrained"]["right_to_wrong"], c["jbeqa.0shot.constrained"]["wrong_to_right"]) == (0, 0)


def test_out_on_an_existing_file_is_one_line(sweeps) -> None:  # type: ignore[no-untyped-def]
    f = sweeps["tmp"] / "a-file"
    f.write_text("x")
    line = _one_line(run_cli("compare", str(sweeps["base"]), str(sweeps["worse"]), "--out", str(f)))
    assert "--out" in line and str(f) in line and "FileExistsError" not in line, line
    under = _one_line(run_cli("compare", str(sweeps["base"]), str(sweeps["worse"]), "--out", str(f / "sub")))
    assert "--out" in under and "NotADirectoryError" not in under, under


def test_the_default_out_is_named_after_the_resolved_folders(sweeps) -> None:  # type: ignore[no-untyped-def]
    tmp, worse = sweeps["tmp"], sweeps["worse"]
    got = run_cli("compare", "../base", ".", cwd=worse)
    assert got.returncode == 0, got.stderr
    assert (tmp / "compare-base-worse" / "compare.html").is_file()
    assert not (tmp / "compare-base-").exists() and not (tmp / "compare-..-").exists()
    got = run_cli("compare", "../base/", "../worse/", cwd=worse)
    assert got.returncode == 0 and f"wrote {tmp / 'compare-base-worse' / 'compare.html'}" in got.stdout, got.stdout


@pytest.mark.parametrize("where", ["base/results", "base", "worse/cmp", "worse/results/deeper"])
def test_out_inside_either_compared_folder_is_refused(sweeps, where) -> None:  # type: ignore[no-untyped-def]
    tmp = sweeps["tmp"]
    out = tmp / where
    line = _one_line(run_cli("compare", str(sweeps["base"]), str(sweeps["worse"]), "--out", str(out)))
    assert "--out" in line and "inside" in line, line
    assert not (out / "comparison.json").exists() and not (tmp / "worse" / "cmp").exists()
    # the folders are as their sweeps left them: both still verify
    assert run_cli("compare", str(sweeps["base"]), str(sweeps["worse"]), "--out", str(tmp / "cmp-x")).returncode == 0


class _Bidi(HTMLParser):
    """Every text node holding a bidirectional control outside a <bdi> (scripts' JSON aside)."""

    VOID = {"br", "meta", "img", "input", "hr", "link", "col", "wbr"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.bare: list[str] = []
        self.isolated = 0

    def handle_starttag(self, tag, attrs):  # type: ignore[no-untyped-def]
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):  # type: ignore[no-untyped-def]
        if tag in self.stack:
            while self.stack.pop() != tag:
                pass

    def handle_data(self, data):  # type: ignore[no-untyped-def]
        if not BIDI_CONTROLS & set(data) or "script" in self.stack:
            return
        if "bdi" in self.stack:
            self.isolated += 1
        else:
            self.bare.append(f"{'/'.join(self.stack)}: {data!r}")


def test_compare_html_isolates_bidirectional_text(sweeps) -> None:  # type: ignore[no-untyped-def]
    """A right-to-left override in the folders' paths, in a refused setting's reason (it names the changed data
    file) and in what changed: every such string in a <bdi>; the item browser's strings in FSI ... PDI."""
    tmp, items = sweeps["tmp"], sweeps["items"]
    old = _sweep(tmp, f"old{RLO}dlo", items, set())
    data = f"data{RLO}atad"
    edited = _data(tmp / data)
    edited[0]["question"] += f"（改{RLO}）"
    (tmp / data / "test.jsonl").write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in edited), "utf-8")
    new = _sweep(tmp, f"new{RLO}wen", edited, _ids(3), data=data)
    for extra, name in (([], "refused"), (["--allow-changed-data"], "compared")):
        out = tmp / f"cmp-bidi-{name}"
        got = run_cli("compare", str(old), str(new), "--out", str(out), *extra)
        assert got.returncode == 0, got.stderr
        page = (out / "compare.html").read_text("utf-8")
        check = _Bidi()
        check.feed(page)
        assert check.bare == [] and check.isolated >= 2, check.bare  # the two folders, at least
        c = json.loads((out / "comparison.json").read_text("utf-8"))
        if name == "refused":
            [s] = c["settings"]
            assert s["verdict"] == "refused" and RLO in s["reason"] and check.isolated >= 3
        else:
            assert c["flips"], c
            raw = page.split('<script id="items-data" type="application/json">', 1)[1].split("</script>", 1)[0]
            d = json.loads(raw)
            strings = [*d["settings"], *(r[0] for r in d["rows"]), *(r[3] for r in d["rows"])]
            strings += [a[3]["run"] for r in d["rows"] for a in r[4].values()]
            assert strings and all(x.startswith("\u2068") and x.endswith("\u2069") for x in strings), strings
