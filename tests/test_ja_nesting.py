"""Work per character stays bounded however brackets nest (issue 24, item 9): 「（ nested 20k deep cost 5.4 s
against 0.9 s flat, a 1.2 MB unbalanced nesting kept `ja stats` and `ja check` running past 180 s, and
`ja diff` on a 600 KB nested file took 138 s.

Speed is measured in benchmarks (scripts/bench_ja_nesting.py), not in tests: these count the work (tests/ja_work.py:
interpreter events, characters MeCab reads, edit-distance cells) on one input against another (nested against
flat of the same size, n against 8n), or against a budget per character that quadratic work misses by orders of
magnitude. Counted, it is the same number under any load. The command lines run from a temporary folder, so that
PYTHONPATH picks the package under test; their timeouts only bound a hung run."""

from __future__ import annotations

import json
import random
import re

import pytest
from conftest import run_cli
from ja_work import assert_grows_at_most, work_of

from offline_eval.ja.align import changes
from offline_eval.ja.brackets import quotes
from offline_eval.ja.checks import check
from offline_eval.ja.contract import parse
from offline_eval.ja.diff import CELLS, diff_texts
from offline_eval.ja.references import scan
from offline_eval.ja.show import stats
from offline_eval.ja.tokenize import morpheme_spans, morphemes

# Megabytes of text, and MeCab: `make test` runs them, the fast tier does not.
pytestmark = pytest.mark.slow

HEAD = "架空法\n\n（目的）\n第一条　"
OPEN, CLOSE = "「（『［〔([", "」）』］〕)]"


