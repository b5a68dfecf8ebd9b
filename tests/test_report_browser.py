"""report.html in headless Chromium, on a fake-engine sweep (our own report logic): the first screen holds the
verdict table, tables sort on a click, the item browser's filters change its rows, and nothing logs an error.
Screenshots go to the test's output folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_verdicts import _config

from offline_eval.tasks.jbeqa.task import SYSTEM_PROMPT

pytestmark = pytest.mark.slow  # headless Chromium: `make test` runs them, the fast tier does not


def _sweep(tmp: Path) -> Path:
    from offline_eval.pipeline.config import load_config
    from offline_eval.pipeline.options import SweepOptions
    from offline_eval.pipeline.orchestrate import run_sweep

    cfg = _config(tmp, max_model_len=[2048, 4096])
    raw = yaml.safe_load(cfg.read_text())
    raw["tasks"]["jbeqa"]["shots"] = [0, 4]
    cfg.write_text(yaml.safe_dump(raw, allow_unicode=True))
    run_sweep(load_config(cfg), SweepOptions(source=str(cfg), log=lambda _: None))
    return tmp / "out"


def test_first_screen_of_the_markdown_report(tmp_path):
    md = (_sweep(tmp_path) / "report.md").read_text(encoding="utf-8")
    first, details = md.split("\n## Details\n")
    assert first.index("## Verdicts: m (fake)") < first.index("## Leaderboard: jbeqa") < first.index("pareto.png")
    verdicts = first[first.index("## Verdicts") : first.index("## Leaderboard")]
    broken = next(line for line in verdicts.splitlines() if line.startswith("| broken ctx2048"))
    assert broken.count(" inferior") == 2 and "| reference: accuracy 1.000 |" in verdicts
    # Identical answers on 26 items are not evidence of non-inferiority at a 0.02 margin: Tango's interval is
    # +-0.13 there, so those 6 comparisons stay inconclusive, with the items they would need.
    assert "- Against each model's reference run: 4 inferior, 6 inconclusive (10 run x setting comparisons" in first
    same = next(line for line in verdicts.splitlines() if line.startswith("| same ctx2048"))
    assert same.count("+0.000 [-0.129, +0.129] inconclusive (~189 items)") == 2
    assert "Ablation: " not in first and "- [Pairwise ablation tests (" in details


def test_report_in_headless_chromium(tmp_path, offline_browser):  # type: ignore[no-untyped-def]
    report = _sweep(tmp_path) / "report.html"
    errors: list[str] = []
    page = offline_browser.new_page(viewport={"width": 1400, "height": 900})
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(report.as_uri())
    page.wait_for_load_state("load")
    page.screenshot(path=str(tmp_path / "first_screen.png"))
    # The first screen (the viewport, unscrolled) shows the verdict table with a red "inferior" cell.
    title = page.locator("#first h2", has_text="Verdicts: m (fake)")
    assert title.bounding_box()["y"] < 900
    cell = page.locator("#first td.v-inf").first
    assert "inferior" in cell.inner_text() and cell.bounding_box()["y"] < 900
    # A click on a header sorts: the leaderboard's first column, descending on the second click.
    board = page.locator("table", has=page.locator("th", has_text="jbeqa.0shot.constrained")).nth(1)
    names = lambda: board.locator("tbody tr td:first-child").all_inner_texts()  # noqa: E731
    board.locator("th").first.click()
    assert names() == sorted(names())
    board.locator("th").first.click()
    assert names() == sorted(names(), reverse=True)
    # The item browser: 26 items x 2 settings; filters narrow the rows, a click shows the runs side by side.
    page.locator("#browser summary").click()
    count = lambda: page.locator("#items tbody tr").count()  # noqa: E731
    assert count() == 52
    page.select_option("#f-setting", label="jbeqa.0shot.constrained")
    assert count() == 26
    page.select_option("#f-run", label="m.fake.broken.ctx2048")
    page.select_option("#f-answer", "incorrect")
    wrong = count()
    assert 0 < wrong < 26 and page.locator("#items thead th").count() == 5  # one run's column
    page.select_option("#f-answer", "correct")
    assert count() == 26 - wrong
    page.select_option("#f-group", label="民法")
    assert 0 < count() < 26 - wrong
    assert set(page.locator("#items tbody td:nth-child(3)").all_inner_texts()) == {"民法"}
    page.select_option("#f-run", label="every run")
    page.select_option("#f-answer", "differ")
    page.locator("#items tbody tr").first.click()
    detail = page.locator("#item-detail").inner_text()
    assert detail.count("raw output") == 6 and "m.fake.broken.ctx4096" in detail
    # The prompt is collapsed; a click shows it.
    # Data in the heading's line is isolated (FSI ... PDI), so an override in an id or a gold answer ends there.
    heading = page.locator("#item-detail h3").inner_text()
    assert heading.startswith("\u2068") and heading.count("\u2068") == heading.count("\u2069") == 3
    item = heading.split(" ")[0].strip("\u2068\u2069")
    prompt = page.locator("#item-detail details.prompt pre")
    assert prompt.count() == 1 and not prompt.is_visible()
    page.locator("#item-detail details.prompt summary").click()
    assert prompt.is_visible() and prompt.inner_text().startswith("[system]\n" + SYSTEM_PROMPT)
    assert _question(item) in prompt.inner_text()
    page.locator("#browser").screenshot(path=str(tmp_path / "item_browser.png"))
    # A revision item: each run's revised contract against the input one, the inserted article marked.
    page.goto(_revision_sweep(tmp_path / "rikai").joinpath("report.html").as_uri())
    page.locator("#browser summary").click()
    page.locator("#items tbody tr").first.click()
    assert "第99条（追加条項）" in page.locator("#item-detail ins").first.inner_text()
    assert "diff against the input contract" in page.locator("#item-detail").inner_text()
    page.locator("#browser").screenshot(path=str(tmp_path / "revision_diff.png"))
    assert errors == []


def _question(item_id: str) -> str:
    from test_verdicts import DATA

    rows = [json.loads(x) for x in (DATA / "test.jsonl").read_text(encoding="utf-8").splitlines()]
    return next(r["question"] for r in rows if r["id"] == item_id)


_INSERTED = "\n## 第99条（追加条項）\n乙は、本契約の履行状況を毎月甲に報告する。\n"


def _revision_sweep(tmp: Path) -> Path:
    """LegalRikai ReqRev on the fake engine, answering the first contract with one article added."""
    from conftest import ROOT

    from offline_eval.pipeline.config import load_config
    from offline_eval.pipeline.options import SweepOptions
    from offline_eval.pipeline.orchestrate import run_sweep

    tmp.mkdir()
    data = ROOT / "data" / "legalrikai"
    contract = json.loads((data / "reqrev.jsonl").read_text(encoding="utf-8").splitlines()[0])["contract"]
    (tmp / "w.bin").write_text("fake weights")
    cfg = tmp / "m.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "output_dir": str(tmp / "out"),
                "models": [
                    {
                        "name": "m",
                        "backend": "fake",
                        "path": str(tmp / "w.bin"),
                        "max_model_len": 32768,
                        "variants": {"f16": {"options": {"default": contract.rstrip("\n") + "\n" + _INSERTED}}},
                    }
                ],
                "tasks": {
                    "legalrikai": {
                        "protocol": "offline-eval",
                        "data": {"reqrev": str(data / "reqrev.jsonl")},
                        "limit": 1,
                        "max_tokens": 6000,
                    }
                },
            },
            allow_unicode=True,
        )
    )
    run_sweep(load_config(cfg), SweepOptions(source=str(cfg), log=lambda _: None))
    return tmp / "out"


def test_prompts_are_kept_once_per_line():
    from offline_eval.inference.requests import Phase, Request
    from offline_eval.report.inputs import ItemInputs

    system, shot, answer = "あなたは法律の専門家です。", "例題：民法第1条は…\n\n正誤を答えよ。", "1"

    def chat(q: str) -> Request:
        return Request.chat(
            [
                {"role": "system", "content": system},
                {"role": "user", "content": shot},
                {"role": "assistant", "content": answer},
                {"role": "user", "content": q},
            ]
        )

    qs = ["問1：契約は口頭でも成立する。\n\n正誤を答えよ。", "問2：未成年者の法律行為は常に無効である。"]
    inputs = ItemInputs()
    inputs.add_phase(
        "s.4shot",
        ["a", "b"],
        Phase(
            "s", [chat(q) for q in qs], ["a", "b"], fallbacks=[Request.chat([{"role": "user", "content": qs[0]}]), None]
        ),
    )
    inputs.add_phase("s.0shot", ["a"], Phase("s", [Request(prompt=qs[0])], ["a"]))
    # each distinct line once: the shot's last line is also the first question's; "" is the blank line
    assert inputs.texts == [
        system,
        "例題：民法第1条は…",
        "",
        "正誤を答えよ。",
        answer,
        "問1：契約は口頭でも成立する。",
        "問2：未成年者の法律行為は常に無効である。",
    ]
    a, focused = inputs.prompts["s.4shot"]["a"]
    assert inputs.decode(a) == [("system", system), ("user", shot), ("assistant", answer), ("user", qs[0])]
    assert inputs.decode(focused) == [("user", qs[0])] and inputs.prompts["s.4shot"]["b"][1] is None
    assert inputs.prompts["s.0shot"]["a"] == [[["prompt", 5, 2, 3]], None]


def test_item_data_past_the_limit_goes_to_a_sidecar(tmp_path, monkeypatch):
    import json

    from offline_eval.report import browser, write_report

    out = _sweep(tmp_path)
    inline = (out / "report.html").read_text(encoding="utf-8")
    assert 'id="items-data"' in inline and not (out / browser.SIDECAR).exists()
    monkeypatch.setattr(browser, "INLINE_LIMIT", 1000)
    write_report(out)
    html = (out / "report.html").read_text(encoding="utf-8")
    side = (out / browser.SIDECAR).read_text(encoding="utf-8")
    assert 'id="items-data"' not in html and f'<script src="{browser.SIDECAR}"></script>' in html
    assert f"is in {browser.SIDECAR} next to this report" in html
    data = json.loads(side.removeprefix("window.OFFLINE_EVAL_ITEMS = ").rstrip().rstrip(";"))
    assert len(data["runs"]) == 6 and len(data["rows"]) == 52
    monkeypatch.setattr(browser, "INLINE_LIMIT", 20 * 2**20)
    write_report(out)  # small again: inlined, and the stale sidecar goes
    assert not (out / browser.SIDECAR).exists()
