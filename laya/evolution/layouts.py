"""Where the parent is cut and what trains: the appended layout and the fixed-size tail control.

appended:   frozen blocks [0, cut) (cut = depth unless set), then k new trainable blocks.
fixed-tail: frozen blocks [0, depth-2); trainable copies of the last two blocks; the
            originals' output on the same input is the retention reference stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from .data import IGNORE, Microbatch
from .parent import Block, ParentConfig, block_names, block_shapes, draw, load_module

LAYOUTS = ("appended", "fixed-tail")


@dataclass(frozen=True)
class Layout:
    name: str
    tail_blocks: int = 2
    cut: int | None = None  # appended only: how many frozen blocks precede the new ones

    def __post_init__(self):
        if self.name not in LAYOUTS:
            raise ValueError(f"unknown layout {self.name!r}; expected one of {LAYOUTS}")
        if self.name == "fixed-tail" and (self.tail_blocks != 2 or self.cut is not None):
            raise ValueError("the fixed-tail control always retrains exactly the last two blocks")

    def cut_layer(self, config: ParentConfig) -> int:
        cut = (config.depth if self.cut is None else self.cut) if self.name == "appended" else config.depth - 2
        if not 0 <= cut <= config.depth:
            raise ValueError(f"cut layer {cut} outside 0..{config.depth}")
        return cut

    @property
    def streams(self) -> tuple[str, ...]:
        return ("features", "reference") if self.name == "fixed-tail" else ("features",)

    def describe(self) -> dict:
        return {"name": self.name, "tail_blocks": self.tail_blocks}


def init_tail(layout: Layout, config: ParentConfig, parent: dict[str, torch.Tensor], seed: int) -> dict[str, torch.Tensor]:
    """Initial tail weights, named tail.<i>.<param>: fresh blocks or copies of the originals."""
    if layout.name == "appended":
        return {name: draw(name, shape, seed)
                for i in range(layout.tail_blocks) for name, shape in block_shapes(config, i, "tail").items()}
    cut = layout.cut_layer(config)
    return {new: parent[old].clone()
            for i in range(2) for new, old in zip(block_names(i, "tail"), block_names(cut + i))}


def build_tail(config: ParentConfig, state: dict[str, torch.Tensor], blocks: int) -> nn.ModuleList:
    return nn.ModuleList(load_module(Block(config), state, f"tail.{i}.", frozen=False) for i in range(blocks))


def objective(logits: torch.Tensor, hidden: torch.Tensor, reference: torch.Tensor | None, mb: Microbatch,
              retention_weight: float) -> torch.Tensor:
    """Weighted token cross-entropy, plus weight x MSE to the reference where there is one."""
    labels, weights = mb.labels.to(logits.device), mb.weights.to(logits.device)  # no-ops on CPU
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE,
                         reduction="none").view_as(weights)
    loss = (ce * weights).sum() / weights.sum()
    if reference is not None:
        loss = loss + retention_weight * (hidden - reference).pow(2).mean()
    return loss
