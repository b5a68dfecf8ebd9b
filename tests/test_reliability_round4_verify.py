"""Issue 49's findings on `offline-eval verify`, each through the CLI on a real sweep folder (the in-process fake
engine): a configured run removed from every part of the summary is named, whatever the sweep's own --only,
--tasks and --limit left out legitimately; a results file with extra, missing or unreadable lines is a mismatch
line naming the file and the line, never a traceback; a null where schema 4 promises a value (the item digests)
is a mismatch outside a migrated folder; and an undefined value renders one way in the sweep's report, in
`offline-eval report`'s and in verify's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import DATA, run_cli

pytestmark = pytest.mark.slow  # sweeps and a CLI per case, as tests/test_verify.py

SETTING = "jbeqa.0shot.constrained"
M, TWIN = "m.fake.default.ctx4096", "twin.fake.default.ctx4096"


def _config(tmp: Path) -> Path:
    """Two models of the same weights (so the consistency table compares them: both answer "1" to every item, so
    Cohen's kappa is undefined, NaN), everything named relative to the config so the tree can be copied."""
    if not (tmp / "data").exists():
        shutil.copytree(DATA, tmp / "data")
        (tmp / "w.bin").write_text("fake weights")
    model = {"backend": "fake", "path": "w.bin", "max_model_len": 4096}
    cfg = {
        "output_dir": "out",
        "models": [{"name": "m", **model}, {"name": "twin", "same_weights_as": "m", **model}],
        "tasks": {
            "jbeqa": {"protocol": "offline-eval", "data": "data", "shots": [0], "mode": ["constrained"], "limit": 4}
        },
    }
    (tmp / "m.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return tmp / "m.yaml"


def _sweep(tmp: Path, *args: str) -> Path:
    proc = run_cli("sweep", str(_config(tmp)), *args, cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    return tmp / "out"


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("swept")
    _sweep(tmp)
    return tmp


@pytest.fixture
def copy(swept: Path, tmp_path: Path) -> Path:
    """The whole tree copied, summary.json's and the report's absolute paths rewritten to the copy's."""
    dst = tmp_path / "c"
    shutil.copytree(swept, dst)
    for name in ("summary.json", "report.md", "report.html"):
        f = dst / "out" / name
        f.write_text(f.read_text(encoding="utf-8").replace(str(swept), str(dst)), encoding="utf-8")
    return dst


def _verify(folder: Path) -> tuple[int, list[str]]:
    proc = run_cli("verify", str(folder))
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return proc.returncode, [x for x in proc.stdout.split("\n") if x]


def _tampered(folder: Path, *needles: str) -> list[str]:
    code, lines = _verify(folder)
    assert code == 1, lines
    for needle in needles:
        assert any(needle in line for line in lines), (needle, lines)
    return lines


def _edit_summary(folder: Path, change: Any) -> None:
    f = folder / "summary.json"
    raw = json.loads(f.read_text(encoding="utf-8"))
    change(raw)
    f.write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")


def _without(x: Any, run: str) -> Any:
    """`x` with every mention of `run` taken out: list elements that are it or name it, keys that are it."""
    if isinstance(x, dict):
        return {k: _without(v, run) for k, v in x.items() if k != run}
    if isinstance(x, list):
        return [_without(e, run) for e in x if e != run and not (isinstance(e, dict) and run in e.values())]
    return x


# 1. A configured run removed from every part of the summary


def test_a_configured_run_removed_from_every_part_of_the_summary_is_named(copy):
    out = copy / "out"
    assert _verify(out)[0] == 0
    _edit_summary(out, lambda raw: raw.update(_without(raw, TWIN)))
    shutil.rmtree(out / "results" / TWIN)
    assert run_cli("report", str(out)).returncode == 0  # the report rendered again from the forged summary
    _tampered(
        out,
        f"{TWIN} / {SETTING}: planned by the config and the sweep (no --only or --tasks), but in neither the runs "
        "nor the failures of summary.json",
    )


def test_a_run_left_out_by_a_sweep_of_the_config_passed_off_as_the_whole_config_is_named(tmp_path):
    """The perfect forgery: a genuine `--only m` sweep whose command line is made to say it ran the whole config
    (every part of the summary then agrees that twin never ran)."""
    out = _sweep(tmp_path, "--only", "m")
    assert _verify(out)[0] == 0  # what --only left out is not missing
    _edit_summary(out, lambda raw: raw["provenance"]["sweep"].update(command=raw["provenance"]["sweep"]["command"][:3]))
    assert run_cli("report", str(out)).returncode == 0
    _tampered(out, f"{TWIN} / {SETTING}: planned by the config and the sweep (no --only or --tasks)")


def test_what_the_sweeps_own_only_tasks_and_limit_left_out_is_not_missing(tmp_path):
    out = _sweep(tmp_path, "--only", "twin", "--tasks", "jbeqa", "--limit", "3")
    code, lines = _verify(out)
    assert code == 0, lines
    _edit_summary(out, lambda raw: raw.update(runs=[]))
    _tampered(out, f"{TWIN} / {SETTING}: planned by the config and the sweep's --only twin --tasks jbeqa --limit 3")


def test_a_folder_two_sweeps_wrote_with_their_own_only_verifies(tmp_path):
    """The second sweep's --only names twin; m's runs, from the first, are carried over and rebuilt too."""
    _sweep(tmp_path, "--only", "m")
    out = _sweep(tmp_path, "--only", "twin")
    code, lines = _verify(out)
    assert code == 0, lines


def test_a_python_api_sweep_with_only_verifies_and_a_run_removed_from_it_is_named(tmp_path):
    import offline_eval

    offline_eval.sweep(str(_config(tmp_path)), only=["m"], out_dir=str(tmp_path / "out"), progress=False,
                       log=lambda _: None)  # fmt: skip
    out = tmp_path / "out"
    code, lines = _verify(out)
    assert code == 0, lines
    _edit_summary(out, lambda raw: raw.update(_without(raw, M)))
    _tampered(out, f"{M} / {SETTING}: planned by the config and the sweep's --only m")


# 2. A results file with extra, missing or unreadable lines


def _lines(copy: Path) -> tuple[Path, list[bytes]]:
    path = copy / "out" / "results" / M / f"{SETTING}.jsonl"
    return path, path.read_bytes().split(b"\n")[:-1]


def test_a_results_file_with_extra_missing_or_unreadable_lines_is_named_never_a_crash(copy):
    path, lines = _lines(copy)
    n = len(lines)
    path.write_bytes(b"".join(x + b"\n" for x in [*lines, lines[0]]))  # one record more than the rebuild makes
    _tampered(copy / "out", f"{path}: line {n + 1}: a line the rebuild does not make ({n + 1} lines in the file")
    path.write_bytes(b"".join(x + b"\n" for x in [*lines, lines[0], b"{not json"]))
    _tampered(copy / "out", f"{path}: line {n + 1}: 2 lines from here on the rebuild does not make")
    path.write_bytes(b"".join(x + b"\n" for x in lines[:-1]))  # the last record gone
    rid = json.loads(lines[-1])["id"]
    _tampered(copy / "out", f"{path}: line {n}: missing (the rebuild makes record {rid} there;")
    path.write_bytes(b"".join(x + b"\n" for x in [lines[0], b"\xff\xfe{}", *lines[2:]]))  # not UTF-8
    _tampered(copy / "out", f"{path}: line 2 (record {json.loads(lines[1])['id']}): not UTF-8 text")
    path.write_bytes(b"".join(x + b"\n" for x in [lines[0], b"", *lines[1:]]))  # a blank line in between
    _tampered(copy / "out", f"{path}: line 2 (record", "not a JSON record", f"{path}: line {n + 1}: a line")
    path.write_bytes(b"\n".join(lines))  # no line break after the last record
    _tampered(copy / "out", f"{path}: line {n}: written otherwise (no line break at its end)")


# 3. A null where schema 4 promises a value


def test_null_item_digests_in_a_schema_4_summary_are_named(copy):
    def strip(raw: dict[str, Any]) -> None:
        for s in raw["provenance"]["settings"]:
            s["item_digests"] = None

    _edit_summary(copy / "out", strip)
    _tampered(copy / "out", f"provenance.settings[{SETTING} / jbeqa].item_digests: the file says None")
    _edit_summary(copy / "out", lambda raw: [s.pop("item_digests") for s in raw["provenance"]["settings"]])
    _tampered(copy / "out", f"provenance.settings[{SETTING} / jbeqa].item_digests: the file says None")


# 4. An undefined value, rendered one way


def test_an_undefined_value_renders_alike_in_the_sweep_report_and_verify(copy):
    out = copy / "out"
    raw = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    (row,) = raw["consistency"]
    assert row["kappa"] is None and row["identical"] == 1.0  # NaN in memory: every answer the same
    before = (out / "report.md").read_bytes()
    (line,) = [x for x in before.decode("utf-8").split("\n") if x.startswith(f"| {SETTING} | {M} | {TWIN} |")]
    assert line.split(" | ")[5] == "–" and "nan" not in line, line
    code, lines = _verify(out)
    assert code == 0, lines
    assert run_cli("report", str(out)).returncode == 0
    assert (out / "report.md").read_bytes() == before
    code, lines = _verify(out)
    assert code == 0, lines
