"""The bidirectional encoder, in BERT's own layout and maths.

Module and parameter names follow Hugging Face's BertModel (``embeddings.*``,
``encoder.layer.{i}.attention.self.query`` ...), so a BERT-family checkpoint's
tensors load by name. Post-LN blocks with exact (erf) GELU, as BERT uses.
Head transformer layers reuse ``TransformerLayer`` (its plain forward: one sequence).

Several sequences are encoded in one forward by packing their rows into one matrix
(``Packing``): the linear layers, norms and GELU see every row at once, attention
runs on each sequence's own rows. A sequence's states must not depend on what it was
packed with, so each sequence occupies whole blocks of rows (rows of no token
appended), the block being its linear kernels' ``quantum``, which fixes two shapes
for it (docs/serving.md):

- every GEMM runs on a multiple of the quantum's rows: the GEMM kernels give a row
  bits that depend on the row count only for small counts (oneDNN's on the CPU: a
  count of 1);
- sequences of the same padded width are attended together, one
  ``scaled_dot_product_attention`` call over a [count, heads, width, d] block with the
  padding masked, whose result for a sequence does not depend on the count.

A single sequence goes through the same packing, so served alone or in a batch it gets
the same bits; the claim ``serve.batch.exact`` checks that on the machine it runs on,
and scripts/probe_batch_exactness.py shows the rule for each kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import accumulate, groupby
from typing import Iterator, Sequence

import torch
from torch import nn
from torch.nn import functional as F

from laya.serving.cancel import CheckFn

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


class AtenLinear:
    """The packed forward's linear layers as torch's own ops (any device)."""

    name = "aten"
    quantum = 16  # off the CPU: on it, F.linear's bits change at row counts up to 192 (docs/serving.md)

    @staticmethod
    def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return F.linear(x, weight, bias)

    @staticmethod
    def linear_gelu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return F.gelu(F.linear(x, weight, bias))

    @staticmethod
    def linear_add(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return F.linear(x, weight, bias) + residual


class OneDnnLinear:
    """The same three on the CPU through oneDNN, GELU and the residual add fused into the
    GEMM: torch's own CPU GEMM (MKL) runs slower code paths on non-Intel CPUs, oneDNN
    uses the widest instructions the CPU has (docs/benchmarks.md measures both)."""

    name = "onednn"
    quantum = 4  # its bits change with the row count at 1 row only (the probe, 1 and 2 threads)

    @staticmethod
    def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")

    @staticmethod
    def linear_gelu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "gelu", [], "none")  # "none": erf, not tanh

    @staticmethod
    def linear_add(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise.binary(x, residual, weight, bias, "add")


LinearKernels = type[AtenLinear] | type[OneDnnLinear]


def linear_kernels(device: torch.device) -> LinearKernels:
    """oneDNN on a CPU whose torch build has it, torch's own ops elsewhere."""
    return OneDnnLinear if device.type == "cpu" and torch.backends.mkldnn.is_available() else AtenLinear


def row_quantum(device: str | torch.device) -> int:
    """The rows of one packing block on ``device``: its linear kernels' quantum."""
    return linear_kernels(torch.device(device)).quantum


def kernel_identity(device: str | torch.device) -> str:
    """What fixes the bits of a packed forward besides the weights and the token ids: the
    forward's version, its linear kernels on ``device`` and their row quantum."""
    kernels = linear_kernels(torch.device(device))
    return f"laya-encoder-v3|{kernels.name}|rows{kernels.quantum}|float32"


@dataclass(frozen=True)
class AttentionGroup:
    """``count`` sequences padded to the same ``width``, on consecutive rows from ``start``."""
    start: int
    width: int
    count: int
    mask: torch.Tensor  # [count, 1, 1, width]: True for a token's key, False for a padding row


