"""One Adam update of the tail, shared verbatim by the distributed kernel and the learner.

Both arms call this same function in the same order on same-shaped tensors; that,
plus pinned threads, is what makes their results bitwise equal.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .data import Microbatch
from .layouts import objective


@dataclass(frozen=True)
class AdamSettings:
    lr: float = 3e-3
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    weight_decay: float = 0.0


def make_optimizer(tail: nn.Module, s: AdamSettings) -> torch.optim.Adam:
    return torch.optim.Adam(tail.parameters(), lr=s.lr, betas=s.betas, eps=s.eps, weight_decay=s.weight_decay,
                            foreach=False, fused=False)


def train_step(tail: nn.ModuleList, head: nn.Module, opt: torch.optim.Optimizer, features: torch.Tensor,
               reference: torch.Tensor | None, mb: Microbatch, retention_weight: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward through tail and read-only head, backward, Adam step; returns (loss, grad norm)."""
    opt.zero_grad(set_to_none=True)
    hidden = features
    for block in tail:
        hidden = block(hidden)
    loss = objective(head(hidden), hidden, reference, mb, retention_weight)
    loss.backward()
    grad_norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in tail.parameters()]))
    opt.step()
    return loss.detach().to("cpu", copy=True), grad_norm.detach().to("cpu", copy=True)


def snapshot(tail: nn.Module, opt: torch.optim.Optimizer) -> dict:
    """CPU copies of every parameter and its Adam state (step, exp_avg, exp_avg_sq)."""
    params = {name: p.detach().to("cpu", copy=True) for name, p in tail.named_parameters()}
    adam = {name: {k: opt.state[p][k].detach().to("cpu", copy=True) for k in ("step", "exp_avg", "exp_avg_sq")}
            for name, p in tail.named_parameters()}
    return {"params": params, "adam": adam}