def shape(kind: str, n: int) -> str:
    """About n characters of one bracket shape inside an e-Gov article."""
    if kind == "nested":  # 「（「（…あ…）」）」, depth n/4 of each
        d = n // 4
        return HEAD + "「（" * d + "あ" + "）」" * d + "\n"
    if kind == "nested_all":  # every bracket kind, balanced
        d = n // (2 * len(OPEN))
        return HEAD + OPEN * d + "あ" + CLOSE[::-1] * d + "\n"
    if kind == "opening":
        return HEAD + OPEN * (n // len(OPEN)) + "\n"
    if kind == "closing":
        return HEAD + CLOSE * (n // len(CLOSE)) + "\n"
    if kind == "alternating":
        return HEAD + "".join(o + c for o, c in zip(OPEN, CLOSE)) * (n // 14) + "\n"
    if kind == "quotes_unclosed":
        return HEAD + "「" * n + "\n"
    if kind == "references":  # 第二条（第二条（…）） with references at every level
        d = n // 5
        return HEAD + "第二条（" * d + "）" * d + "\n第二条　甲\n"
    if kind == "definitions":  # one sentence (it runs on inside the brackets) holding n/6 definitions
        return HEAD + "（「甲」とは" * (n // 6) + "\n"
    if kind == "lines":
        line = "「（" * 40 + "第一条第一項" + "）」" * 40 + "\n"
        return HEAD + "甲\n" + line * (n // len(line))
    if kind == "lines_unbalanced":
        line = "（「" * 100 + "\n"
        return HEAD + "甲\n" + line * (n // len(line))
    raise KeyError(kind)


SHAPES = [
    "nested",
    "nested_all",
    "opening",
    "closing",
    "alternating",
    "quotes_unclosed",
    "references",
    "definitions",
    "lines",
    "lines_unbalanced",
]


# 8x the text: linear work is 8x the work (each count read 7.4 to 8.1), n log n about 10x, quadratic 64x. Counted,
# not timed, the bound can sit close to linear: no load moves a count.
SMALL, LARGE = 10_000, 80_000
GROWTH = 12


def _stats_and_check(text: str):  # type: ignore[no-untyped-def]
    def run():  # type: ignore[no-untyped-def]
        doc = parse(text)
        stats(doc)
        check(doc)

    return run


def test_nesting_20k_deep_costs_what_flat_text_of_its_size_costs():
    nested = HEAD + "「（" * 20_000 + "あ" + "）」" * 20_000 + "\n"
    flat = HEAD + "「あ」" * (80_000 // 3) + "\n"
    assert abs(len(nested) - len(flat)) < 10
    # Nested is less work than flat (0.4x); MeCab read each run of brackets to its end from every bracket: 8e8 reads.
    assert_grows_at_most(work_of(_stats_and_check(flat)), work_of(_stats_and_check(nested)), 1)


@pytest.mark.parametrize("kind", SHAPES)
def test_stats_and_check_scale_linearly_with_any_bracket_shape(kind):
    small, large = shape(kind, SMALL), shape(kind, LARGE)
    assert_grows_at_most(work_of(_stats_and_check(small)), work_of(_stats_and_check(large)), GROWTH)


@pytest.mark.parametrize("kind", ["nested", "opening", "alternating", "references"])
def test_diff_scales_linearly_with_any_bracket_shape(kind):
    """`ja diff` work: the text against itself with two edits far apart, against a short text, and against an
    unrelated text of its size (which took minutes at 600 KB: an exact edit script of the whole line)."""

    def work(n: int):  # type: ignore[no-untyped-def]
        a = shape(kind, n)
        m = len(a) // 2
        b = a[: m // 2] + "書面" + a[m // 2 : m] + "甲" + a[m + 1 :]
        other = HEAD + "（あ）" * (n // 3) + "\n"
        small = "第一条（目的）\n本契約は業務を定める。\n"

        def run():  # type: ignore[no-untyped-def]
            for x, y in ((a, b), (small, a), (a, other)):
                diff_texts(x, y)
                changes(parse(x), parse(y))

        return run

    assert_grows_at_most(work_of(work(SMALL)), work_of(work(LARGE)), GROWTH)


def test_cli_stats_and_check_on_a_1_2_mb_unbalanced_nesting(tmp_path):
    f = tmp_path / "unbalanced.txt"
    f.write_text(HEAD + "「（" * 200_000 + "\n", encoding="utf-8")  # 1.2 MB, nothing closed
    assert f.stat().st_size >= 1_200_000
    st = run_cli("ja", "stats", str(f), "--json", cwd=tmp_path)  # ran past 180 s
    assert st.returncode == 0, st.stderr
    s = json.loads(st.stdout)
    assert s["lines"] == 5 and s["articles"] == 1 and s["morphemes"] > 400_000
    ck = run_cli("ja", "check", str(f), "--json", cwd=tmp_path)
    assert ck.returncode == 0, ck.stderr and json.loads(ck.stdout) == []


def test_cli_diff_of_a_600_kb_nested_file(tmp_path):
    d = 50_000
    a = HEAD + "「（" * d + "甲は乙に報告する。" + "）」" * d + "\n"
    b = a.replace("甲は乙に報告する。", "甲は乙に書面で報告する。")
    fa, fb, fs = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "small.txt"
    fa.write_text(a, encoding="utf-8")
    fb.write_text(b, encoding="utf-8")
    fs.write_text("第一条（目的）\n本契約は業務を定める。\n", encoding="utf-8")
    assert fa.stat().st_size >= 600_000
    df = run_cli("ja", "diff", str(fa), str(fb), "--json", cwd=tmp_path)  # took 138 s
    assert df.returncode == 0, df.stderr
    st = json.loads(df.stdout)["stats"]
    assert (st["inserted_chars"], st["deleted_chars"], st["diff_chars"]) == (3, 0, 3)
    assert st["diff_morphemes"] == 2  # 書面 / で: the brackets around tokenize alike on both sides
    df = run_cli("ja", "diff", str(fs), str(fa), "--json", cwd=tmp_path)
    assert df.returncode == 0, df.stderr
    assert json.loads(df.stdout)["stats"]["inserted_chars"] > 190_000
    fo = tmp_path / "other.txt"
    fo.write_text(HEAD + "（あ）" * (4 * d // 3) + "\n", encoding="utf-8")  # unrelated, 600 KB
    df = run_cli("ja", "diff", str(fa), str(fo), "--json", cwd=tmp_path)
    assert df.returncode == 0, df.stderr
    out = json.loads(df.stdout)
    assert out["stats"]["diff_chars"] > 0 and [a["kind"] for a in out["articles"]] == ["deleted", "inserted"]


def test_ten_megabytes_of_brackets_go_through_stats_and_check(tmp_path):
    """10 MB: a quadratic pass would take hours (the run's timeout only bounds a hung run)."""
    f = tmp_path / "ten.txt"
    f.write_text(HEAD + (OPEN + "第一条第一項" + CLOSE[::-1]) * 10_000 + OPEN * 1_150_000 + "\n", encoding="utf-8")
    assert f.stat().st_size >= 10_000_000
    for cmd in ("stats", "check"):
        r = run_cli("ja", cmd, str(f), "--json", cwd=tmp_path)
        assert r.returncode == 0, r.stderr


def test_diff_of_two_unrelated_big_single_lines_is_bounded_and_valid():
    """No common line, no sentence, no clause to match: the changed block is too big for an exact edit script
    in bounded time, so it counts as replaced whole (an upper bound on the edit), and the script still spells
    out both texts."""
    a = HEAD + "「（" * 150_000 + "\n"
    b = HEAD + "（あ）" * 100_000 + "\n"
    got: list = []
    w = work_of(lambda: got.append(diff_texts(a, b, with_morphemes=False)))
    d = got[0]
    # An exact edit script of 300k x 300k characters is 9e10 cells (minutes): at most CELLS a character (read:
    # 257), and the Python around it a few events a character (read: 0.3).
    assert w.cells <= CELLS * (len(a) + len(b)) and w.python <= 4 * (len(a) + len(b)) and w.mecab == 0, w
    assert "".join(a[o[1] : o[2]] for o in d.ops) == a and "".join(b[o[3] : o[4]] for o in d.ops) == b
    assert d.stats.diff_chars <= (len(a) - len(HEAD) - 1) + (len(b) - len(HEAD) - 1)


def test_long_bracket_runs_are_a_morpheme_per_character_and_line_up():
    from offline_eval.ja.tokenize import RUN, chunks

    run = "「（" * 5_000 + "）」" * 5_000
    text = "甲は" + run + "乙に報告する。"
    spans = morpheme_spans(text)
    words = morphemes(text)
    assert [text[a:b] for a, b in spans] == words
    assert words[:2] == ["甲", "は"] and words[2 : 2 + len(run)] == list(run)
    assert [len(p) for _, p, whole in chunks(text) if whole] == [len(run)]
    short = "甲は「（" + "あ" * 10 + "）」乙に報告する。"  # runs shorter than RUN go to MeCab as before
    assert not any(whole for _, _, whole in chunks(short)) and RUN > 4


def test_quotes_are_what_the_old_regex_found():
    old = re.compile(r"「[^」\n]*」|『[^』\n]*』")
    rng = random.Random(7)
    for _ in range(3000):
        t = "".join(rng.choice("「」『』\nあ") for _ in range(rng.randint(0, 40)))
        assert quotes(t) == [m.span() for m in old.finditer(t)], t


def test_nested_references_still_resolve():
    doc = parse(shape("references", 5_000))
    refs = scan(doc)
    assert len(refs) == 1_000 and all(r.status == "internal" and r.targets[0].article == "2" for r in refs)


def test_law_name_before_a_reference_is_what_the_old_regex_found():
    from offline_eval.ja.refscan import _PREFIX, _prefix

    rng = random.Random(11)
    pieces = [*"法律民（）()、。 \n条項号あ漢第一令", "（平成五年法律第八十八号）", "法" * 45, "（" + "あ" * 85 + "）"]
    for _ in range(5000):
        w = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))[-140:]
        m = _PREFIX.search(w)
        assert m is not None and _prefix(w) == (m.group("name"), m.group("paren")), w


def test_sentences_and_scoped_definitions_are_what_one_pass_per_character_found():
    from offline_eval.ja.definitions import _CLOSE, _MARKS, _MEANS, _OPEN, Sentences, definitions
    from offline_eval.ja.numerals import NUM

    scope = re.compile(rf"(?:この|本|前|次|同|第{NUM})[編章節款条項号](?:[^。「]{{0,30}})において")

    def starts(text: str) -> list[int]:
        out, depth = [0], 0
        for m in _MARKS.finditer(text):
            c = m.group(0)
            if c == "\n":
                depth = 0
                out.append(m.end())
            elif c in _OPEN:
                depth += 1
            elif c in _CLOSE:
                depth = max(0, depth - 1)
            elif depth == 0:
                out.append(m.end())
        return out

    rng = random.Random(5)
    parts = [
        "この条において",
        "第三章において",
        "「甲」とは",
        "「乙」とは",
        "（",
        "）",
        "。",
        "\n",
        "あ",
        "第十二条",
        "において",
    ]
    for _ in range(3000):
        t = "".join(rng.choice(parts) for _ in range(rng.randint(0, 14)))
        sents = Sentences(t)
        assert sents.starts == starts(t), t
        got = [(d.start, d.scoped) for d in definitions(t, sents) if not d.abbreviation]
        want = [(m.start(), bool(scope.search(t, sents.start_of(m.start()), m.start()))) for m in _MEANS.finditer(t)]
        assert got == want, t


def test_runs_are_found_as_one_alternation_of_the_classes_finds_them() -> None:
    """The runs MeCab is not given are found class by class inside stretches of grouped characters (fast); the
    oracle is the alternation of every class, each run from its first character, tried at every position."""
    from offline_eval.ja.tokenize import RUN, _grouped_classes, _run_spans, tagger

    oracle = re.compile("|".join(f"(?<![{c}])[{c}]{{{RUN},}}" for c in _grouped_classes(tagger())))
    rng = random.Random(7)
    parts = ["「", "（", "）", "」", "ア", "イ", "x", "Y", "1", "９", "ー", "。", "あ", "条", " ", "\u3000", "€", "Ω"]
    for _ in range(200):
        text = "".join(rng.choice(parts) * rng.choice([1, 3, 40, RUN - 1, RUN, RUN + 5]) for _ in range(12))
        assert _run_spans(text) == [m.span() for m in oracle.finditer(text)], text