class Packing:
    """Where each sequence's rows sit in the packed matrix: sequences ordered by width (their
    length rounded up to whole blocks of the device's row quantum), each followed by rows of
    no token up to its width, so every group of one width is a [count, width] block of rows."""

    def __init__(self, lengths: Sequence[int], device: torch.device):
        quantum = row_quantum(device)
        widths = [-(-n // quantum) * quantum for n in lengths]
        order = sorted(range(len(lengths)), key=widths.__getitem__)
        starts = dict(zip(order, accumulate((widths[i] for i in order), initial=0)))
        self.rows = sum(widths)
        self.groups = []
        for width, members in groupby(order, key=widths.__getitem__):
            members = list(members)
            filled = torch.tensor([lengths[i] for i in members], device=device)
            mask = torch.arange(width, device=device) < filled[:, None]
            self.groups.append(AttentionGroup(starts[members[0]], width, len(members), mask[:, None, None, :]))
        # the packed row of every token, sequences in their given order
        self.token_rows = torch.cat([torch.arange(starts[i], starts[i] + n, device=device)
                                     for i, n in enumerate(lengths)])


class SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attention over all rows of ``x``: one sequence."""
        return self.attend(self.query(x), self.key(x), self.value(x))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        n, hidden = q.shape
        d = hidden // self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(n, self.heads, d).transpose(0, 1)  # [heads, n, d]

        q, k, v = split(q), split(k), split(v)
        weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d), dim=-1)
        return (weights @ v).transpose(0, 1).reshape(n, hidden)

    def packed(self, x: torch.Tensor, packing: Packing, kernels: LinearKernels) -> torch.Tensor:
        """Attention within each packed sequence's own rows: one projection to queries, keys
        and values together, then one call per attention group, padding keys masked."""
        hidden = x.shape[1]
        projections = (self.query, self.key, self.value)
        qkv = kernels.linear(x, torch.cat([p.weight for p in projections]), torch.cat([p.bias for p in projections]))
        attended = []
        for group in packing.groups:
            rows = qkv[group.start:group.start + group.count * group.width]
            q, k, v = rows.view(group.count, group.width, 3, self.heads, hidden // self.heads).permute(2, 0, 3, 1, 4)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=group.mask)  # [count, heads, width, d]
            attended.append(out.transpose(1, 2).reshape(-1, hidden))
        return torch.cat(attended)


class DenseNorm(nn.Module):
    """BERT's ``*.output``: projection, residual add, LayerNorm."""

    def __init__(self, d_in: int, hidden: int, eps: float):
        super().__init__()
        self.dense = nn.Linear(d_in, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(x) + residual)

    def packed(self, x: torch.Tensor, residual: torch.Tensor, kernels: LinearKernels) -> torch.Tensor:
        return self.LayerNorm(kernels.linear_add(x, self.dense.weight, self.dense.bias, residual))


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

    def forward(self, x: torch.Tensor, packing: Packing | None = None) -> torch.Tensor:
        """The block over one sequence, or with ``packing`` over the packed sequences."""
        if packing is not None:
            return self.packed(x, packing)
        h = self.attention(x)
        return self.output(self.intermediate(h), h)

    def packed(self, x: torch.Tensor, packing: Packing) -> torch.Tensor:
        """The same maths on the packed matrix, through the fused kernels of its device."""
        kernels = linear_kernels(x.device)
        h = self.attention.output.packed(self.attention.self.packed(x, packing, kernels), x, kernels)
        ffn = self.intermediate.dense
        return self.output.packed(kernels.linear_gelu(h, ffn.weight, ffn.bias), h, kernels)


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
        packing = Packing(lengths, token_ids.device)
        *_, x = self._packed_states(token_ids, token_types, lengths, packing, check)
        return x.index_select(0, packing.token_rows)

    def layer_states(self, token_ids: torch.Tensor, token_types: torch.Tensor, lengths: Sequence[int],
                     check: CheckFn | None = None) -> Iterator[torch.Tensor]:
        """The embedding output, then every layer's output, each [sum(lengths), hidden]."""
        packing = Packing(lengths, token_ids.device)
        for x in self._packed_states(token_ids, token_types, lengths, packing, check):
            yield x.index_select(0, packing.token_rows)

    def _packed_states(self, token_ids: torch.Tensor, token_types: torch.Tensor, lengths: Sequence[int],
                       packing: Packing, check: CheckFn | None) -> Iterator[torch.Tensor]:
        """The embedding output, then every layer's output, each as the packed matrix."""
        positions = torch.cat([torch.arange(n, device=token_ids.device) for n in lengths])
        embedded = self.embeddings(token_ids, token_types, positions)
        x = embedded.new_zeros(packing.rows, embedded.shape[1]).index_copy_(0, packing.token_rows, embedded)
        yield x
        for layer in self.encoder.layer:
            if check is not None:
                check()
            x = layer(x, packing)
            yield x


def encoder_parameter_shapes(cfg: EncoderConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor name an encoder-weights file must hold, with its shape."""
    with torch.device("meta"):
        return {name: tuple(t.shape) for name, t in Encoder(cfg).state_dict().items()}
