"""What logprob mode pays before its first answer on an HF-tokenized engine (vLLM, transformers): finding every
token that spells a label. Before: xgrammar's byte table of the whole vocabulary, scanned; now: a lookup of the
forms a vocabulary writes the label in. Both, side by side, on the same tokenizer, with the same ids.

    .venv/bin/python scripts/bench_label_tokens.py [--model models/gemma-3-270m/hf] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from transformers import AutoTokenizer

from offline_eval.inference.backends.base import hf_spelling, hf_vocab_bytes

LABELS = ("0", "1")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/gemma-3-270m/hf")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    tok = AutoTokenizer.from_pretrained(a.model)
    scans, lookups = [], []
    for _ in range(a.repeats):  # a fresh engine load computes them again: no cache between repeats
        t = time.perf_counter()
        table = hf_vocab_bytes(tok)
        old = [[i for i, b in enumerate(table) if b == x.encode()] for x in LABELS]
        scans.append(time.perf_counter() - t)
        t = time.perf_counter()
        vocab = tok.get_vocab()
        new = [hf_spelling(vocab, x.encode()) for x in LABELS]
        lookups.append(time.perf_counter() - t)
        assert new == old, (old, new)
    scan, lookup = statistics.median(scans), statistics.median(lookups)
    print(f"{a.model}: {len(tok)} tokens, labels {list(LABELS)} -> {old}")
    print(f"full scan (xgrammar's table): {scan:.4f} s; lookup: {lookup:.4f} s; scan / lookup = {scan / lookup:.1f}")


if __name__ == "__main__":
    main()
