"""Temperature scaling fitted on ``dev_cal``, with the numbers that judge it.

One temperature per task of a head, chosen to minimise the negative log-likelihood
of that task's ``dev_cal`` labels (LBFGS on log T in float64, so T stays positive
and the fit is smooth). The reported NLL and ECE are evaluated on the probabilities
the runtime will actually serve (float32 ``softmax(scores / T)``), before (T = 1,
the head as trained) and after. A fit that would serve a worse NLL than T = 1 is
not used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

ECE_BINS = 15
T_RANGE = (1e-2, 1e2)


@dataclass(frozen=True)
class TemperatureFit:
    temperature: float
    examples: int
    nll_before: float
    nll_after: float
    ece_before: float
    ece_after: float


def served_probabilities(scores: Sequence[torch.Tensor], temperature: float) -> list[torch.Tensor]:
    """What ``laya.heads.calibrated`` serves for these scores at ``temperature``."""
    return [torch.softmax(s / temperature, dim=0) for s in scores]


def nll(probabilities: Sequence[torch.Tensor], labels: Sequence[int]) -> float:
    return -sum(math.log(max(float(p[y]), 1e-45)) for p, y in zip(probabilities, labels, strict=True)) / len(labels)


def ece(probabilities: Sequence[torch.Tensor], labels: Sequence[int], bins: int = ECE_BINS) -> float:
    """Top-label expected calibration error over ``bins`` equal-width confidence bins."""
    totals = [[0, 0.0, 0.0] for _ in range(bins)]  # count, sum confidence, sum correct
    for p, y in zip(probabilities, labels, strict=True):
        confidence = float(p.max())
        b = totals[min(int(confidence * bins), bins - 1)]
        b[0] += 1
        b[1] += confidence
        b[2] += float(int(p.argmax()) == y)
    return sum(abs(c - a) for n, c, a in totals if n) / len(labels)


def fit_temperature(scores: Sequence[torch.Tensor], labels: Sequence[int]) -> TemperatureFit:
    """Fit T on (scores, labels) of one task's ``dev_cal`` examples."""
    if not scores:
        raise ValueError("temperature fitting needs at least one example")
    width = max(len(s) for s in scores)
    padded = torch.zeros((len(scores), width), dtype=torch.float64)
    missing = torch.ones((len(scores), width), dtype=torch.bool)
    for i, s in enumerate(scores):
        padded[i, : len(s)] = s.double()
        missing[i, : len(s)] = False
    target = torch.tensor(list(labels))
    log_t = torch.zeros((), dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([log_t], lr=1.0, max_iter=100, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        logits = (padded / log_t.exp()).masked_fill(missing, float("-inf"))  # after the division: no 0 * inf
        loss = torch.nn.functional.cross_entropy(logits, target)
        loss.backward()
        return loss

    optimizer.step(closure)
    fitted = min(max(math.exp(log_t.item()), T_RANGE[0]), T_RANGE[1])
    before, after = served_probabilities(scores, 1.0), served_probabilities(scores, fitted)
    if nll(after, labels) > nll(before, labels):
        fitted, after = 1.0, before
    return TemperatureFit(fitted, len(scores), nll(before, labels), nll(after, labels),
                          ece(before, labels), ece(after, labels))
