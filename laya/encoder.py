"""The bidirectional encoder, in BERT's own layout and maths.

Module and parameter names follow Hugging Face's BertModel (``embeddings.*``,
``encoder.layer.{i}.attention.self.query`` ...), so a BERT-family checkpoint's
tensors load by name. Post-LN blocks with exact (erf) GELU, as BERT uses.
Head transformer layers reuse ``TransformerLayer``.

Several sequences are encoded in one forward by packing their rows into one matrix:
the linear layers, norms and GELU see every row at once, attention runs on each
sequence's own rows. A sequence's states must not depend on what it was packed
with, so every packed matrix gets whole blocks of ``ROW_QUANTUM`` rows (zero rows
appended): the CPU GEMM kernels give a row bits that depend on the row count only
for small counts (measured: counts under 12, docs/serving.md). A single sequence
goes through the same packing, so served alone or in a batch it gets the same bits;
the claim ``serve.batch.exact`` checks that on the machine it runs on.
"""

from __future__ import annotations

import math
from itertools import accumulate
from dataclasses import dataclass
from typing import Iterator, Sequence
import torch
from torch import nn
from torch.nn import functional as F

from laya.cancel import CheckFn

ROW_QUANTUM = 16
Segments = tuple[tuple[int, int], ...]  # (first row, length) of each packed sequence

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

    def forward(self, x: torch.Tensor, segments: Segments | None = None) -> torch.Tensor:
        """Attention within each segment of rows (all of ``x`` by default); rows outside
        every segment (packing) get zeros."""
        projected = self.query(x), self.key(x), self.value(x)
        if segments is None:
            return self.attend(*projected)
        out = torch.zeros_like(x)
        for start, n in segments:
            out[start:start + n] = self.attend(*(t[start:start + n] for t in projected))
        return out

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        n, hidden = q.shape
        d = hidden // self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(n, self.heads, d).transpose(0, 1)  # [heads, n, d]

        q, k, v = split(q), split(k), split(v)
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

    def forward(self, x: torch.Tensor, segments: Segments | None = None) -> torch.Tensor:
        return self.output(self.self(x, segments), x)


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

    def forward(self, x: torch.Tensor, segments: Segments | None = None) -> torch.Tensor:
        h = self.attention(x, segments)
        return self.output(self.intermediate(h), h)


class Embeddings(nn.Module):
    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, cfg.hidden_size)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, token_ids: torch.Tensor, token_types: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        x = self.word_embeddings(token_ids) + self.position_embeddings(positions)
        return self.LayerNorm(x + self.token_type_embeddings(token_types))


class LayerStack(nn.Module):
    def __init__(self, layers: list[TransformerLayer]):
        super().__init__()
        self.layer = nn.ModuleList(layers)


class Encoder(nn.Module):
    """Maps unpadded token sequences, packed end to end, to their final hidden states."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.config = cfg
        self.embeddings = Embeddings(cfg)
        self.encoder = LayerStack([
            TransformerLayer(cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size, cfg.layer_norm_eps)
            for _ in range(cfg.num_hidden_layers)
        ])

    def forward(self, token_ids: torch.Tensor, token_types: torch.Tensor, lengths: Sequence[int],
                check: CheckFn | None = None) -> torch.Tensor:
        """States [sum(lengths), hidden] of the sequences whose ids are concatenated in ``token_ids``."""
        *_, states = self.layer_states(token_ids, token_types, lengths, check)
        return states

    def layer_states(self, token_ids: torch.Tensor, token_types: torch.Tensor, lengths: Sequence[int],
                     check: CheckFn | None = None) -> Iterator[torch.Tensor]:
        """The embedding output, then every layer's output, each [sum(lengths), hidden]."""
        rows = token_ids.shape[0]
        segments = tuple(zip(accumulate(lengths, initial=0), lengths))
        positions = torch.cat([torch.arange(n, device=token_ids.device) for n in lengths])
        x = self.embeddings(token_ids, token_types, positions)
        yield x
        x = torch.cat([x, x.new_zeros(-rows % ROW_QUANTUM, x.shape[1])])
        for layer in self.encoder.layer:
            if check is not None:
                check()
            x = layer(x, segments)
            yield x[:rows]


def encoder_parameter_shapes(cfg: EncoderConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor name an encoder-weights file must hold, with its shape."""
    with torch.device("meta"):
        return {name: tuple(t.shape) for name, t in Encoder(cfg).state_dict().items()}
