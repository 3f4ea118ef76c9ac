"""Zero-layer head training on frozen features, and warm starts.

A zero-layer head is one float32 readout row per task over the marker states, so
training it never touches the encoder: it reads a ``FeatureStore``. Training is
full float32 Adam (``foreach=False``) over seeded mini-batches, so one seed on one
numeric profile gives bitwise the same head.

A warm start continues an existing head. It clones the source's readout (the
loaded source head, and so its artifact, is never written to) and refuses a head
with transformer layers: this trainer cannot train them, and dropping them would
silently change what the head computes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from laya.training.dataset import Example
from laya.errors import TrainingError
from laya.training.features import FeatureStore
from laya.serving.loading import Head


@dataclass(frozen=True)
class TrainConfig:
    seed: int = 0
    epochs: int = 100
    batch_size: int = 64
    learning_rate: float = 0.1

    def __post_init__(self) -> None:
        # what `laya train`'s options also refuse: no epoch or batch would train nothing, or fail in torch
        for name in ("epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"TrainConfig.{name} must be at least 1, not {getattr(self, name)}")
        if not 0 < self.learning_rate < float("inf"):
            raise ValueError(f"TrainConfig.learning_rate must be a positive finite number, not {self.learning_rate}")


@dataclass(frozen=True)
class LinearHead:
    """Task names in readout-row order, and the float32 readout."""

    tasks: tuple[str, ...]
    weight: torch.Tensor  # [tasks, hidden]
    bias: torch.Tensor  # [tasks]


def initial_head(tasks: Sequence[str], hidden: int, seed: int) -> LinearHead:
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(len(tasks), hidden, generator=generator) * 0.01
    return LinearHead(tuple(tasks), weight, torch.zeros(len(tasks)))


def warm_start(source: Head) -> LinearHead:
    """A new head initialised from ``source``'s readout, all its tasks in its order."""
    if source.kind == "transformer" or source.config.head_layers:
        raise TrainingError(f"head {source.source} has {source.config.head_layers} transformer layer(s); the "
                            "zero-layer trainer cannot warm-start from it", field="warm_start")
    readout = source._weights.module.readout
    tasks = tuple(sorted(source.tasks, key=lambda name: source.tasks[name].index))
    if source.kind == "int8":
        weight = readout.weight_int8.to(torch.float32) * readout.weight_scale[:, None]
    else:
        weight = readout.weight.detach().clone()
    return LinearHead(tasks, weight, readout.bias.detach().clone())


def train_head(store: FeatureStore, examples: Sequence[Example], indices: Sequence[int], initial: LinearHead,
               config: TrainConfig, progress: Callable[[int], None] | None = None) -> LinearHead:
    """Minimise cross-entropy (hard labels or soft targets) of the readout on ``indices``."""
    features, mask, targets, rows = _batch(store, examples, indices, initial.tasks)
    weight = torch.nn.Parameter(initial.weight.clone())  # the caller's initial head stays as it was
    bias = torch.nn.Parameter(initial.bias.clone())
    optimizer = torch.optim.Adam([weight, bias], lr=config.learning_rate, foreach=False)
    generator = torch.Generator().manual_seed(config.seed)
    for _ in range(config.epochs):
        # drawn from the CPU generator: one seed gives one order on any device
        for batch in torch.randperm(len(rows), generator=generator, device="cpu").split(config.batch_size):
            scores = torch.einsum("bkh,bh->bk", features[batch], weight[rows[batch]]) + bias[rows[batch], None]
            logp = torch.log_softmax(scores.masked_fill(~mask[batch], float("-inf")), dim=1)
            loss = -(targets[batch] * logp.masked_fill(~mask[batch], 0.0)).sum(dim=1).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        if progress is not None:
            progress(1)
    return LinearHead(initial.tasks, weight.detach(), bias.detach())


def _batch(store: FeatureStore, examples: Sequence[Example], indices: Sequence[int], tasks: tuple[str, ...]):
    """Padded features [n, options, hidden], option mask, target distributions and task rows."""
    width = max(len(examples[i].request.options) for i in indices)
    hidden, device = store.markers[indices[0]].shape[1], store.markers[indices[0]].device
    features = torch.zeros(len(indices), width, hidden, device=device)
    mask = torch.zeros(len(indices), width, dtype=torch.bool, device=device)
    targets = torch.zeros(len(indices), width, device=device)
    rows = torch.zeros(len(indices), dtype=torch.long, device=device)
    for j, i in enumerate(indices):
        example = examples[i]
        if example.request.task not in tasks:
            raise TrainingError(f"example {example.id!r} names task {example.request.task!r}; the head has "
                                f"{list(tasks)}", field="task")
        k = len(example.request.options)
        features[j, :k] = store.markers[i]
        mask[j, :k] = True
        if example.target is not None:
            targets[j, :k] = torch.tensor(example.target, device=device)
        else:
            targets[j, example.label] = 1.0
        rows[j] = tasks.index(example.request.task)
    return features, mask, targets, rows
