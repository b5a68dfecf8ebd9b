"""The LegalEval-Q authors' regression scorer ("BERT, tri inputs"), module for module, so that their released
`best_regression_bert_tri_inputs.pth` loads with strict key matching and a model trained here is
interchangeable with theirs.

    comment            ─ bert_reasoning ─┐
    conclusion         ─ bert_ans       ─┼─ extractor (shared): CLS of hidden layers in 3 groups, softmax
    <query>…<content>… ─ bert_content   ─┘  weights within a group, a per-dimension softmax gate -> h-vector
    r, a, c -> dropout each -> g1, g2 = split(fusion.gate([r; a; c]))
            -> fused = g1 * fusion.projection([r; a; c]) + g2 * r
    fused -> regressor (h -> 512 -> 256 -> 1, residual blocks) -> sigmoid; the score is that * 100

Encoders of other depths than 12 (the authors' BERT-base): see `layer_groups`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

ENCODERS = ("bert_reasoning", "bert_ans", "bert_content")


def layer_groups(n_layers: int) -> list[int]:
    """Sizes of the low/mid/high groups over hidden layers 1..n_layers (hidden_states[0], the embeddings, is
    not used): contiguous, as equal as possible, an extra layer going to the lower groups first. Every layer
    has its own weight, so the weights of a group have as many values as the group has layers. For 12
    layers this is the authors' [1:5], [5:9], [9:13] with 4 weights each; e.g. 6 -> [2, 2, 2], 7 -> [3, 2, 2],
    13 -> [5, 4, 4]."""
    if n_layers < 3:
        raise ValueError(f"the encoder has {n_layers} hidden layers; the three layer groups need at least 3")
    base, extra = divmod(n_layers, 3)
    return [base + (1 if k < extra else 0) for k in range(3)]


class HierarchicalExtractor(nn.Module):
    """CLS vectors of the hidden layers -> low/mid/high groups, each a softmax-weighted sum -> a per-dimension
    softmax gate on the groups' mean -> sum of gate * group. One instance is shared by the three encoders."""

    def __init__(self, hidden: int, n_layers: int) -> None:
        super().__init__()
        self.sizes = layer_groups(n_layers)
        low, mid, high = self.sizes
        self.weights_low = nn.Parameter(torch.ones(low))
        self.weights_mid = nn.Parameter(torch.ones(mid))
        self.weights_high = nn.Parameter(torch.ones(high))
        self.gate = nn.Sequential(nn.Linear(hidden, hidden), nn.Softmax(dim=-1))

    def forward(self, hidden_states: tuple[torch.Tensor, ...]) -> torch.Tensor:
        cls = torch.stack([h[:, 0] for h in hidden_states[1:]], dim=1)  # (B, L, h)
        if cls.shape[1] != sum(self.sizes):
            raise ValueError(
                f"the encoder returned {cls.shape[1]} hidden layers; the extractor was built for {sum(self.sizes)}"
            )
        groups = torch.split(cls, self.sizes, dim=1)
        weights = (self.weights_low, self.weights_mid, self.weights_high)
        mixed = [(torch.softmax(w, dim=0)[None, :, None] * g).sum(dim=1) for w, g in zip(weights, groups)]
        g = self.gate(torch.stack(mixed, dim=0).mean(dim=0))
        return sum(g * m for m in mixed)


class ResidualBlock(nn.Module):
    def __init__(self, d: int, dropout: float) -> None:
        super().__init__()
        self.shortcut = nn.Identity()
        self.linear = nn.Sequential(
            nn.Linear(d, d), nn.LayerNorm(d), nn.GELU(), nn.Dropout(dropout), nn.Linear(d, d), nn.LayerNorm(d)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.shortcut(x) + self.linear(x)


class GatedFusion(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.gate = nn.Sequential(nn.Linear(3 * hidden, 2 * hidden), nn.Sigmoid())
        self.projection = nn.Sequential(nn.Linear(3 * hidden, hidden), nn.LayerNorm(hidden))

    def forward(self, reasoning: torch.Tensor, ans: torch.Tensor, content: torch.Tensor) -> torch.Tensor:
        x = torch.cat([reasoning, ans, content], dim=-1)
        g1, g2 = self.gate(x).split(self.hidden, dim=-1)
        return g1 * self.projection(x) + g2 * reasoning


class MultiSourceScorer(nn.Module):
    """Parameter names are the authors' (`bert_reasoning.…`, `extractor.…`, `fusion.…`, `regressor.…`)."""

    def __init__(self, encoder_config: Any, dropout: float = 0.1) -> None:
        super().__init__()
        from transformers import AutoModel

        h, n = encoder_config.hidden_size, encoder_config.num_hidden_layers
        self.bert_reasoning = AutoModel.from_config(encoder_config)
        self.bert_ans = AutoModel.from_config(encoder_config)
        self.bert_content = AutoModel.from_config(encoder_config)
        self.extractor = HierarchicalExtractor(h, n)
        self.dropout = nn.Dropout(dropout)
        self.fusion = GatedFusion(h)
        self.regressor = nn.Sequential(
            nn.Linear(h, 512),
            nn.LayerNorm(512),
            nn.GELU(),
            ResidualBlock(512, dropout),
            nn.Linear(512, 256),
            nn.LayerNorm(256),
            nn.GELU(),
            ResidualBlock(256, dropout),
            nn.Linear(256, 1),
            nn.Sigmoid(),
        )

    def load_encoder_weights(self, path: str) -> None:
        """Start all three encoders from the same pre-trained BERT-like model (safetensors only)."""
        from transformers import AutoModel

        pre = AutoModel.from_pretrained(path, use_safetensors=True).state_dict()
        for name in ENCODERS:
            getattr(self, name).load_state_dict(pre)

    def _feature(self, encoder: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.extractor(encoder(**batch, output_hidden_states=True).hidden_states)

    def forward(
        self, reasoning: dict[str, torch.Tensor], ans: dict[str, torch.Tensor], content: dict[str, torch.Tensor]
    ) -> torch.Tensor:
        """Scores in [0, 1] (times 100 for the 0-100 scale), shape (B,). `reasoning` is the tokenized comment,
        `ans` the conclusion, `content` scorer.content_text of query and answer."""
        r = self.dropout(self._feature(self.bert_reasoning, reasoning))
        a = self.dropout(self._feature(self.bert_ans, ans))
        c = self.dropout(self._feature(self.bert_content, content))
        return self.regressor(self.fusion(r, a, c)).squeeze(-1)
