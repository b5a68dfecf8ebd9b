"""Logprob mode's label tokens (issue 62, item 17): an HF-tokenized engine found the tokens that spell a label by
decoding its whole vocabulary through xgrammar (4-8 s for Gemma 3's 262,144 tokens, before the first logprob
answer); it now looks them up by the forms vocabularies write them in. The oracle is that full scan."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("xgrammar")
pytestmark = pytest.mark.engine

from transformers import AutoTokenizer, PreTrainedTokenizerFast  # noqa: E402

from offline_eval.inference.backends.base import hf_spelling, hf_vocab_bytes  # noqa: E402

LABELS = ["0", "1", "A", "E", "イ", "ロ", "正", "誤", " 1", "\n", " ", "\t", "1.", "はい"]
ROOT = Path(__file__).resolve().parents[1]


def _byte_level_bpe() -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer (GPT-2's scheme), trained here on a few lines: no download."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    text = ["次の記述は正しいか。正しければ1、誤っていれば0とだけ答えなさい。", "イ ロ ハ\n1 0 A E\tはい いいえ"] * 50
    tok.train_from_iterator(
        text, trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="0")


@pytest.mark.parametrize("which", ["tiny", "gemma", "byte-level"])
def test_label_tokens_are_the_full_scans(which):
    if which == "byte-level":
        tok = _byte_level_bpe()
    else:
        folder = ROOT / "models" / ("tiny/hf" if which == "tiny" else "gemma-3-270m/hf")
        if not folder.is_dir():
            pytest.skip(f"no {folder}: run scripts/setup.sh")
        tok = AutoTokenizer.from_pretrained(folder)
    table, vocab = hf_vocab_bytes(tok), tok.get_vocab()
    found = 0
    for label in LABELS:
        want = label.encode("utf-8")
        full = [i for i, b in enumerate(table) if b == want]
        assert hf_spelling(vocab, want) == full, (which, label)
        found += bool(full)
    assert found >= 6, which  # the labels are in these vocabularies: the lookup is tested, not its empty case
