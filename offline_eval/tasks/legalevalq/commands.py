"""`offline-eval legaleval-q train|predict`: LegalEval-Q's regression scorer, registered by the task."""

from __future__ import annotations

import argparse
import os
from typing import Any

from offline_eval.metrics.adjscore import summarize
from offline_eval.runtime.errors import is_url
from offline_eval.runtime.fileio import dumps, write_jsonl_atomic
from offline_eval.tasks.kit import InputError

from .data import load_annotated
from .scorer import Scorer, train


def add_commands(sub: Any) -> None:
    lq = sub.add_parser("legaleval-q", help="LegalEval-Q's regression scorer: train and predict")
    lqs = lq.add_subparsers(dest="leq_command", required=True)
    lt = lqs.add_parser("train", help="train the multi-source scorer on annotated JSONL")
    lt.add_argument("--data", required=True, help="JSONL of {query, answer, comment, conclusion, score 0-100}")
    lt.add_argument("--encoder", required=True, help="a local BERT-like model folder")
    lt.add_argument("--out", required=True)
    lt.add_argument("--epochs", type=int, default=20)
    lt.add_argument("--lr", type=float, default=2e-5, help="2e-5 suits a pre-trained BERT; a random one needs ~1e-3")
    lt.add_argument("--batch-size", type=int, default=16)
    lt.add_argument("--val-fraction", type=float, default=0.2)
    lt.add_argument("--patience", type=int, default=3, help="epochs without validation gain before stopping")
    lt.add_argument("--max-length", type=int, default=256)
    lt.add_argument("--seed", type=int, default=0)
    lt.add_argument("--error-input", action="store_true", help="add negatives: answers swapped across queries, score 0")
    lt.set_defaults(func=_train)
    lp = lqs.add_parser("predict", help="score (query, answer, comment, conclusion) rows")
    lp.add_argument("--data", required=True)
    lp.add_argument("--scorer", help="a folder written by train")
    lp.add_argument("--from-pth", help="the authors' released .pth checkpoint instead of --scorer")
    lp.add_argument("--encoder", help="with --from-pth: the BERT-like folder it was trained on")
    lp.add_argument("--out", help="write the rows with a `predicted` score here (JSONL)")
    lp.set_defaults(func=_predict)


def _train(a: argparse.Namespace) -> int:

    if is_url(a.encoder) or not os.path.isdir(a.encoder):
        raise InputError("encoder must be a local BERT-like model folder", file=a.encoder)
    rep = train(
        load_annotated(a.data),
        a.encoder,
        a.out,
        epochs=a.epochs,
        lr=a.lr,
        batch_size=a.batch_size,
        val_fraction=a.val_fraction,
        patience=a.patience,
        seed=a.seed,
        error_input=a.error_input,
        max_length=a.max_length,
    )
    print(
        f"wrote {a.out}/scorer.safetensors: best validation loss {rep['best_val_loss']:.5f} "
        f"(predicting the mean: {rep['mean_predictor_val_loss']:.5f})"
    )
    return 0


def _predict(a: argparse.Namespace) -> int:

    if a.from_pth:
        if not a.encoder:
            raise InputError("--from-pth needs --encoder (the BERT-like folder the checkpoint was trained on)")
        scorer = Scorer.from_author_checkpoint(a.from_pth, a.encoder)
    else:
        scorer = Scorer.load(a.scorer)
    rows = load_annotated(a.data)
    scores = scorer.predict(rows)
    if a.out:
        write_jsonl_atomic(a.out, [{**r, "predicted": s} for r, s in zip(rows, scores)])
    print(dumps(summarize(scores)))
    return 0
