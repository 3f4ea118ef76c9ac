"""A reference for calibration written from docs/artifact-v1.md, independent of the runtime.

The numbers come straight from the artifact's bytes (manifest -> head.json,
head.safetensors), not from the runtime's parsed config; linear-head scores are
recomputed in float64; the decision rule is the documented one. Encoder states
are an input here (the forward has its own claims).

The temperature reference follows docs/training.md's rule with scipy's bounded
scalar search (not the runtime's bisection): the documented interval, the
minimum dev_cal size, and T = 1 for a separable dev_cal.

The recorded pictures have references too: the reliability diagram over the ECE's
15 equal-width bins (plain Python), and the fixed-sequence path down the documented
grid with scipy's binomial p-values and Clopper-Pearson limits.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from safetensors.torch import load as load_safetensors
from scipy import stats
from scipy.optimize import minimize_scalar

TEMPERATURE_BOUNDS = (0.0625, 16.0)  # docs/training.md: T_min = 1/16, T_max = 16
MIN_DEV_CAL = 30  # docs/training.md: fewer dev_cal examples are not fitted
ECE_BINS = 15  # docs/training.md: top-label ECE over 15 equal-width bins
# The documented grid, highest first: steps of 0.005 on [0, 1] and a tail 1 - 10**(-e/4), e = 9..24.
REFERENCE_GRID = tuple(sorted({i / 200 for i in range(201)} | {1 - 10 ** (-e / 4) for e in range(9, 25)}, reverse=True))
TIE = 1e-9  # relative distance of a p-value from delta below which float64 cannot decide the test


def pinned_bytes(directory: str | Path, role: str) -> bytes:
    """The bytes of the file the manifest lists for ``role``."""
    manifest = json.loads((Path(directory) / "manifest.json").read_bytes())
    entry = next(e for e in manifest["files"] if e["role"] == role)
    return (Path(directory) / entry["path"]).read_bytes()


@dataclass(frozen=True)
class TaskNumbers:
    index: int
    temperature: float
    act_threshold: float
    escalate_threshold: float
    never_acts: bool  # an uncertified trained task escalates everything


def task_numbers(directory: str | Path, name: str) -> TaskNumbers:
    tasks = json.loads(pinned_bytes(directory, "head_config"))["tasks"]
    index = next(i for i, t in enumerate(tasks) if t["name"] == name)
    task = tasks[index]
    certification = task.get("certification")
    return TaskNumbers(index, task["temperature"], task["act_threshold"], task["escalate_threshold"],
                       certification is not None and not certification["certified"])


def expected_decision(probabilities: Sequence[float], numbers: TaskNumbers) -> str:
    """`act` iff top >= act_threshold and runner-up < escalate_threshold (artifact-v1)."""
    if numbers.never_acts:
        return "escalate"
    top, runner_up = sorted(probabilities, reverse=True)[:2]
    return "act" if top >= numbers.act_threshold and runner_up < numbers.escalate_threshold else "escalate"


def readout_row(directory: str | Path, index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Readout row ``index`` in float64, an int8 row dequantized by hand (q * scale)."""
    tensors = load_safetensors(pinned_bytes(directory, "head_weights"))
    if "readout.weight_int8" in tensors:
        weight = tensors["readout.weight_int8"][index].double() * tensors["readout.weight_scale"][index].double()
    else:
        weight = tensors["readout.weight"][index].double()
    return weight, tensors["readout.bias"][index].double()


def reference_probabilities(marker_states: torch.Tensor, directory: str | Path, numbers: TaskNumbers) -> torch.Tensor:
    """softmax(scores / temperature) in float64 for a linear head, from the marker states."""
    weight, bias = readout_row(directory, numbers.index)
    scores = marker_states.double() @ weight + bias
    z = scores / numbers.temperature
    e = (z - z.max()).exp()
    return e / e.sum()


def reference_nll(scores: Sequence[torch.Tensor], labels: Sequence[int], temperature: float) -> float:
    """Mean float64 negative log-likelihood of ``labels`` under softmax(scores / T)."""
    return -sum(float(torch.log_softmax(z.double() / temperature, dim=0)[y]) for z, y in zip(scores, labels)) / len(labels)


