"""Temperature scaling fitted on ``dev_cal``, with the numbers that judge it.

One temperature per task of a head, chosen to minimise the negative log-likelihood
of that task's ``dev_cal`` labels over the documented interval ``T_BOUNDS``. The NLL
is convex in 1/T, so the bounded minimiser is found exactly by bisection on its
derivative (float64). Two degenerate splits are not fitted at all and keep T = 1
(the head as trained): one with fewer than ``MIN_EXAMPLES`` examples, and a
*separable* one, where every example's label has the top score — its NLL has no
minimum (it falls all the way to T -> 0), so any fitted T would only say where the
search stopped, and the sharpest allowed. Every fit says which case it was
(``outcome``); docs/training.md gives the reasons for the numbers.

The reported NLL, ECE and reliability diagrams (the ECE's own bins) are evaluated on
the probabilities the runtime will actually serve (float32 ``softmax(scores / T)``),
before (T = 1) and after. A fit that would serve a worse NLL than T = 1 is not used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

from laya.serving.config import ReliabilityBin

METHOD = "temperature-nll-bounded"
ECE_BINS = 15
# T >= 1/16 keeps a unit score gap unsaturated in float32: softmax([16, 0]) tops out at
# 1 - 2**-23, while 1/17.5 already rounds to 1.0. The interval is symmetric in log T.
T_BOUNDS = (1 / 16, 16.0)
# With n error-free examples the one-sided 95% upper bound on the error rate is
# 1 - 0.05 ** (1 / n); it first drops below 0.1, the default target risk, at n = 29.
MIN_EXAMPLES = 30
BISECTION_STEPS = 64


@dataclass(frozen=True)
class TemperatureFit:
    temperature: float
    examples: int
    nll_before: float
    nll_after: float
    ece_before: float
    ece_after: float
    outcome: str  # laya.serving.config.CALIBRATION_OUTCOMES: the first three serve the fit, the others T = 1
    reliability_before: tuple[ReliabilityBin, ...]  # dev_cal as served at T = 1
    reliability_after: tuple[ReliabilityBin, ...]  # dev_cal as served at the fitted T

    @property
    def warning(self) -> str | None:
        """Why this temperature deserves a second look, or None."""
        low, high = T_BOUNDS
        return {
            "at_lower_bound": f"the NLL minimum lies at or below T = {low:g}, the lower bound: T was held there",
            "at_upper_bound": f"the NLL minimum lies at or above T = {high:g}, the upper bound: T was held there "
                              "(the scores barely predict the dev_cal labels)",
            "separable": f"dev_cal is separable (all {self.examples} labels are top-scored): the NLL has no "
                         "minimum, T was not fitted and stays 1 (the head as trained)",
            "too_few_examples": f"dev_cal has {self.examples} examples, fewer than the {MIN_EXAMPLES} needed to "
                                "calibrate: T was not fitted and stays 1 (the head as trained)",
        }.get(self.outcome)


def served_probabilities(scores: Sequence[torch.Tensor], temperature: float) -> list[torch.Tensor]:
    """What ``laya.serving.head_network.calibrated`` serves for these scores at ``temperature``."""
    return [torch.softmax(s / temperature, dim=0) for s in scores]


def nll(probabilities: Sequence[torch.Tensor], labels: Sequence[int]) -> float:
    return -sum(math.log(max(float(p[y]), 1e-45)) for p, y in zip(probabilities, labels, strict=True)) / len(labels)


def _bin_totals(probabilities: Sequence[torch.Tensor], labels: Sequence[int], bins: int) -> list[list]:
    """Per equal-width confidence bin: count, sum of top probabilities, number correct."""
    totals = [[0, 0.0, 0.0] for _ in range(bins)]
    for p, y in zip(probabilities, labels, strict=True):
        confidence = float(p.max())
        b = totals[min(int(confidence * bins), bins - 1)]
        b[0] += 1
        b[1] += confidence
        b[2] += float(int(p.argmax()) == y)
    return totals


def ece(probabilities: Sequence[torch.Tensor], labels: Sequence[int], bins: int = ECE_BINS) -> float:
    """Top-label expected calibration error over ``bins`` equal-width confidence bins."""
    return sum(abs(c - a) for n, c, a in _bin_totals(probabilities, labels, bins) if n) / len(labels)


def reliability(probabilities: Sequence[torch.Tensor], labels: Sequence[int],
                bins: int = ECE_BINS) -> tuple[ReliabilityBin, ...]:
    """The reliability diagram over the ECE's own bins, so that the ECE is
    sum(count / n * |accuracy - confidence|) over them (head.json records both)."""
    return tuple(ReliabilityBin(i / bins, (i + 1) / bins, n, c / n if n else None, a / n if n else None)
                 for i, (n, c, a) in enumerate(_bin_totals(probabilities, labels, bins)))


def separable(scores: Sequence[torch.Tensor], labels: Sequence[int]) -> bool:
    """Every example's label has its top score: the NLL then decreases for every T."""
    return all(bool(s[y] == s.max()) for s, y in zip(scores, labels, strict=True))


def _bounded_minimiser(scores: Sequence[torch.Tensor], labels: Sequence[int]) -> tuple[float, str]:
    """argmin of the float64 NLL over T in T_BOUNDS, by bisection on d NLL / d(1/T)."""
    width = max(len(s) for s in scores)
    padded = torch.zeros((len(scores), width), dtype=torch.float64)
    missing = torch.ones((len(scores), width), dtype=torch.bool)
    for i, s in enumerate(scores):
        padded[i, : len(s)] = s.double()
        missing[i, : len(s)] = False
    labelled = padded[torch.arange(len(scores)), torch.tensor(list(labels))]

    def slope(beta: float) -> float:  # mean(E_p[z] - z_label), increasing in beta (the NLL is convex in it)
        p = torch.softmax((padded * beta).masked_fill(missing, float("-inf")), dim=1)
        return float(((p * padded.masked_fill(missing, 0.0)).sum(dim=1) - labelled).mean())

    low, high = 1 / T_BOUNDS[1], 1 / T_BOUNDS[0]  # in beta = 1/T
    if slope(high) <= 0:
        return T_BOUNDS[0], "at_lower_bound"
    if slope(low) >= 0:
        return T_BOUNDS[1], "at_upper_bound"
    for _ in range(BISECTION_STEPS):
        mid = (low + high) / 2
        low, high = (mid, high) if slope(mid) < 0 else (low, mid)
    return 2 / (low + high), "fitted"


def fit_temperature(scores: Sequence[torch.Tensor], labels: Sequence[int]) -> TemperatureFit:
    """Fit T on (scores, labels) of one task's ``dev_cal`` examples."""
    if not scores:
        raise ValueError("temperature fitting needs at least one example")
    if len(scores) < MIN_EXAMPLES:
        fitted, outcome = 1.0, "too_few_examples"
    elif separable(scores, labels):
        fitted, outcome = 1.0, "separable"
    else:
        fitted, outcome = _bounded_minimiser(scores, labels)
    before, after = served_probabilities(scores, 1.0), served_probabilities(scores, fitted)
    if nll(after, labels) > nll(before, labels):
        fitted, after, outcome = 1.0, before, "not_better"
    return TemperatureFit(fitted, len(scores), nll(before, labels), nll(after, labels),
                          ece(before, labels), ece(after, labels), outcome,
                          reliability(before, labels), reliability(after, labels))
