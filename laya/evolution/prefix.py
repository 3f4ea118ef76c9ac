"""The frozen prefix computation, as owners run it in pieces and as an auditor runs it whole.

Both paths call the same modules in the same order on the same shapes, so the
pieces chained across processes give the same bits as the single-process run.
"""

from __future__ import annotations

import torch
from torch import nn

from .parent import ParentConfig, build_blocks, build_embed


def run_blocks(blocks: nn.ModuleList, hidden: torch.Tensor) -> torch.Tensor:
    for block in blocks:
        hidden = block(hidden)
    return hidden


@torch.no_grad()
def full_prefix(config: ParentConfig, state: dict, cut: int, ids: torch.Tensor, with_reference: bool,
                device: torch.device = torch.device("cpu")) -> dict[str, torch.Tensor]:
    """Single-process prefix on `device`: the independent path the auditor uses; CPU streams."""
    features = run_blocks(build_blocks(config, state, range(cut)).to(device),
                          build_embed(config, state).to(device)(ids.to(device)))
    streams = {"features": features}
    if with_reference:
        streams["reference"] = run_blocks(build_blocks(config, state, range(cut, config.depth)).to(device), features)
    return {k: v.to("cpu") for k, v in streams.items()}