def bounded_minimiser(scores: Sequence[torch.Tensor], labels: Sequence[int],
                      bounds: tuple[float, float] = TEMPERATURE_BOUNDS) -> float:
    """argmin of the NLL over T in ``bounds``; the NLL is convex in 1/T, hence unimodal in
    log T, so scipy's bounded scalar search on log T finds the minimiser (or the bound)."""
    return math.exp(minimize_scalar(lambda log_t: reference_nll(scores, labels, math.exp(log_t)),
                                    bounds=(math.log(bounds[0]), math.log(bounds[1])), method="bounded",
                                    options={"xatol": 1e-10}).x)


def reference_temperature(scores: Sequence[torch.Tensor], labels: Sequence[int]) -> tuple[float, str]:
    """The documented temperature and outcome (the float32 "not_better" fallback aside)."""
    if len(scores) < MIN_DEV_CAL:
        return 1.0, "too_few_examples"
    if all(float(z[y]) >= float(z.max()) for z, y in zip(scores, labels)):
        return 1.0, "separable"
    t = bounded_minimiser(scores, labels)
    for bound, outcome in zip(TEMPERATURE_BOUNDS, ("at_lower_bound", "at_upper_bound")):
        if abs(math.log(t / bound)) < 1e-6:
            return bound, outcome
    return t, "fitted"


def reference_reliability(confidences: Sequence[float], correct: Sequence[bool], bins: int = ECE_BINS) -> list[dict]:
    """The documented reliability diagram: bin i holds the top probabilities c with
    min(floor(bins * c), bins - 1) = i; its confidence and accuracy are the means of c and
    of top-1 correctness over the bin (None when empty)."""
    members: list[list[tuple[float, bool]]] = [[] for _ in range(bins)]
    for c, ok in zip(confidences, correct, strict=True):
        members[min(math.floor(bins * c), bins - 1)].append((c, ok))
    return [{"lower": i / bins, "upper": (i + 1) / bins, "count": len(m),
             "confidence": sum(c for c, _ in m) / len(m) if m else None,
             "accuracy": sum(ok for _, ok in m) / len(m) if m else None} for i, m in enumerate(members)]


def reference_ece(bins: Sequence[dict]) -> float:
    """ECE from a reliability diagram: sum over bins of count / n * |accuracy - confidence|."""
    n = sum(b["count"] for b in bins)
    return sum(b["count"] / n * abs(b["accuracy"] - b["confidence"]) for b in bins if b["count"])


def cp_upper(errors: int, n: int, delta: float) -> float:
    """One-sided Clopper-Pearson upper limit at level 1 - delta (1.0 when nothing acted)."""
    return 1.0 if n == 0 or errors >= n else float(stats.beta.ppf(1 - delta, errors + 1, n - errors))


@dataclass(frozen=True)
class TestedThreshold:
    threshold: float
    acted: int
    errors: int
    risk_upper_bound: float  # scipy's Clopper-Pearson limit
    passed: bool  # the binomial p-value P[Binomial(acted, target) <= errors] is <= delta


def reference_path(confidences: Sequence[float], correct: Sequence[bool], target: float, delta: float,
                   start: int) -> tuple[list[TestedThreshold], bool]:
    """Fixed-sequence testing down REFERENCE_GRID from ``start``: every threshold tested, in
    order, up to and including the first failure. Also returns whether a p-value sat within
    TIE of delta (then float64 rounding, not the procedure, decides)."""
    path, tie = [], False
    for threshold in REFERENCE_GRID[start:]:
        acted = [ok for c, ok in zip(confidences, correct, strict=True) if c >= threshold]
        n, e = len(acted), acted.count(False)
        p = float(stats.binom.cdf(e, n, target)) if n else 1.0
        tie |= n > 0 and abs(p - delta) <= TIE * delta
        path.append(TestedThreshold(threshold, n, e, cp_upper(e, n, delta), n > 0 and p <= delta))
        if not path[-1].passed:
            break
    return path, tie
