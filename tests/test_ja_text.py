"""Numerals, normalisation, morphemes and token counts."""

from __future__ import annotations

import pytest

from offline_eval.ja.normalize import char_count, normalize
from offline_eval.ja.numerals import article_label, int_to_kanji, kanji_to_int, to_int
from offline_eval.ja.tokenize import model_token_count, morpheme_count, morpheme_spans, morphemes, tagger


@pytest.mark.parametrize(
    "text,want",
    [
        ("百九", 109),
        ("二十三", 23),
        ("一千", 1000),
        ("千", 1000),
        ("23", 23),
        ("２３", 23),
        ("十", 10),
        ("三百五十一", 351),
    ],
)
def test_article_numbers(text, want):
    assert to_int(text) == want


def test_labels_and_formatting():
    assert article_label(23, 2) == "23-2" and article_label(109) == "109"
    assert kanji_to_int("二〇二五") == 2025 and kanji_to_int("一万二千三百四十五") == 12345


def test_kanji_round_trip_both_ways():
    for n in range(0, 3001):
        assert kanji_to_int(int_to_kanji(n)) == n
    assert [int_to_kanji(n) for n in (1, 10, 11, 20, 100, 109, 110, 1000, 1001)] == [
        "一",
        "十",
        "十一",
        "二十",
        "百",
        "百九",
        "百十",
        "千",
        "千一",
    ]
    with pytest.raises(ValueError):
        kanji_to_int("第")


def test_normalize_keeps_legal_punctuation():
    assert normalize("第１２条（目的）　甲は「乙」に：ＡＢＣ ｶﾀｶﾅ！") == "第12条（目的）　甲は「乙」に：ABC カタカナ！"
    assert normalize("①２") == "12"
    assert normalize("a\nb") == "a\nb"


def test_char_count_is_nfc_code_points():
    assert char_count("が") == 1 and char_count("か\u3099") == 1 and char_count("契約") == 2


def test_morphemes_cover_the_text_and_reuse_one_tagger():
    text = "第1条（目的）\n本契約は、甲が乙に\n\n委託する。 test  x"
    words = morphemes(text)
    assert tagger() is tagger()
    assert len(words) == morpheme_count(text)
    import fugashi

    assert [w.surface for w in fugashi.Tagger()(text)] == words  # the same tokens as raw fugashi
    spans = morpheme_spans(text)
    assert [text[a:b] for a, b in spans] == words
    assert all(b <= c for (_, b), (c, _) in zip(spans, spans[1:]))


def test_model_token_count(tiny):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny / "hf"))
    text = "第百九条　契約は書面でしなければならない。"
    assert model_token_count(text, tok) == len(tok.encode(text, add_special_tokens=False))
    assert model_token_count(text, lambda s: list(s.encode())) == len(text.encode())
