"""Certifying a task's act threshold on ``dev_conf`` with a finite-sample bound.

Guarantee: with probability at least 1 - delta over the draw of ``dev_conf``, the
error rate among the examples the head acts on (top probability >= threshold) is
at most ``target_risk``. Errors are top-1 mistakes (the first highest-probability
option is not the label).

Method (fixed-sequence testing with Clopper-Pearson p-values, as in
Learn-then-Test): for each threshold lambda of a fixed grid, H(lambda) says "the
acted error rate exceeds target_risk". Given the acted count n, the acted errors
are Binomial(n, risk(lambda)), so p = P[Binomial(n, target_risk) <= errors] is a
valid p-value (p <= delta exactly when the one-sided Clopper-Pearson upper limit
at confidence 1 - delta is <= target_risk). Thresholds are tested in a fixed
order, from a start downwards, each at level delta, stopping at the first that
fails; the certified threshold is the last that passed. Testing in an order fixed
before seeing ``dev_conf`` controls the chance of any false certification at
delta with no multiplicity correction, so the grid can be fine.

Why not SGR's bisection: it spends delta / ceil(log2 m) per test (Bonferroni) and
its candidate thresholds are the dev_conf confidences themselves. Why a start:
the very highest thresholds act on a handful of examples and would fail, ending
the sequence before it reaches usable thresholds. The start is chosen on
``dev_cal`` (disjoint from ``dev_conf``, so the order stays fixed with respect to
it): the grid threshold where the first test is most likely to pass, estimated
from dev_cal's acted count (scaled to dev_conf's size) and a pessimistic acted
error rate: the smoothed rate r = (errors + 1) / (acted + 2) plus one standard
error, so that neither a thin, error-free top nor a lucky stretch of dev_cal
looks safe.

If nothing passes, nothing is certified and the head escalates every request.
Every tested threshold is kept, in order, with its acted count, errors and bound
(``Certificate.path``), so that a reader can see where the sequence stopped.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from laya.serving.config import ThresholdTest

METHOD = "clopper-pearson-fixed-sequence"


def _grid() -> tuple[float, ...]:
    """Fixed thresholds, highest first: steps of 0.005 and a tail reaching 1 - 1e-6."""
    values = {i / 200 for i in range(201)} | {1 - 10 ** (-e / 4) for e in range(9, 25)}
    return tuple(sorted(values, reverse=True))


GRID = _grid()


@dataclass(frozen=True)
class Certificate:
    certified: bool
    threshold: float | None  # the act threshold, None when nothing was certified
    target_risk: float
    delta: float
    examples: int  # dev_conf examples of the task
    acted: int
    errors: int
    coverage: float  # acted / examples
    risk_upper_bound: float  # Clopper-Pearson upper limit at 1 - delta of the acted error rate (1.0 if none acted)
    start_threshold: float
    path: tuple[ThresholdTest, ...]  # every threshold tested, from the start down to the first failure


@functools.lru_cache(maxsize=8)
def _log_factorials(n: int) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=np.float64)))])


def binomial_cdf(errors: np.ndarray | int, n: np.ndarray | int, p: np.ndarray | float) -> np.ndarray:
    """P[Binomial(n, p) <= errors], elementwise (0 < p < 1), summed in log space."""
    errors, n, p = np.broadcast_arrays(np.asarray(errors, dtype=np.int64), np.asarray(n, dtype=np.int64),
                                       np.asarray(p, dtype=np.float64))
    e, m, p = errors.reshape(-1, 1), n.reshape(-1, 1), p.reshape(-1, 1)
    lf = _log_factorials(int(m.max(initial=0)))
    k = np.arange(int(np.minimum(e, m).max(initial=0)) + 1)[None, :]
    valid = k <= np.minimum(e, m)
    log_pmf = (lf[m] - lf[k] - lf[np.clip(m - k, 0, None)] + k * np.log(p) + (m - k) * np.log1p(-p))
    cdf = np.exp(np.logaddexp.reduce(np.where(valid, log_pmf, -np.inf), axis=1))
    return np.where(e[:, 0] >= m[:, 0], 1.0, np.minimum(cdf, 1.0)).reshape(n.shape)


def clopper_pearson_upper(errors: int, n: int, delta: float) -> float:
    """One-sided upper confidence limit (level 1 - delta) of a binomial rate; 1.0 for n = 0."""
    if n == 0 or errors >= n:
        return 1.0
    low, high = errors / n, 1.0
    for _ in range(45):  # cdf decreases in p: bisect to 2**-45 where it crosses delta
        mid = (low + high) / 2
        if float(binomial_cdf(errors, n, mid)) > delta:
            low = mid
        else:
            high = mid
    return high


@functools.lru_cache(maxsize=4096)
def _critical_errors(n: int, target_risk: float, delta: float) -> int:
    """The most errors among n acted that still pass at level delta; -1 when none can."""
    k = np.arange(n + 1)
    lf = _log_factorials(n)
    log_cdf = np.logaddexp.accumulate(lf[n] - lf[k] - lf[n - k] + k * math.log(target_risk)
                                      + (n - k) * math.log1p(-target_risk))
    return int(np.count_nonzero(log_cdf <= math.log(delta))) - 1 if n else -1


def counts(confidences: Sequence[float], correct: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    """Acted and error counts at every grid threshold (acted = confidence >= threshold)."""
    conf = np.asarray(confidences, dtype=np.float64)
    order = np.argsort(-conf, kind="stable")
    sorted_conf = conf[order]
    errors_cum = np.concatenate([[0], np.cumsum(~np.asarray(correct, dtype=bool)[order])])
    acted = np.searchsorted(-sorted_conf, -np.asarray(GRID), side="right")
    return acted, errors_cum[acted]


def sequence_start(cal_confidences: Sequence[float], cal_correct: Sequence[bool], conf_examples: int, *,
                   target_risk: float, delta: float) -> int:
    """Grid index to start at, chosen on dev_cal alone (see the module docstring)."""
    acted, errors = counts(cal_confidences, cal_correct)
    expected = np.rint(acted * conf_examples / max(len(cal_confidences), 1)).astype(np.int64)
    smoothed = (errors + 1) / (acted + 2)
    risk = np.minimum(smoothed + np.sqrt(smoothed * (1 - smoothed) / (acted + 2)), 1 - 1e-9)
    critical = np.array([_critical_errors(int(n), target_risk, delta) for n in expected])
    power = np.where(critical >= 0, binomial_cdf(np.maximum(critical, 0), expected, risk), 0.0)
    return int(np.argmax(power))  # first maximum: the highest such threshold


def certify(confidences: Sequence[float], correct: Sequence[bool], *, target_risk: float, delta: float,
            start: int) -> Certificate:
    """Fixed-sequence test down the grid from ``start``; see the module docstring."""
    if not 0 < target_risk < 1 or not 0 < delta < 1:
        raise ValueError("target_risk and delta must lie in (0, 1)")
    acted, errors = counts(confidences, correct)
    passed = (acted > 0) & (binomial_cdf(errors, acted, target_risk) <= delta)
    chosen, tested = None, []
    for j in range(start, len(GRID)):
        tested.append(j)
        if not passed[j]:
            break
        chosen = j
    n = len(confidences)
    path = tuple(ThresholdTest(GRID[j], int(acted[j]), int(errors[j]),
                               clopper_pearson_upper(int(errors[j]), int(acted[j]), delta)) for j in tested)
    if chosen is None:
        return Certificate(False, None, target_risk, delta, n, 0, 0, 0.0, 1.0, GRID[start], path)
    a, e = int(acted[chosen]), int(errors[chosen])
    return Certificate(True, GRID[chosen], target_risk, delta, n, a, e, a / n,
                       clopper_pearson_upper(e, a, delta), GRID[start], path)
