"""The parent: a decoder-only transformer with a tied input/output matrix and a final norm.

Weights are random but reproducible: every tensor is drawn from its own generator,
seeded from (seed, tensor name), so any process can rebuild any part of the parent
and a committed parent file can be checked against its seed. The parent lives on
disk as safetensors; readers hash the bytes they parse (never hash-then-reopen).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from torch import nn
from torch.nn import functional as F

from laya.artifact.binding import sha256


@dataclass(frozen=True)
class ParentConfig:
    vocab: int
    width: int
    heads: int
    depth: int
    seq_len: int
    mlp_ratio: int = 4

    def __post_init__(self):
        if self.width % self.heads:
            raise ValueError(f"width {self.width} is not divisible by heads {self.heads}")

    def block_params(self) -> int:
        d, m = self.width, self.mlp_ratio * self.width
        return 2 * 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * m + m) + (m * d + d)

    def head_params(self) -> int:
        return self.vocab * self.width + 2 * self.width

    def total_params(self) -> int:
        return self.head_params() + self.seq_len * self.width + self.depth * self.block_params()


CONFIGS: dict[str, ParentConfig] = {
    # CPU qualification default: small enough to run 3 processes in a second.
    "tiny": ParentConfig(vocab=96, width=32, heads=2, depth=4, seq_len=16),
    # The 1.7B parent's shape (depth, head size, seq/width and vocab/width ratios) at width/8.
    "seed-cpu": ParentConfig(vocab=18992, width=256, heads=2, depth=28, seq_len=128),
    # The same shape at width/16, for the benchmark claim that runs in the default suite.
    "seed-small": ParentConfig(vocab=9496, width=128, heads=1, depth=28, seq_len=64),
    # Shaped like a 1.7B-parameter parent (Qwen3-1.7B-like widths) for GPU probes.
    "parent-1.7b": ParentConfig(vocab=151936, width=2048, heads=16, depth=28, seq_len=1024),
}


def block_names(index: int, prefix: str = "blocks") -> list[str]:
    p = f"{prefix}.{index}"
    return [f"{p}.{n}" for n in ("ln1.weight", "ln1.bias", "qkv.weight", "qkv.bias", "proj.weight",
                                  "proj.bias", "ln2.weight", "ln2.bias", "fc.weight", "fc.bias",
                                  "out.weight", "out.bias")]


class Block(nn.Module):
    """Pre-norm causal self-attention + GELU MLP, attention written out (no fused kernels)."""

    def __init__(self, config: ParentConfig):
        super().__init__()
        d, m = config.width, config.mlp_ratio * config.width
        self.heads = config.heads
        self.ln1, self.qkv, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln2, self.fc, self.out = nn.LayerNorm(d), nn.Linear(d, m), nn.Linear(m, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
        causal = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
        attn = scores.masked_fill(causal, float("-inf")).softmax(dim=-1)
        x = x + self.proj((attn @ v).transpose(1, 2).reshape(b, n, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class Embed(nn.Module):
    """Token plus learned position embedding; the token matrix is the tied output matrix."""

    def __init__(self, config: ParentConfig):
        super().__init__()
        self.tok = nn.Embedding(config.vocab, config.width)
        self.pos = nn.Embedding(config.seq_len, config.width)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))


class DecoderHead(nn.Module):
    """The read-only output head: final norm, then the tied token matrix."""

    def __init__(self, config: ParentConfig):
        super().__init__()
        self.norm = nn.LayerNorm(config.width)
        self.tok = nn.Embedding(config.vocab, config.width)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(h), self.tok.weight)


HEAD_NAMES = ("norm.weight", "norm.bias", "tok.weight")


def _tensor_shapes(config: ParentConfig) -> dict[str, tuple[int, ...]]:
    d = config.width
    shapes = {"tok.weight": (config.vocab, d), "pos.weight": (config.seq_len, d),
              "norm.weight": (d,), "norm.bias": (d,)}
    for i in range(config.depth):
        shapes.update(block_shapes(config, i))
    return shapes


def block_shapes(config: ParentConfig, index: int, prefix: str = "blocks") -> dict[str, tuple[int, ...]]:
    d, m = config.width, config.mlp_ratio * config.width
    dims = [(d,), (d,), (3 * d, d), (3 * d,), (d, d), (d,), (d,), (d,), (m, d), (m,), (d, m), (d,)]
    return dict(zip(block_names(index, prefix), dims))


def draw(name: str, shape: tuple[int, ...], seed: int, std: float = 0.02) -> torch.Tensor:
    """One tensor from its own generator: the same (seed, name) always gives the same bits."""
    g = torch.Generator().manual_seed(int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "little"))
    noise = torch.randn(shape, generator=g, dtype=torch.float32)
    if name.rsplit(".", 1)[-1] == "weight" and len(shape) == 1:  # norm scales sit near one
        return 1.0 + 0.1 * noise
    return std * noise


def init_parent(config: ParentConfig, seed: int) -> dict[str, torch.Tensor]:
    return {name: draw(name, shape, seed) for name, shape in _tensor_shapes(config).items()}


def write_parent(path: Path, config: ParentConfig, state: dict[str, torch.Tensor]) -> str:
    """Commit a parent to disk; returns its digest (sha256 of the file bytes)."""
    data = st_save(state, metadata={"config": json.dumps(asdict(config), sort_keys=True)})
    Path(path).write_bytes(data)
    return sha256(data)


def read_parent(path: Path) -> tuple[ParentConfig, dict[str, torch.Tensor], str]:
    """Read once, hash those bytes, parse those same bytes."""
    data = Path(path).read_bytes()
    header_len = int.from_bytes(data[:8], "little")
    config = ParentConfig(**json.loads(json.loads(data[8:8 + header_len])["__metadata__"]["config"]))
    return config, st_load(data), sha256(data)


def load_module(module: nn.Module, state: dict[str, torch.Tensor], prefix: str, frozen: bool) -> nn.Module:
    """Fill a module from the named slice of a state dict, copying into fresh torch memory."""
    own = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    module.load_state_dict(own, strict=True)
    module.requires_grad_(not frozen)
    return module


def build_blocks(config: ParentConfig, state: dict[str, torch.Tensor], indices, *, prefix: str = "blocks",
                 frozen: bool = True) -> nn.ModuleList:
    return nn.ModuleList(load_module(Block(config), state, f"{prefix}.{i}.", frozen) for i in indices)


def build_embed(config: ParentConfig, state: dict[str, torch.Tensor]) -> Embed:
    return load_module(Embed(config), {"tok.weight": state["tok.weight"], "pos.weight": state["pos.weight"]},
                       "", frozen=True)


def build_decoder_head(config: ParentConfig, state: dict[str, torch.Tensor]) -> DecoderHead:
    return load_module(DecoderHead(config), {k: state[k] for k in HEAD_NAMES}, "", frozen=True)
