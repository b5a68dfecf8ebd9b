"""`--lang ja` for compare's page and lines and for the annotation page (issue 64), on the demo's folder (fast
tier, no engine). The Japanese is read from the real catalogue (offline_eval/locale/ja); what a machine reads
(comparison.json, flips.jsonl, --json, the reveal file) is the same in every language, and so is every number."""

from __future__ import annotations

import html
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

V3 = ROOT / "tests" / "fixtures" / "v3-demo"
ENGLISH_VERDICT = re.compile(r"\b(non-inferior|inferior|inconclusive|regressed|improved|refused|missing)\b", re.I)
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
FULL_WIDTH_DIGIT = re.compile(r"[０-９]")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The demo's folder and a copy of it (a migrated folder: compared with --no-verify, as test_compare does)."""
    tmp = tmp_path_factory.mktemp("demo")
    old, new = tmp / "old", tmp / "new"
    shutil.copytree(V3, old)
    shutil.copytree(V3, new)
    return old, new


def _visible(page: str) -> str:
    """The page's text as a reader sees it: no script, no style, no tags, no lang attribute."""
    text = page.replace(' lang="ja"', "")
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", text, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", text))


def _compare(demo: tuple[Path, Path], out: Path, *extra: str):  # type: ignore[no-untyped-def]
    got = run_cli("compare", str(demo[0]), str(demo[1]), "--no-verify", "--out", str(out), *extra)
    assert got.returncode == 0, got.stderr
    return got


def test_compare_in_japanese_translates_the_page_and_lines_and_keeps_every_number(demo, tmp_path) -> None:  # type: ignore[no-untyped-def]
    en_out, ja_out = tmp_path / "en", tmp_path / "ja"
    en, ja = _compare(demo, en_out), _compare(demo, ja_out, "--lang", "ja")
    # What a machine reads is the same in every language.
    for name in ("comparison.json", "flips.jsonl"):
        assert (en_out / name).read_bytes() == (ja_out / name).read_bytes(), name
    as_json = [
        _compare(demo, tmp_path / f"j{k}", "--json", *lang).stdout for k, lang in enumerate(([], ["--lang", "ja"]))
    ]
    assert as_json[0] == as_json[1] and json.loads(as_json[1])["settings"]
    verdicts = {s["verdict"] for s in json.loads(as_json[0])["settings"]}
    assert verdicts == {"inconclusive"}  # the demo against itself: every interval holds -margin
    # The page: Japanese words, no English verdict, the same numbers.
    page_en = (en_out / "compare.html").read_text("utf-8")
    page_ja = (ja_out / "compare.html").read_text("utf-8")
    assert '<html lang="ja">' in page_ja
    seen_en, seen_ja = _visible(page_en), _visible(page_ja)
    assert "inconclusive" in seen_en and "Verdicts" in seen_en  # English stays English
    assert "判定保留" in seen_ja and "比較" in seen_ja and "未検証" in seen_ja
    assert not ENGLISH_VERDICT.findall(seen_ja), ENGLISH_VERDICT.findall(seen_ja)
    for english in ("Verdicts", "What changed", "Flipped items", "NOT VERIFIED", "tests of no difference", "contains"):
        assert english not in seen_ja, english
    assert Counter(NUMBER.findall(seen_en)) == Counter(NUMBER.findall(seen_ja))
    assert not FULL_WIDTH_DIGIT.search(seen_ja)
    # The terminal's lines.
    assert "inconclusive" in en.stdout and "判定保留" in ja.stdout
    assert not ENGLISH_VERDICT.findall(ja.stdout)
    assert Counter(NUMBER.findall(en.stdout.replace(str(en_out), ""))) == Counter(
        NUMBER.findall(ja.stdout.replace(str(ja_out), ""))
    )


def test_the_english_words_of_a_stored_reason_read_back_as_themselves() -> None:
    """comparison.json keeps reasons in English; the page translates each by reading it back into its template's
    fields: in English that gives the reason itself, and a reason of no template is shown as it is."""
    from offline_eval.comparison import words
    from offline_eval.runtime.i18n import language, said

    reasons = [
        words.NO_RESULTS_BECAUSE.format(failure="x.yaml: field 'models.0.path': {odd} braces"),
        words.NOT_INSTALLED.format(task=repr("nope")),
        words.PROTOCOL_CHANGED.format(old="paper", new="offline-eval"),
        words.NO_DIGESTS.format(file="/d/test.jsonl", folder="OLD"),
        words.NO_MARGIN.format(metric="accuracy"),
        "the 95% CI [-0.490, +0.490] contains -0.02",
        "n too small: 3 clusters, a bootstrap interval needs at least 5",
        "a reason worded nowhere here",
    ]
    for r in reasons:
        assert said(r) == r
    with language("ja"):  # and each of ours reads back into its Japanese, a field's braces kept as they are
        assert [said(r) == r for r in reasons] == [False] * (len(reasons) - 1) + [True]
        assert "{odd}" in said(reasons[0])
    assert words.what("library numpy") == "library numpy" and words.scope("sweep") == "sweep"


