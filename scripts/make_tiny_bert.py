#!/usr/bin/env python
"""Build a tiny random-weight BERT with its own WordPiece vocabulary, offline and deterministically.

    python scripts/make_tiny_bert.py OUT

It stands in for a real BERT-like encoder in LegalEval-Q's regression scorer (tests and the demo). The
WordPiece vocabulary holds the characters of scripts/tiny_corpus.txt (the frozen sample text). It has 12 layers, as the authors' BERT-base,
so the scorer's layer groups are theirs (hidden_states[1:5], [5:9], [9:13]).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_tiny_model import CORPUS, corpus_lines  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--data", type=Path, default=CORPUS)
    ap.add_argument("--layers", type=int, default=12, help="12 = the authors' three layer groups of four")
    ap.add_argument("--hidden", type=int, default=64)
    a = ap.parse_args(argv)

    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    a.out.mkdir(parents=True, exist_ok=True)
    # A character-level WordPiece vocabulary (every character, and its ## continuation form), sorted: the
    # tokenizers trainer breaks frequency ties differently from run to run, and this must be reproducible.
    chars = sorted({c for line in corpus_lines(a.data) for c in line if not c.isspace()})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + [f"##{c}" for c in chars]
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
        # transformers 5 ignores vocab_file= in the constructor; from_pretrained on the folder reads it.
        tok = BertTokenizerFast.from_pretrained(
            tmp, do_lower_case=False, tokenize_chinese_chars=True, strip_accents=False
        )
    tok.save_pretrained(str(a.out))
    torch.manual_seed(1234)
    cfg = BertConfig(
        vocab_size=len(tok),
        hidden_size=a.hidden,
        num_hidden_layers=a.layers,
        num_attention_heads=2,
        intermediate_size=a.hidden * 2,
        max_position_embeddings=512,
    )
    BertModel(cfg).save_pretrained(str(a.out), safe_serialization=True)
    print(f"tiny BERT ({a.layers} layers, vocab {len(tok)}) written to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
