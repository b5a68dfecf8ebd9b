"""Inputs of any size: MeCab gets bounded pieces (a 3 MB line used to kill it with SIGSEGV), and reference
extraction and checks stay near-linear, in work counted (tests/ja_work.py), not timed: speed is for the benchmarks
(scripts/bench_ja.py). Plus the `ja` command lines for the three reference counts."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import ROOT, run_cli
from ja_work import assert_grows_at_most, work_of

from offline_eval.ja.checks import check
from offline_eval.ja.contract import parse
from offline_eval.ja.diff import CELLS
from offline_eval.ja.references import scan
from offline_eval.ja.tokenize import PIECE, morpheme_count, morpheme_spans, morphemes, pieces

sys.path.insert(0, str(ROOT / "scripts"))
from bench_ja import big_statute  # noqa: E402

pytestmark = pytest.mark.slow  # megabytes of text: `make test` runs them, the fast tier does not

SENTENCE = "甲は乙に対し本契約に基づく業務の遂行状況を書面により報告しなければならない"


def test_pieces_cut_at_sentence_ends_else_at_a_fixed_size():
    text = ("甲は乙に報告する。" * 30_000)[:250_000]
    ps = list(pieces(text))
    assert "".join(p for _, p in ps) == text and all(len(p) <= PIECE for _, p in ps)
    assert all(p.endswith("。") for _, p in ps[:-1]) and [o for o, _ in ps][1] == len(ps[0][1])
    flat = "あ" * 250_000  # no sentence end, no comma, no space: a fixed-size cut
    assert [len(p) for _, p in pieces(flat)] == [PIECE, PIECE, 50_000]


def test_long_text_morphemes_line_up_with_the_text():
    text = (SENTENCE + "。\n") * 6_000  # over PIECE characters
    assert len(text) > PIECE
    spans = morpheme_spans(text)
    words = morphemes(text)
    assert [text[a:b] for a, b in spans] == words and len(words) == morpheme_count(text)
    assert all(b <= c for (_, b), (c, _) in zip(spans, spans[1:]))
    assert words[:5] == morphemes(SENTENCE)[:5]


def test_a_3_5_mb_single_line_does_not_crash_stats_or_diff(tmp_path):
    big = tmp_path / "big.txt"
    big.write_text(SENTENCE * (3_500_000 // len(SENTENCE.encode()) + 1), encoding="utf-8")
    assert big.stat().st_size >= 3_500_000 and big.read_text(encoding="utf-8").count("\n") == 0
    small = tmp_path / "small.txt"
    small.write_text("第1条（目的）\n本契約は業務を定める。\n", encoding="utf-8")
    st = run_cli("ja", "stats", str(big), "--json")
    assert st.returncode == 0, st.stderr  # was -11 (SIGSEGV) with no message
    s = json.loads(st.stdout)
    assert s["lines"] == 1 and s["morphemes"] > 500_000
    df = run_cli("ja", "diff", str(small), str(big), "--json")
    assert df.returncode == 0, df.stderr
    assert json.loads(df.stdout)["stats"]["inserted_morphemes"] > 500_000


def test_references_and_checks_scale_near_linearly():
    small, large = parse(big_statute(0.1)), parse(big_statute(0.4))
    assert check(small) == [] and sum(1 for r in scan(small) if r.status == "dangling") == 0

    def work(doc):  # type: ignore[no-untyped-def]
        return lambda: (scan(doc), check(doc))

    # 4x the text: linear is about 4x the work, the old quadratic extraction over 15x.
    assert_grows_at_most(work_of(work(small)), work_of(work(large)), 6)


def test_ja_stats_reports_three_reference_counts_and_check_the_span():
    st = run_cli("ja", "stats", str(ROOT / "tests" / "ja_texts" / "egov_act.txt"), "--json")
    assert st.returncode == 0, st.stderr
    s = json.loads(st.stdout)
    assert (s["internal_references"], s["external_references"], s["dangling_references"]) == (48, 7, 0)
    ck = run_cli("ja", "check", str(ROOT / "tests" / "ja_texts" / "contract_conventions_defects.md"))
    assert ck.returncode == 0
    line = next(x for x in ck.stdout.splitlines() if x.startswith("第4条第3項"))
    assert line.endswith("(line 29, chars 555-558: 第6項)")
    assert "民法" not in ck.stdout  # external references are never findings


def test_tokenizer_url_is_refused_in_one_line():
    f = str(ROOT / "tests" / "ja_texts" / "egov_act.txt")
    for bad in ("https://huggingface.co/Qwen/Qwen2.5-7B", "hf://Qwen/Qwen2.5-7B"):
        e = run_cli("ja", "stats", f, "--tokenizer", bad)
        assert e.returncode == 2 and "URLs are refused" in e.stderr and "--tokenizer" in e.stderr
        assert "Traceback" not in e.stderr and len(e.stderr.strip().splitlines()) == 1
    e = run_cli("ja", "stats", f, "--tokenizer", str(ROOT / "no-such-folder"))
    assert e.returncode == 2 and "not a local tokenizer folder" in e.stderr and "Traceback" not in e.stderr


def test_diff_of_two_long_single_lines_matches_sentences_first():
    from offline_eval.ja.diff import diff_texts

    sents = [f"{SENTENCE}{i}。" for i in range(20_000)]  # about 800k characters on one line
    a = "".join(sents)
    b = "".join(s.replace("書面", "電磁的方法") if i % 5000 == 0 else s for i, s in enumerate(sents))
    got: list = []
    w = work_of(lambda: got.append(diff_texts(a, b)))
    d = got[0]
    # A character diff of the whole line (6e11 cells) took minutes: at most CELLS cells a character (read: 9), and
    # a few interpreter events a character (read: 0.04).
    assert w.cells <= CELLS * (len(a) + len(b)) and w.python <= 4 * (len(a) + len(b)), w
    st = d.stats
    assert (st.replaced_chars_from, st.replaced_chars_to, st.inserted_chars, st.deleted_chars) == (8, 8, 12, 0)
    assert "".join(a[o[1] : o[2]] for o in d.ops) == a and "".join(b[o[3] : o[4]] for o in d.ops) == b


def test_one_huge_article_scales_too():
    def article(n: int):  # type: ignore[no-untyped-def]
        return parse(
            "第一条　次に掲げる事項\n"
            + "".join(f"{'一二三四五六七八九'[i % 9]}　前号及び第一条第一項の事項\n" for i in range(n))
            + "".join(f"{i}　前項の規定を準用する。\n" for i in range(2, n))
        )

    small, large = article(3_000), article(12_000)
    assert len(large.articles) == 1 and len(large.articles[0].paragraphs) == 11_999
    # 4x the paragraphs: every lookup used to rebuild the article's paragraph and item lists (quadratic).
    assert_grows_at_most(work_of(lambda: scan(small)), work_of(lambda: scan(large)), 6)
