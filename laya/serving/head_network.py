"""Task heads: score each option from the encoder states at its marker.

Three kinds share one interface (``scores``): a float32 linear readout, an int8
readout (int8 weights with per-output-channel float32 scales, dequantized to
float32 for the compute), and a transformer head that adds its own role-type
embeddings and transformer layers before a float32 readout. Row ``t`` of a
readout scores task ``t``.
"""

from __future__ import annotations

import torch
from torch import nn

from laya.serving.cancel import CheckFn
from laya.serving.config import HeadConfig, TaskInfo
from laya.serving.encoder import TransformerLayer
from laya.serving.rendering import N_ROLES, Rendered


class Readout(nn.Module):
    def __init__(self, tasks: int, hidden: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(tasks, hidden))
        self.bias = nn.Parameter(torch.empty(tasks))

    def row(self, task: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.weight[task], self.bias[task]


class Int8Readout(nn.Module):
    def __init__(self, tasks: int, hidden: int):
        super().__init__()
        self.weight_int8 = nn.Parameter(torch.empty(tasks, hidden, dtype=torch.int8), requires_grad=False)
        self.weight_scale = nn.Parameter(torch.empty(tasks))
        self.bias = nn.Parameter(torch.empty(tasks))

    def row(self, task: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.weight_int8[task].to(torch.float32) * self.weight_scale[task], self.bias[task]


class HeadNetwork(nn.Module):
    """Maps final encoder states [n, hidden] to one score per option."""

    def __init__(self, cfg: HeadConfig, hidden: int, layer_norm_eps: float):
        super().__init__()
        self.kind = cfg.kind
        tasks = len(cfg.tasks)
        self.readout = Int8Readout(tasks, hidden) if cfg.kind == "int8" else Readout(tasks, hidden)
        if cfg.kind == "transformer":
            self.type_embeddings = nn.Embedding(N_ROLES, hidden)
            self.layers = nn.ModuleList([
                TransformerLayer(hidden, cfg.head_attention_heads, cfg.head_intermediate_size, layer_norm_eps)
                for _ in range(cfg.head_layers)
            ])

    def scores(self, states: torch.Tensor, rendered: Rendered, task: TaskInfo, check: CheckFn | None = None) -> torch.Tensor:
        x = states
        if self.kind == "transformer":
            x = x + self.type_embeddings(torch.tensor(rendered.roles, device=states.device))
            for layer in self.layers:
                if check is not None:
                    check()
                x = layer(x)
        weight, bias = self.readout.row(task.index)
        return x[list(rendered.marker_positions)] @ weight + bias


def head_parameter_specs(cfg: HeadConfig, hidden: int, layer_norm_eps: float) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Every tensor a head-weights file of this configuration must hold."""
    with torch.device("meta"):
        head = HeadNetwork(cfg, hidden, layer_norm_eps)
        return {name: (tuple(t.shape), t.dtype) for name, t in head.state_dict().items()}


def calibrated(scores: torch.Tensor, task: TaskInfo) -> tuple[tuple[float, ...], str]:
    """Temperature-scaled softmax and the act/escalate decision of ``task``.

    Act exactly when the top probability reaches ``act_threshold`` and the
    runner-up stays below ``escalate_threshold`` (1.0 disables that second rule).
    """
    probabilities = torch.softmax(scores / task.temperature, dim=0)
    top2 = torch.topk(probabilities, 2).values.tolist()
    act = top2[0] >= task.act_threshold and top2[1] < task.escalate_threshold
    return tuple(probabilities.tolist()), "act" if act else "escalate"
