"""Train, save, load and run the multi-source regression scorer."""

from __future__ import annotations

import json
import math
import random
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from ...errors import InputError

Example = dict[str, Any]  # query, answer, comment, conclusion, score (0-100)


@dataclass
class ScorerConfig:
    encoder: str  # the BERT-like folder the encoders were built from (for its tokenizer and config)
    max_length: int = 256
    dropout: float = 0.1


# The authors' released checkpoint names its parts differently; their prefix -> ours.
AUTHOR_KEY_MAP = {
    "answer_encoder.": "enc_answer.", "comment_encoder.": "enc_comment.", "conclusion_encoder.": "enc_conclusion.",
    "answer_layer_mix.": "mix_answer.", "comment_layer_mix.": "mix_comment.",
    "conclusion_layer_mix.": "mix_conclusion.", "fusion.gate.": "gates.", "fusion.proj.": "proj.",
    "regressor.": "head.",
}


class Scorer:
    """Tokenizer + model, always in eval mode for prediction (dropout never comes back on)."""

    def __init__(self, config: ScorerConfig, model: Any = None) -> None:
        import torch
        from transformers import AutoConfig, AutoTokenizer

        from .model import MultiSourceScorer

        self.config, self.torch = config, torch
        self.tokenizer = AutoTokenizer.from_pretrained(config.encoder)
        self.model = model or MultiSourceScorer(AutoConfig.from_pretrained(config.encoder), config.dropout)

    def batch(self, examples: Sequence[Example]) -> dict[str, dict[str, Any]]:
        t, n = self.tokenizer, self.config.max_length
        kw = dict(truncation=True, max_length=n, padding=True, return_tensors="pt")
        return {"answer": dict(t([e["query"] for e in examples], [e["answer"] for e in examples], **kw)),
                "comment": dict(t([e["comment"] for e in examples], **kw)),
                "conclusion": dict(t([e["conclusion"] for e in examples], **kw))}

    def predict(self, examples: Sequence[Example], batch_size: int = 16) -> list[float]:
        """Scores on the 0-100 scale; deterministic."""
        self.model.eval()
        out: list[float] = []
        with self.torch.inference_mode():
            for k in range(0, len(examples), batch_size):
                out += (self.model(**self.batch(examples[k:k + batch_size])) * 100).tolist()
        return [round(float(x), 4) for x in out]

    def save(self, out: str | Path) -> None:
        from safetensors.torch import save_file

        d = Path(out)
        d.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().contiguous() for k, v in self.model.state_dict().items()}
        save_file(state, str(d / "scorer.safetensors"))
        (d / "scorer_config.json").write_text(json.dumps(asdict(self.config), indent=2), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> "Scorer":
        from safetensors.torch import load_file

        d = Path(path)
        if not (d / "scorer_config.json").is_file():
            raise InputError("not a scorer folder (no scorer_config.json)", file=str(d))
        s = cls(ScorerConfig(**json.loads((d / "scorer_config.json").read_text(encoding="utf-8"))))
        s.model.load_state_dict(load_file(str(d / "scorer.safetensors")))
        s.model.eval()
        return s

    @classmethod
    def from_author_checkpoint(cls, pth: str | Path, encoder: str, key_map: dict[str, str] | None = None,
                               **config: Any) -> "Scorer":
        """The authors' released `.pth` (a dict with `state_dict`), read with weights_only=True: tensors and
        plain containers only, never arbitrary pickled objects."""
        import pickle

        import torch

        try:
            blob = torch.load(str(pth), map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as e:
            raise InputError(f"refused: the checkpoint holds objects other than tensors ({str(e).splitlines()[0]})",
                             file=str(pth)) from None
        state = blob.get("state_dict", blob) if isinstance(blob, dict) else None
        if not isinstance(state, dict):
            raise InputError("expected a dict with 'state_dict'", file=str(pth))
        mapping = key_map or AUTHOR_KEY_MAP
        renamed = {}
        for k, v in state.items():
            k = k.removeprefix("module.")
            for old, new in mapping.items():
                if k.startswith(old):
                    k = new + k[len(old):]
                    break
            renamed[k] = v
        s = cls(ScorerConfig(encoder=encoder, **config))
        missing, unexpected = s.model.load_state_dict(renamed, strict=False)
        if missing or unexpected:
            raise InputError(f"checkpoint keys do not match: {len(missing)} missing (e.g. {missing[:2]}), "
                             f"{len(unexpected)} unexpected (e.g. {unexpected[:2]}); pass a key map",
                             file=str(pth))
        s.model.eval()
        return s


def with_error_inputs(examples: list[Example], seed: int) -> list[Example]:
    """The paper's negatives: each answer paired with another query's, scored 0."""
    rng = random.Random(seed)
    out = []
    for i, e in enumerate(examples):
        others = [x for x in examples if x["query"] != e["query"]]
        if others:
            wrong = rng.choice(others)
            out.append({**e, "answer": wrong["answer"], "score": 0.0})
    return examples + out


def train(examples: list[Example], encoder: str, out: str | Path, *, epochs: int = 20, lr: float = 2e-5,
          batch_size: int = 16, val_fraction: float = 0.2, patience: int = 3, seed: int = 0,
          error_input: bool = False, max_length: int = 256, progress: bool | None = None) -> dict[str, Any]:
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
        for k in tqdm(range(0, len(order), batch_size), desc=f"epoch {epoch}", leave=False,
                      disable=True if progress is False else None):
            ex = [tr[i] for i in order[k:k + batch_size]]
            target = torch.tensor([e["score"] / 100.0 for e in ex], dtype=torch.float32)
            loss = torch.nn.functional.mse_loss(scorer.model(**scorer.batch(ex)), target)
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
    report = {"history": history, "best_val_loss": best, "mean_predictor_val_loss": baseline,
              "n_train": len(tr), "n_val": len(val)}
    (Path(out) / "training.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    return report


def _loss(scorer: Scorer, examples: Sequence[Example]) -> float:
    pred = scorer.predict(examples)
    return sum((p / 100 - e["score"] / 100) ** 2 for p, e in zip(pred, examples)) / len(examples)


def _mean_baseline(train_set: Sequence[Example], val: Sequence[Example]) -> float:
    mu = sum(e["score"] for e in train_set) / len(train_set) / 100
    return sum((mu - e["score"] / 100) ** 2 for e in val) / len(val)