def test_an_unknown_language_is_one_line_and_exit_2(demo, tmp_path) -> None:  # type: ignore[no-untyped-def]
    for args in (
        ["compare", str(demo[0]), str(demo[1]), "--no-verify", "--out", str(tmp_path / "x"), "--lang", "xx"],
        ["annotate", "plan", str(demo[0]), "--task", "legalrikai", "--width", "0.1", "--lang", "klingon"],
    ):
        got = run_cli(*args)
        assert got.returncode == 2 and "Traceback" not in got.stderr, got.stderr
        assert got.stderr.count("\n") == 1 and got.stderr.startswith("offline-eval: error: unknown language '")
        assert "en or ja" in got.stderr
    assert not (tmp_path / "x").exists()  # refused before anything was written


def _annotated(folder: Path, out: Path, lang: str | None) -> str:
    from offline_eval.annotate import annotate

    out.parent.mkdir(parents=True, exist_ok=True)
    annotate(str(folder), "legalrikai", n=4, out=str(out), lang=lang)
    return out.read_text("utf-8")


def _payload(page: str) -> dict:  # type: ignore[type-arg]
    return json.loads(re.search(r'id="payload">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]


def test_the_annotation_page_in_japanese(demo, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from offline_eval.annotate.page import SCRIPT_TEXT

    en = _annotated(demo[0], tmp_path / "en" / "page.html", None)
    ja = _annotated(demo[0], tmp_path / "ja" / "page.html", "ja")
    assert (tmp_path / "en" / "page.reveal.json").read_bytes() == (tmp_path / "ja" / "page.reveal.json").read_bytes()
    # English: the page's own words, and the script's words as page.js writes them.
    seen_en = _visible(en)
    for english in ("Blind: this page does not hold", "Annotator", "Previous", "Next", "Export your scores"):
        assert english in seen_en, english
    assert _payload(en)["text"] == SCRIPT_TEXT
    # Japanese: instructions, labels, buttons and every message page.js shows.
    seen_ja = _visible(ja)
    for japanese in ("人手評価", "ブラインド評価", "評価者", "前へ", "次へ", "採点を書き出す", "開示ファイル"):
        assert japanese in seen_ja, japanese
    for english in ("Blind:", "Your progress", "Annotator", "Previous", "Export your scores", "Reveal file"):
        assert english not in seen_ja, english
    text = _payload(ja)["text"]
    assert set(text) == set(SCRIPT_TEXT) and text["save"] == "採点を保存"
    assert all(JAPANESE.search(v) for v in text.values()), text
    for key, english in SCRIPT_TEXT.items():  # the same {fields} for page.js to fill in
        assert sorted(re.findall(r"\{\w+\}", text[key])) == sorted(re.findall(r"\{\w+\}", english)), key
    payload_en, payload_ja = _payload(en), _payload(ja)
    payload_en.pop("text"), payload_ja.pop("text")
    titles = {d["title"] for c in payload_ja["cases"] for d in c["shown"] + c["gold"]}
    assert "指示" in titles and all(JAPANESE.search(t) for t in titles), titles  # each document's title, too
    for payload in (payload_en, payload_ja):
        for c in payload["cases"]:
            for d in c["shown"] + c["gold"]:
                d.pop("title")
    assert payload_en == payload_ja  # the cases' texts, the form and the sample: the same in every language
    assert Counter(NUMBER.findall(_visible(en))) == Counter(NUMBER.findall(_visible(ja)))


@pytest.mark.slow
def test_the_japanese_annotation_page_runs_in_chromium(demo, tmp_path, offline_browser) -> None:  # type: ignore[no-untyped-def]
    page_file = tmp_path / "ja.html"
    _annotated(demo[0], page_file, "ja")
    page = offline_browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(page_file.as_uri())
    assert page.locator("#progress").inner_text() == "済 0 · スキップ 0 · 残り 4（全 4 件）"
    assert page.locator("button.save").inner_text() == "採点を保存"
    page.locator("button.save").click()  # nothing scored yet: the message names the first scale, in Japanese
    assert "までの整数で採点してください" in page.locator("#message").inner_text()
    for fieldset in page.locator("fieldset.scale").all():
        fieldset.locator("input[type=radio]").last.check()
    page.locator("button.save").click()
    assert page.locator("#message").inner_text() == "保存しました。"
    assert "開示ファイル" in page.locator(".unrevealed").inner_text()
    page.locator("#export").click()
    assert page.locator("#message").inner_text().startswith("先に評価者名を入力してください")
    assert errors == []
