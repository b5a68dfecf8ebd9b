"""Train, save, load and run the multi-source regression scorer (the authors' architecture: model.py)."""

from __future__ import annotations

import json
import math
import os
import random
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from offline_eval.runtime.errors import first_line
from offline_eval.tasks.kit import InputError

Example = dict[str, Any]  # query, answer, comment, conclusion, score (0-100)

# 2: the authors' module names and head (bert_reasoning/bert_ans/bert_content, extractor, fusion, regressor).
# 1 (no `format` in scorer_config.json): offline-eval's earlier architecture; it cannot be converted.
SCORER_FORMAT = 2


@dataclass
class ScorerConfig:
    encoder: str  # the BERT-like folder the encoders were built from (for its tokenizer and config)
    max_length: int = 512
    dropout: float = 0.1
    format: int = SCORER_FORMAT


def _names(keys: Sequence[str], shown: int = 4) -> str:
    more = f" and {len(keys) - shown} more" if len(keys) > shown else ""
    return ", ".join(keys[:shown]) + more


def load_strict(model: Any, state: Mapping[str, Any], file: str) -> None:
    """`load_state_dict(strict=True)`, with a mismatch reported as one line naming the keys."""
    own = model.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    shapes = [
        f"{k} {tuple(state[k].shape)} in the file, {tuple(v.shape)} here"
        for k, v in own.items()
        if k in state and tuple(state[k].shape) != tuple(v.shape)
    ]
    if missing or unexpected or shapes:
        parts = [
            f"{len(missing)} missing ({_names(missing)})" if missing else "",
            f"{len(unexpected)} unexpected ({_names(unexpected)})" if unexpected else "",
            f"{len(shapes)} of another shape ({_names(shapes, 2)})" if shapes else "",
        ]
        raise InputError(
            "the weights do not fit the scorer's architecture: " + "; ".join(p for p in parts if p), file=file
        )
    model.load_state_dict(state, strict=True)


def _without_position_ids(state: dict[str, Any]) -> dict[str, Any]:
    """transformers before 4.31 saved BERT's `embeddings.position_ids` (a constant 0..n-1 buffer, not a weight);
    later versions neither save nor accept it. Such a buffer is dropped only if it is exactly that constant."""
    import torch

    out = {}
    for k, v in state.items():
        if k.endswith("embeddings.position_ids") and torch.equal(
            v.reshape(-1).long(), torch.arange(v.numel(), dtype=torch.long)
        ):
            continue
        out[k] = v
    return out


def resolve_encoder(folder: Path, encoder: str) -> str:
    """A scorer's encoder path as its config gives it: relative to the scorer folder (older folders: to the working
    directory)."""
    if Path(encoder).is_absolute():
        return encoder
    beside = folder / encoder
    return os.path.normpath(beside) if beside.is_dir() or not Path(encoder).is_dir() else encoder


def scorer_files(folder: str | Path) -> list[str]:
    """The scorer folder and its encoder's folder: what a sweep's scores are made with, for its provenance."""
    d = Path(folder)
    try:
        encoder = json.loads((d / "scorer_config.json").read_text(encoding="utf-8")).get("encoder")
    except (OSError, ValueError, AttributeError):
        return [str(d)]
    return [str(d), resolve_encoder(d, encoder)] if isinstance(encoder, str) else [str(d)]


def content_text(query: str, answer: str) -> str:
    """The single text `bert_content` reads."""
    return f"<query>:{query}</query>\n\n<content>:{answer}</content>"


def inputs(example: Example) -> tuple[str, str, str]:
    """The three texts the scorer reads, as the authors' predict(reasoning, ans, content) gets them
    (src/evaluator_request.py line 143): the comment, the conclusion, and the query and answer as
    `<query>:{query}</query>\n\n<content>:{answer}</content>`, the input_content their evaluator read."""
    return example["comment"], example["conclusion"], content_text(example["query"], example["answer"])


