"""The bidirectional encoder, in BERT's own layout and maths.

Module and parameter names follow Hugging Face's BertModel (``embeddings.*``,
``encoder.layer.{i}.attention.self.query`` ...), so a BERT-family checkpoint's
tensors load by name. Post-LN blocks with exact (erf) GELU, as BERT uses.
Head transformer layers reuse ``TransformerLayer``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
import torch
from torch import nn
from torch.nn import functional as F

from laya.cancel import CheckFn

@dataclass(frozen=True)
class EncoderConfig:
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float
    hidden_act: str = "gelu"


class SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, hidden = x.shape
        d = hidden // self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(n, self.heads, d).transpose(0, 1)  # [heads, n, d]

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d), dim=-1)
        return (weights @ v).transpose(0, 1).reshape(n, hidden)


class DenseNorm(nn.Module):
    """BERT's ``*.output``: projection, residual add, LayerNorm."""

    def __init__(self, d_in: int, hidden: int, eps: float):
        super().__init__()
        self.dense = nn.Linear(d_in, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(x) + residual)


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int, eps: float):
        super().__init__()
        self.self = SelfAttention(hidden, heads)
        self.output = DenseNorm(hidden, hidden, eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output(self.self(x), x)


class Intermediate(nn.Module):
    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.dense = nn.Linear(hidden, intermediate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.dense(x))


class TransformerLayer(nn.Module):
    """One post-LN block: LN(x + attn(x)), then LN(h + ffn(h))."""

    def __init__(self, hidden: int, heads: int, intermediate: int, eps: float):
        super().__init__()
        self.attention = Attention(hidden, heads, eps)
        self.intermediate = Intermediate(hidden, intermediate)
        self.output = DenseNorm(intermediate, hidden, eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.attention(x)
        return self.output(self.intermediate(h), h)


class Embeddings(nn.Module):
    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, cfg.hidden_size)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, token_ids: torch.Tensor, token_types: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(token_ids.shape[0], device=token_ids.device)
        x = self.word_embeddings(token_ids) + self.position_embeddings(positions)
        return self.LayerNorm(x + self.token_type_embeddings(token_types))


class LayerStack(nn.Module):
    def __init__(self, layers: list[TransformerLayer]):
        super().__init__()
        self.layer = nn.ModuleList(layers)


class Encoder(nn.Module):
    """Maps one unpadded token sequence to its final hidden states, [n, hidden]."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.config = cfg
        self.embeddings = Embeddings(cfg)
        self.encoder = LayerStack([
            TransformerLayer(cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size, cfg.layer_norm_eps)
            for _ in range(cfg.num_hidden_layers)
        ])

    def forward(self, token_ids: torch.Tensor, token_types: torch.Tensor, check: CheckFn | None = None) -> torch.Tensor:
        x = self.embeddings(token_ids, token_types)
        for layer in self.encoder.layer:
            if check is not None:
                check()
            x = layer(x)
        return x


def encoder_parameter_shapes(cfg: EncoderConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor name an encoder-weights file must hold, with its shape."""
    with torch.device("meta"):
        return {name: tuple(t.shape) for name, t in Encoder(cfg).state_dict().items()}
