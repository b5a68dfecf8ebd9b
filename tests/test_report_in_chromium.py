"""The demo's report in a real browser, in both languages: a 1400x1000 screen shows the answer (the table of which
variant to deploy) without scrolling, and the Japanese page says lang="ja" and draws every character it holds with a
font that has it (no tofu): Chromium names the fonts it drew each element's text with (DevTools'
CSS.getPlatformFontsForNode), and each character is in one of those fonts' character maps."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import unicodedata
from pathlib import Path

import pytest
from conftest import ROOT

DEMO = ROOT / "tests" / "fixtures" / "v3-demo"
SCREEN = {"width": 1400, "height": 1000}


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """Debian's chromium, offline, seeing the system's fonts and IPAex Gothic (matplotlib-fontja's): a machine with
    no Japanese font would draw tofu whatever the page asks for."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (scripts/test.sh installs it where it can)")
    fontja = pytest.importorskip("matplotlib_fontja")
    from playwright.sync_api import sync_playwright

    conf = tmp_path_factory.mktemp("fonts") / "fonts.conf"
    conf.write_text(
        '<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd"><fontconfig>'
        '<include ignore_missing="yes">/etc/fonts/fonts.conf</include>'
        f"<dir>{Path(fontja.__file__).parent / 'fonts'}</dir><cachedir>{conf.parent / 'cache'}</cachedir></fontconfig>",
        encoding="utf-8",
    )
    env = {**os.environ, "FONTCONFIG_FILE": str(conf)}
    args = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"]
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=args, env=env)
        yield b, env
        b.close()


@pytest.fixture
def reports(demo_in_both_languages: dict[str, Path]) -> dict[str, Path]:
    return {lang: folder / "report.html" for lang, folder in demo_in_both_languages.items()}


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_answer_is_on_the_first_screen(browser, reports, lang, tmp_path):
    b, _env = browser
    page = b.new_page(viewport=SCREEN)
    page.goto(reports[lang].as_uri())
    page.wait_for_load_state("load")
    box = page.eval_on_selector(
        "#first table", "t => { const r = t.getBoundingClientRect(); return [r.top, r.bottom]; }"
    )
    page.screenshot(path=str(tmp_path / f"first-{lang}.png"))
    heading = page.eval_on_selector("#first h2", "h => h.textContent")
    assert heading == {"en": "Which variant to deploy", "ja": "導入候補"}[lang]
    assert 0 <= box[0] < box[1] <= SCREEN["height"], box
    assert page.eval_on_selector("html", "h => h.lang") == lang


def _font_files(families: set[str], env: dict[str, str]) -> dict[str, Path]:
    out = {}
    for family in families:
        found = subprocess.run(["fc-match", "-f", "%{file}", family], env=env, capture_output=True, text=True)
        out[family] = Path(found.stdout.strip())
    return out


def _cmap(path: Path) -> set[int]:
    from fontTools.ttLib import TTCollection, TTFont

    if path.suffix.lower() == ".ttc":
        return set().union(*(f.getBestCmap().keys() for f in TTCollection(str(path)).fonts))
    return set(TTFont(str(path), lazy=True).getBestCmap().keys())


def test_the_japanese_page_draws_every_character_with_a_font_that_has_it(browser, reports):
    if shutil.which("fc-match") is None:
        pytest.skip("fontconfig's fc-match is not installed")
    b, env = browser
    page = b.new_page(viewport=SCREEN)
    page.goto(reports["ja"].as_uri())
    page.wait_for_load_state("load")
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
    checked, missing, families = 0, [], set()
    ids = cdp.send("DOM.querySelectorAll", {"nodeId": root, "selector": "h1, h2, th, td, li, p, summary"})["nodeIds"]
    drawn: list[tuple[str, list[str]]] = []
    for node in ids:
        text = cdp.send("DOM.getOuterHTML", {"nodeId": node})["outerHTML"]
        fonts = [f["familyName"] for f in cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]]
        if not fonts:
            continue  # not drawn (inside a closed <details>)
        families.update(fonts)
        drawn.append((text, fonts))
    files = _font_files(families, env)
    maps = {f: _cmap(p) for f, p in files.items() if p.is_file()}
    for text, fonts in drawn:
        chars = {c for c in re.sub(r"<[^>]+>", "", text) if not c.isspace() and unicodedata.category(c)[0] != "C"}
        for c in chars:
            checked += 1
            if not any(ord(c) in maps.get(f, set()) for f in fonts):
                missing.append((c, fonts))
    assert any("IPAex" in f or "CJK" in f or "Gothic" in f for f in families), families
    assert checked > 1000 and not missing, missing[:20]


def test_a_screenshot_of_every_japanese_character_on_the_page_shows_no_missing_glyph_box(browser, reports, tmp_path):
    """The screenshot check: every distinct Japanese character the page shows is drawn in a grid with the page's font
    stack, and no cell looks like the box drawn for a character no font has (a private-use one, U+E000); two more
    private-use characters prove the check sees a box where there is one."""
    import io

    from PIL import Image

    from offline_eval.runtime.i18n import FONTS

    b, _env = browser
    page = b.new_page(viewport=SCREEN)
    page.goto(reports["ja"].as_uri())
    page.wait_for_load_state("load")
    shown = page.eval_on_selector("body", "b => b.innerText")
    wide = sorted({c for c in shown if unicodedata.east_asian_width(c) in "WF" and not c.isspace()})
    assert len(wide) > 200, len(wide)
    cells = ["\ue000", "\ue001", "\ue002", *wide]  # the box, then two more boxes the check must find
    per_row, size = 40, 28
    grid = "".join(f'<span style="left:{(i % per_row) * size}px;top:{(i // per_row) * size}px">{c}</span>'
                   for i, c in enumerate(cells))  # fmt: skip
    page.set_content(
        f"<html lang='ja'><body style='margin:0'><style>span{{position:absolute;width:{size}px;height:{size}px;"
        f"font:20px/{size}px {FONTS};text-align:center}}</style>{grid}</body></html>"
    )
    shot = Image.open(io.BytesIO(page.screenshot(full_page=True))).convert("L")
    shot.save(tmp_path / "glyphs.png")

    def cell(i: int) -> bytes:
        x, y = (i % per_row) * size, (i // per_row) * size
        return shot.crop((x, y, x + size, y + size)).tobytes()

    box = cell(0)
    assert min(box) < 128, "the missing-glyph box is drawn"
    assert cell(1) == box and cell(2) == box  # a missing glyph looks like the box
    missing = [c for i, c in enumerate(cells[3:], 3) if cell(i) == box]
    assert not missing, missing