class Scorer:
    """Tokenizer + model, always in eval mode for prediction (dropout never comes back on)."""

    def __init__(self, config: ScorerConfig, model: Any = None) -> None:
        import torch
        from transformers import AutoConfig, AutoTokenizer

        from .model import MultiSourceScorer

        if not Path(config.encoder).is_dir():
            raise InputError("the encoder folder does not exist (a local BERT-like model folder)", file=config.encoder)
        self.config, self.torch = config, torch
        self.tokenizer = AutoTokenizer.from_pretrained(config.encoder)
        self.model = model or MultiSourceScorer(AutoConfig.from_pretrained(config.encoder), config.dropout)

    def batch(self, examples: Sequence[Example], pad_to_max_length: bool = True) -> dict[str, dict[str, Any]]:
        """The authors' inputs (`inputs`): each text tokenized on its own, truncated and padded to max_length.
        Padding to the batch's longest text instead gives the same scores (padding is masked out and comes after
        every real token; tested) for less work: training uses it."""
        kw = dict(
            truncation=True,
            max_length=self.config.max_length,
            return_tensors="pt",
            padding="max_length" if pad_to_max_length else "longest",
        )
        texts = [inputs(e) for e in examples]
        return {
            "reasoning": dict(self.tokenizer([t[0] for t in texts], **kw)),
            "ans": dict(self.tokenizer([t[1] for t in texts], **kw)),
            "content": dict(self.tokenizer([t[2] for t in texts], **kw)),
        }

    def predict(self, examples: Sequence[Example]) -> list[float]:
        """Scores on the 0-100 scale, to 4 decimals; deterministic, and each the same whatever else is scored
        with it (see `scores`)."""
        return [round(x, 4) for x in self.scores(examples)]

    def scores(self, examples: Sequence[Example]) -> list[float]:
        """The model's scores (0-100), unrounded. Each example has a forward pass of its own, of one fixed shape
        (one row of max_length tokens per encoder): the kernels a batch picks, and the order they sum in, depend
        on how many rows share it, so an output batched with others scored 1e-5 to 2e-4 points away from its
        score beside other outputs, and a sweep and its --fresh re-run read 57.8355 and 57.8356. The rows are
        padded to max_length anyway (the authors' inputs), so one at a time costs little more."""
        self.model.eval()
        out: list[float] = []
        with self.torch.inference_mode():
            for e in examples:
                out += (self.model(**self.batch([e])) * 100).tolist()
        return [float(x) for x in out]

    def save(self, out: str | Path) -> None:
        from safetensors.torch import save_file

        d = Path(out)
        d.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().contiguous() for k, v in self.model.state_dict().items()}
        save_file(state, str(d / "scorer.safetensors"))
        config = asdict(self.config)
        if not Path(self.config.encoder).is_absolute():  # a scorer folder moves with its encoder, whatever the cwd
            config["encoder"] = os.path.relpath(os.path.abspath(self.config.encoder), os.path.abspath(d))
        (d / "scorer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Scorer:
        from safetensors.torch import load_file

        d = Path(path)
        cfg_file, weights = d / "scorer_config.json", d / "scorer.safetensors"
        if not cfg_file.is_file():
            raise InputError("not a scorer folder (no scorer_config.json)", file=str(d))
        try:
            raw = json.loads(cfg_file.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise InputError(f"not valid JSON ({e})", file=str(cfg_file)) from None
        if not isinstance(raw, dict):
            raise InputError("expected a JSON object", file=str(cfg_file))
        if raw.get("format") != SCORER_FORMAT:
            raise InputError(
                f"written in scorer format {raw.get('format', 1)}, this offline-eval reads format "
                f"{SCORER_FORMAT} (the LegalEval-Q authors' architecture); retrain it with "
                "`offline-eval legaleval-q train`",
                file=str(cfg_file),
                field="format",
            )
        known = {f.name for f in fields(ScorerConfig)}
        for key in raw:
            if key not in known:
                raise InputError(f"unknown key (known: {', '.join(sorted(known))})", file=str(cfg_file), field=key)
        if "encoder" not in raw:
            raise InputError("missing", file=str(cfg_file), field="encoder")
        if not weights.is_file():
            raise InputError("not a scorer folder (no scorer.safetensors)", file=str(d))
        if isinstance(raw["encoder"], str):
            raw["encoder"] = resolve_encoder(d, raw["encoder"])
        s = cls(ScorerConfig(**raw))
        try:
            state = load_file(str(weights))
        except Exception as e:  # safetensors raises its own SafetensorError (or OSError) for a damaged file
            raise InputError(f"not a readable safetensors file ({e})", file=str(weights)) from None
        load_strict(s.model, state, str(weights))
        s.model.eval()
        return s

    @classmethod
    def from_author_checkpoint(cls, pth: str | Path, encoder: str, **config: Any) -> Scorer:
        """The authors' released `.pth` (a dict with `state_dict`), loaded with strict key matching. It is read
        with weights_only=True: tensors and plain containers only, never arbitrary pickled objects."""
        import pickle

        import torch

        if not Path(pth).is_file():
            raise InputError("no such checkpoint file", file=str(pth))
        try:
            blob = torch.load(str(pth), map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as e:
            # torch's message is many lines of advice; the reason is the text after "WeightsUnpickler error:".
            why = re.search(r"WeightsUnpickler error:\s*(.+?)(?:\.\s|\n|$)", str(e))
            reason = why.group(1).strip() if why else first_line(e)
            if "Unsupported global" in reason:
                raise InputError(
                    f"refused: the checkpoint holds objects other than tensors ({reason})", file=str(pth)
                ) from None
            raise InputError(f"not a torch checkpoint ({reason})", file=str(pth)) from None
        except (RuntimeError, EOFError, OSError) as e:
            raise InputError(f"not a torch checkpoint ({first_line(e) or type(e).__name__})", file=str(pth)) from None
        state = blob.get("state_dict", blob) if isinstance(blob, dict) else None
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise InputError("expected a dict with 'state_dict' (parameter name -> tensor)", file=str(pth))
        if state and all(k.startswith("module.") for k in state):  # saved from torch.nn.DataParallel
            state = {k[len("module.") :]: v for k, v in state.items()}
        s = cls(ScorerConfig(encoder=encoder, **config))
        load_strict(s.model, _without_position_ids(state), str(pth))
        s.model.eval()
        return s


def with_error_inputs(examples: list[Example], seed: int) -> list[Example]:
    """The paper's negatives: each answer paired with another query's, scored 0."""
    rng = random.Random(seed)
    out = []
    for e in examples:
        others = [x for x in examples if x["query"] != e["query"]]
        if others:
            wrong = rng.choice(others)
            out.append({**e, "answer": wrong["answer"], "score": 0.0})
    return examples + out


def train(
    examples: list[Example],
    encoder: str,
    out: str | Path,
    *,
    epochs: int = 20,
    lr: float = 2e-5,
    batch_size: int = 16,
    val_fraction: float = 0.2,
    patience: int = 3,
    seed: int = 0,
    error_input: bool = False,
    max_length: int = 512,
    progress: bool | None = None,
) -> dict[str, Any]:
    """MSE on score/100 with AdamW; the best validation epoch is kept (early stopping)."""
    import torch
    from tqdm import tqdm

    torch.manual_seed(seed)
    rng = random.Random(seed)
    data = list(examples)
    rng.shuffle(data)
    n_val = max(1, int(round(len(data) * val_fraction)))
    val, tr = data[:n_val], data[n_val:]
    if error_input:
        tr = with_error_inputs(tr, seed)
    scorer = Scorer(ScorerConfig(encoder=encoder, max_length=max_length))
    scorer.model.load_encoder_weights(encoder)
    opt = torch.optim.AdamW(scorer.model.parameters(), lr=lr)
    history, best, best_state, stale = [], math.inf, None, 0
    for epoch in range(1, epochs + 1):
        scorer.model.train()
        order = list(range(len(tr)))
        rng.shuffle(order)
        total = 0.0
        for k in tqdm(
            range(0, len(order), batch_size),
            desc=f"epoch {epoch}",
            leave=False,
            disable=True if progress is False else None,
        ):
            ex = [tr[i] for i in order[k : k + batch_size]]
            target = torch.tensor([e["score"] / 100.0 for e in ex], dtype=torch.float32)
            loss = torch.nn.functional.mse_loss(scorer.model(**scorer.batch(ex, pad_to_max_length=False)), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(ex)
        val_loss = _loss(scorer, val)
        history.append({"epoch": epoch, "train_loss": total / len(tr), "val_loss": val_loss})
        print(f"epoch {epoch}: train loss {total / len(tr):.5f}, validation loss {val_loss:.5f}", file=sys.stderr)
        if val_loss < best - 1e-6:
            best, stale = val_loss, 0
            best_state = {k: v.detach().clone() for k, v in scorer.model.state_dict().items()}
        else:
            stale += 1
            if stale >= patience:
                break
    if best_state is not None:
        scorer.model.load_state_dict(best_state)
    scorer.save(out)
    baseline = _mean_baseline(tr, val)
    report = {
        "history": history,
        "best_val_loss": best,
        "mean_predictor_val_loss": baseline,
        "n_train": len(tr),
        "n_val": len(val),
    }
    (Path(out) / "training.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    return report


def _loss(scorer: Scorer, examples: Sequence[Example]) -> float:
    pred = scorer.predict(examples)
    return sum((p / 100 - e["score"] / 100) ** 2 for p, e in zip(pred, examples)) / len(examples)


def _mean_baseline(train_set: Sequence[Example], val: Sequence[Example]) -> float:
    mu = sum(e["score"] for e in train_set) / len(train_set) / 100
    return sum((mu - e["score"] / 100) ** 2 for e in val) / len(val)
