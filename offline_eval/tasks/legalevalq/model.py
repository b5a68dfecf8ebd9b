"""The multi-source regression scorer: three BERT-like encoders, layer-group mixing, gated fusion, MLP head.

    query+answer ─ encoder ─┐
    comment      ─ encoder ─┼─ per encoder: CLS of every hidden layer, three equal layer groups, softmax
    conclusion   ─ encoder ─┘  weights within each group, a softmax gate across groups -> one d-vector
    [a; c; k] -> dropout -> g1, g2 = split(sigmoid(Linear(3d -> 2d)))
              -> fused = g1 * LayerNorm(Linear(3d -> d)) + g2 * c
    fused -> MLP (d -> 512 -> 256 -> 1, LayerNorm + GELU + residual blocks) -> sigmoid * 100
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def _group_sizes(n: int) -> list[int]:
    if n < 3:
        raise ValueError(f"the encoder has {n} hidden layers; layer-group mixing needs at least 3")
    base, extra = divmod(n, 3)
    return [base + (1 if k < extra else 0) for k in range(3)]


class LayerGroupMix(nn.Module):
    """CLS vectors of all hidden layers -> 3 groups mixed by softmax weights -> softmax-gated sum."""

    def __init__(self, n_layers: int) -> None:
        super().__init__()
        self.sizes = _group_sizes(n_layers)
        self.weights = nn.ParameterList([nn.Parameter(torch.zeros(s)) for s in self.sizes])
        self.gate = nn.Parameter(torch.zeros(3))

    def forward(self, hidden_states: tuple[torch.Tensor, ...]) -> torch.Tensor:
        cls = torch.stack([h[:, 0] for h in hidden_states[1:]], dim=1)  # (B, L, d); [0] is the embeddings
        groups = torch.split(cls, self.sizes, dim=1)
        mixed = [(torch.softmax(w, 0)[None, :, None] * g).sum(1) for w, g in zip(self.weights, groups)]
        gate = torch.softmax(self.gate, 0)
        return sum(gate[k] * mixed[k] for k in range(3))


class ResidualBlock(nn.Module):
    def __init__(self, d: int, dropout: float) -> None:
        super().__init__()
        self.f = nn.Sequential(nn.Linear(d, d), nn.LayerNorm(d), nn.GELU(), nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.f(x)


class MultiSourceScorer(nn.Module):
    def __init__(self, encoder_config: Any, dropout: float = 0.1) -> None:
        super().__init__()
        from transformers import AutoModel

        def encoder() -> nn.Module:
            return AutoModel.from_config(encoder_config)

        self.enc_answer, self.enc_comment, self.enc_conclusion = encoder(), encoder(), encoder()
        n, d = encoder_config.num_hidden_layers, encoder_config.hidden_size
        self.mix_answer, self.mix_comment, self.mix_conclusion = (LayerGroupMix(n), LayerGroupMix(n),
                                                                  LayerGroupMix(n))
        self.dropout = nn.Dropout(dropout)
        self.gates = nn.Linear(3 * d, 2 * d)
        self.proj = nn.Sequential(nn.Linear(3 * d, d), nn.LayerNorm(d))
        self.head = nn.Sequential(
            nn.Linear(d, 512), nn.LayerNorm(512), nn.GELU(), nn.Dropout(dropout), ResidualBlock(512, dropout),
            nn.Linear(512, 256), nn.LayerNorm(256), nn.GELU(), nn.Dropout(dropout), ResidualBlock(256, dropout),
            nn.Linear(256, 1))
        self.d = d

    def load_encoder_weights(self, path: str) -> None:
        """Start all three encoders from the same pre-trained BERT-like model (safetensors only)."""
        from transformers import AutoModel

        pre = AutoModel.from_pretrained(path, use_safetensors=True).state_dict()
        for enc in (self.enc_answer, self.enc_comment, self.enc_conclusion):
            enc.load_state_dict(pre)

    def _feature(self, enc: nn.Module, mix: LayerGroupMix, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        out = enc(**batch, output_hidden_states=True)
        return mix(out.hidden_states)

    def forward(self, answer: dict[str, torch.Tensor], comment: dict[str, torch.Tensor],
                conclusion: dict[str, torch.Tensor]) -> torch.Tensor:
        """Scores in [0, 1] (multiply by 100 for the 0-100 scale), shape (B,)."""
        a = self._feature(self.enc_answer, self.mix_answer, answer)
        c = self._feature(self.enc_comment, self.mix_comment, comment)
        k = self._feature(self.enc_conclusion, self.mix_conclusion, conclusion)
        x = self.dropout(torch.cat([a, c, k], dim=-1))
        g1, g2 = torch.sigmoid(self.gates(x)).split(self.d, dim=-1)
        fused = g1 * self.proj(x) + g2 * c
        return torch.sigmoid(self.head(fused)).squeeze(-1)
