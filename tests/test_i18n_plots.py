"""The report's plots under `--lang ja` (issue 64, item 7): the demo's plots, with a context and a thinking plot
drawn from its runs, keep the label rules of tests/test_plot_labels.py (no two texts overlap, none under 8 points)
with Japanese words; their axis titles, titles and captions are Japanese, a bar without an interval says why in
Japanese, and the font matplotlib resolved for every Japanese text has a glyph for each of its characters (no
tofu)."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from test_plot_labels import FIXTURE, texts, unreadable

from offline_eval.report import plots
from offline_eval.results.records import Reasoning, RunEntry
from offline_eval.runtime.i18n import language
from offline_eval.tasks import read_summary
from offline_eval.tasks.kit import figures

JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uff00-\uffef]")
OURS = ("pareto", "frontier_", "quant_", "context_", "thinking_")  # the plots report/plots.py draws
ENGLISH_NOTES = {"n too small", "no spread", "no CI", "no score"}  # why a bar has no interval, in English


def _context_and_thinking(runs: list[RunEntry]) -> tuple[list[RunEntry], list[RunEntry]]:
    """The demo's JBE-QA runs with the same again at twice the context, and as reasoning runs (the demo has no
    context or thinking plot of its own)."""
    jbeqa = [r for r in runs if r.task == "jbeqa"]
    longer = [r.model_copy(deep=True) for r in jbeqa]
    for r in longer:
        r.max_model_len *= 2
    thinking = [r.model_copy(deep=True) for r in jbeqa]
    for k, r in enumerate(thinking):
        per_item = 10.0 * (k % 4 + 1)
        r.throughput.reasoning = Reasoning(
            items=10, thinking_tokens=int(10 * per_item), thinking_tokens_per_item=per_item, cut_by_budget=0
        )
    return jbeqa + longer, thinking


@pytest.fixture(scope="module")
def drawn_ja() -> dict[str, tuple[figures.Plot, Any]]:
    """Every plot of the report on the demo, drawn in Japanese: its name, its Plot and its figure."""
    out: dict[str, tuple[figures.Plot, Any]] = {}
    real = figures.save

    def keep(plt: Any, fig: Any, name: str, title: str, caption: str = "") -> figures.Plot:
        plot = real(plt, fig, name, title, caption)
        out[name] = (plot, fig)
        return plot

    summary = read_summary(FIXTURE)
    context, thinking = _context_and_thinking(summary.runs)
    with pytest.MonkeyPatch.context() as mp:
        for module in (plots, figures):
            mp.setattr(module, "save", keep, raising=False)
        mp.setattr("offline_eval.tasks.jbeqa.report.save", keep)
        with language("ja"), figures.drawing():
            plots.all_plots(summary)
            plots.pareto(summary.runs)  # the first screen's
            plots.context_lines(context)
            plots.thinking_curves(thinking)
    return out


def _axis_titles(fig: Any) -> list[Any]:
    return [t for ax in fig.axes for t in (ax.xaxis.label, ax.yaxis.label) if t.get_text().strip()]


def test_in_japanese_no_two_labels_overlap_and_none_is_under_8_points(drawn_ja):
    assert {"pareto", "context_f1", "thinking_jbeqa"} <= set(drawn_ja)
    assert any(n.startswith("frontier_") for n in drawn_ja) and any(n.startswith("quant_") for n in drawn_ja)
    for name, (_plot, fig) in drawn_ja.items():
        small, overlaps = unreadable(fig)
        assert not small, f"{name}: {small}"
        assert not overlaps, f"{name}: {overlaps[:3]}"


def test_our_plots_axis_titles_titles_and_captions_are_japanese(drawn_ja):
    """A metric code (f1, adj_score) is drawn as it is, as an axis title of its own; every other word is Japanese,
    and so is the reason a bar has no interval."""
    codes = {r.primary_metric for r in read_summary(FIXTURE).runs}
    ours = {name: v for name, v in drawn_ja.items() if name.startswith(OURS)}
    assert len(ours) > 10
    for name, (plot, fig) in ours.items():
        titles = [t.get_text() for t in _axis_titles(fig)]
        assert titles and any(JAPANESE.search(t) for t in titles), (name, titles)
        english = [t for t in titles if not JAPANESE.search(t) and t not in codes]
        assert not english, (name, english)
        assert JAPANESE.search(plot.title) and JAPANESE.search(plot.caption), (name, plot.title)
        said = {s for s, _, _ in texts(fig)}
        assert not said & ENGLISH_NOTES, (name, said & ENGLISH_NOTES)


def test_every_japanese_text_s_font_has_a_glyph_for_each_of_its_characters(drawn_ja):
    pytest.importorskip("matplotlib_fontja", reason="the `report` extra draws Japanese (IPAex Gothic)")
    from matplotlib.font_manager import findfont
    from matplotlib.ft2font import FT2Font
    from matplotlib.text import Text

    charmaps: dict[str, set[int]] = {}
    checked = 0
    for name, (_plot, fig) in drawn_ja.items():
        shown = [t for t in fig.findobj(Text) if t.get_visible() and JAPANESE.search(t.get_text())]
        assert not name.startswith(OURS) or {id(t) for t in _axis_titles(fig)} & {id(t) for t in shown}, name
        for t in shown:
            path = findfont(t.get_fontproperties(), fallback_to_default=False)
            glyphs = charmaps.setdefault(path, set(FT2Font(path).get_charmap()))
            missing = {c for c in t.get_text() if not c.isspace() and ord(c) not in glyphs}
            assert not missing, (name, t.get_text(), path, missing)
            checked += 1
    assert checked


def test_the_item_browser_s_controls_and_script_texts_are_japanese(tmp_path):
    """The browser's page words and the texts its script writes (filters, headers, the item's detail) in Japanese:
    each English message (a piece of it between fields) the English section holds is there fewer times in the
    Japanese one (an id or an option's value, "correct", stays)."""
    from babel.messages.extract import extract_from_file

    from offline_eval.report import browser
    from offline_eval.results.records import ResultsFolder

    data = {"runs": ["m.a"], "weights": ["-"], "settings": ["s"], "texts": [], "rows": [["1", 0, None, "1", {}, None]]}
    english = browser.browser_html(data, ResultsFolder(tmp_path))
    with language("ja"):
        japanese = browser.browser_html(data, ResultsFolder(tmp_path))
    found = extract_from_file("python", browser.__file__, keywords={"_": None, "N_": None})
    words = [m for _, m, _, _ in found if isinstance(m, str)]  # no ngettext here
    pieces = {p.strip() for m in words for p in re.split(r"\{[^}]*\}", m) if len(p.strip()) > 1}
    shown = [p for p in pieces - {"weights"} if p in english]  # the data's "weights {digest}"; D.weights in the script
    assert len(shown) > 25
    assert not [p for p in shown if japanese.count(p) >= english.count(p)]
    assert JAPANESE.search(japanese[japanese.rindex("<script>") :])


def test_a_text_in_the_browser_s_script_cannot_end_it_or_its_string():
    from offline_eval.report.browser import _literal

    assert _literal("every run") == "'every run'"  # as the script quotes its own
    for text in ("</script><b>", "it's", 'say "x"', "a\\'b", "\u2028"):
        js = _literal(text)
        assert "</" not in js and "\u2028" not in js and json_string(js) == text, js


def json_string(js: str) -> str:
    """The string a JS literal of _literal's means (a JSON string once single quotes are double)."""
    import json

    return json.loads(js if js.startswith('"') else '"' + js[1:-1].replace('"', '\\"') + '"')
