"""Certification claims (train.certify.bound) against a reference written from
docs/training.md: the Clopper-Pearson limit and binomial p-values from scipy, the
fixed-sequence procedure and its dev_cal start re-implemented here, and simulations
from known distributions, one where every certification would be false.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st
from scipy import stats

from laya.training.thresholds import GRID, binomial_cdf, certify, clopper_pearson_upper, sequence_start
from laya_qual.suite.calibration_oracle import REFERENCE_GRID, cp_upper, reference_path
from laya_qual.synth import selective_outcomes


def acted_errors(confidences: np.ndarray, correct: np.ndarray, threshold: float) -> tuple[int, int]:
    acted = confidences >= threshold
    return int(acted.sum()), int((acted & ~correct).sum())


def reference_start(cal_conf, cal_correct, conf_examples: int, target: float, delta: float) -> int:
    """The documented start: the first grid index maximising the chance that its test
    passes, with dev_cal's acted count scaled to dev_conf and a pessimistic risk."""
    cal_conf, cal_correct = np.asarray(cal_conf), np.asarray(cal_correct, dtype=bool)
    best, best_power = 0, -1.0
    for j, threshold in enumerate(REFERENCE_GRID):
        n, e = acted_errors(cal_conf, cal_correct, threshold)
        expected = int(np.rint(n * conf_examples / max(len(cal_conf), 1)))
        r = (e + 1) / (n + 2)
        risk = min(r + math.sqrt(r * (1 - r) / (n + 2)), 1 - 1e-9)
        passing = np.flatnonzero(stats.binom.cdf(np.arange(expected + 1), expected, target) <= delta) if expected else []
        power = float(stats.binom.cdf(passing[-1], expected, risk)) if len(passing) else 0.0
        if power > best_power:
            best, best_power = j, power
    return best


def reference_certify(confidences, correct, target: float, delta: float, start: int):
    """Fixed-sequence testing down the grid from ``start``, stopping at the first failure.
    Returns (threshold, acted, errors) of the last pass, or None; and whether a p-value sat
    within TIE of delta (then float64 rounding, not the procedure, decides)."""
    path, tie = reference_path(list(map(float, confidences)), list(map(bool, correct)), target, delta, start)
    passed = [step for step in path if step.passed]
    return ((passed[-1].threshold, passed[-1].acted, passed[-1].errors) if passed else None), tie


@pytest.mark.laya_claim("train.certify.bound")
def test_grid_is_the_documented_one():
    assert GRID == REFERENCE_GRID


@pytest.mark.laya_claim("train.certify.bound")
@given(n=st.integers(1, 2000), fraction=st.floats(0, 1), delta=st.floats(1e-4, 0.5))
@example(n=1, fraction=0.0, delta=0.05)
@example(n=600, fraction=0.0, delta=0.1)
@example(n=400, fraction=0.5, delta=0.01)
def test_clopper_pearson_and_binomial_match_scipy(n, fraction, delta):
    """The bound is the exact beta quantile (never the normal approximation, never a
    two-sided delta / 2), conservative by at most 1e-10; the p-value is scipy's binomial cdf."""
    errors = min(int(fraction * n), n - 1)
    bound, reference = clopper_pearson_upper(errors, n, delta), cp_upper(errors, n, delta)
    assert -1e-12 <= bound - reference <= 1e-10, (errors, n, delta, bound, reference)
    for p in (reference, 0.5 * reference, min(0.999, 2 * reference)):
        assert math.isclose(float(binomial_cdf(errors, n, p)), float(stats.binom.cdf(errors, n, p)),
                            rel_tol=1e-9, abs_tol=1e-300)


@pytest.mark.laya_claim("train.certify.bound")
@pytest.mark.parametrize("errors, n, p", [
    (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 0.5),  # empty: an empty answer, not an error
    (np.zeros((2, 0), dtype=np.int64), 3, np.full((1, 0), 0.2)),
    (5, 7, 0.3),  # scalars: a 0-d answer
    ([-1, -2], [3, 4], 0.5),  # no count is below 0: every p-value 0
    ([0, 2, 5, 9], [0, 2, 3, 9], [0.3, 0.1, 0.9, 0.5]),  # errors >= n: 1
    ([[0], [1], [4]], [[1, 4, 8]], [[0.05], [0.5], [0.95]]),  # broadcast to 3 x 3
    ([3, 0, 50], [10, 40, 70], np.array([0.3, 0.01, 0.77], dtype=np.float32)),  # float32 p, computed in float64
    ([8, 9, 11], [10, 10, 12], 0.01),  # terms whose float sum rounds above 1: a probability is at most 1
])
def test_binomial_cdf_is_scipys_elementwise_on_any_shape(errors, n, p):
    """laya.training.thresholds.binomial_cdf is documented as P[Binomial(n, p) <= errors], elementwise: the
    broadcast shape of its arguments, empty ones included, each element scipy's binomial cdf."""
    expected = stats.binom.cdf(np.asarray(errors), np.asarray(n), np.asarray(p))
    got = np.asarray(binomial_cdf(errors, n, p))
    assert got.shape == np.broadcast_shapes(np.shape(errors), np.shape(n), np.shape(p)) == expected.shape
    assert np.allclose(got, expected, rtol=1e-9, atol=1e-300) and np.all(got <= 1.0), (got, expected)


@pytest.mark.laya_claim("train.certify.bound")
@given(outcomes=selective_outcomes(REFERENCE_GRID), target=st.sampled_from([0.05, 0.1, 0.2, 0.3]),
       delta=st.sampled_from([0.01, 0.05, 0.1, 0.2]), start=st.integers(0, len(REFERENCE_GRID) - 1) | st.none())
@example(outcomes=([0.9] * 100, [True] * 100), target=0.1, delta=0.1, start=0)  # top of the grid fails: stop
@example(outcomes=([0.9] * 60 + [0.5] * 40, [True] * 60 + [False] * 40), target=0.1, delta=0.1, start=20)
@example(outcomes=([0.95] * 50 + [0.9] * 50, [True] * 100), target=0.05, delta=0.05, start=None)
@example(outcomes=([0.999], [True]), target=0.95, delta=0.1, start=None)  # one acted, a target near 1: certified
def test_fixed_sequence_matches_the_reference(outcomes, target, delta, start):
    """On random (confidence, correct) sets, some confidences exactly on grid thresholds
    (acted means confidence >= threshold), from a random start or the dev_cal-chosen one."""
    confidences, correct = outcomes
    if start is None:
        start = reference_start(confidences, correct, len(confidences), target, delta)
        assert sequence_start(confidences, correct, len(confidences), target_risk=target, delta=delta) == start
    expected, tie = reference_certify(confidences, correct, target, delta, start)
    assume(not tie)
    cert = certify(confidences, correct, target_risk=target, delta=delta, start=start)
    assert cert.certified == (expected is not None) and cert.start_threshold == REFERENCE_GRID[start]
    if expected is None:
        assert (cert.threshold, cert.acted, cert.errors, cert.risk_upper_bound) == (None, 0, 0, 1.0)
        return
    threshold, acted, errors = expected
    assert (cert.threshold, cert.acted, cert.errors) == (threshold, acted, errors)
    assert cert.coverage == acted / len(confidences) and cert.examples == len(confidences)
    assert -1e-12 <= cert.risk_upper_bound - cp_upper(errors, acted, delta) <= 1e-10
    assert cert.risk_upper_bound <= target + 1e-10


# --- simulations from known distributions ---------------------------------------------

DRAWS, SIM_RISK, SIM_DELTA, SLOPE = 200, 0.1, 0.1, 0.6
FALSE_ALARM = 1e-3


def true_risk(threshold: float) -> float:
    """Selective risk of the simulated head: confidence ~ U(0.3, 1), P(error | c) = SLOPE * (1 - c)."""
    low = max(threshold, 0.3)
    return SLOPE * (1 - low) / 2 if low < 1 else 0.0


def draw(rng: np.random.Generator, n: int, error_rate=lambda c: SLOPE * (1 - c)) -> tuple[np.ndarray, np.ndarray]:
    confidences = rng.uniform(0.3, 1.0, size=n)
    return confidences, rng.uniform(size=n) >= error_rate(confidences)


def too_many(count: int) -> bool:
    """More than Binomial(DRAWS, SIM_DELTA) produces with probability FALSE_ALARM."""
    return count > 0 and float(stats.binom.sf(count - 1, DRAWS, SIM_DELTA)) < FALSE_ALARM


def certify_draw(rng: np.random.Generator, **error_rate):
    cal_conf, cal_correct = draw(rng, 300, **error_rate)
    conf, correct = draw(rng, 600, **error_rate)
    start = sequence_start(cal_conf, cal_correct, len(conf), target_risk=SIM_RISK, delta=SIM_DELTA)
    return certify(conf, correct, target_risk=SIM_RISK, delta=SIM_DELTA, start=start)


@pytest.mark.laya_claim("train.certify.bound")
def test_certified_bound_holds_in_simulation():
    """Over DRAWS independent (dev_cal, dev_conf) draws from a known distribution, the
    certified threshold's true acted error exceeds the target in V draws. If the
    guarantee holds, V <= Binomial(DRAWS, SIM_DELTA) stochastically, and this test fails
    only when P[Binomial(DRAWS, SIM_DELTA) >= V] < FALSE_ALARM: a false-alarm rate of at
    most 0.1% for a correct certifier (the seed is fixed, so the verdict is too). It also
    requires that most draws certify something, so a certifier that never acts cannot
    pass vacuously."""
    rng = np.random.default_rng(0)
    violations = certified = 0
    for _ in range(DRAWS):
        cert = certify_draw(rng)
        if cert.certified:
            certified += 1
            violations += true_risk(cert.threshold) > SIM_RISK
            assert cert.risk_upper_bound <= SIM_RISK
    assert not too_many(violations), f"{violations}/{DRAWS} certified thresholds violate the target"
    assert certified >= DRAWS // 2, f"only {certified}/{DRAWS} draws certified anything"


@pytest.mark.laya_claim("train.certify.bound")
def test_no_threshold_is_safe_so_certification_is_rare():
    """Every threshold's true risk equals the target, so no test's null is false: a valid
    procedure certifies in at most a delta fraction of draws. A procedure that keeps
    testing after a failing threshold gets many chances and certifies far more often
    than the binomial limit allows (measured over four seeds: 44-57 of 200 draws against
    a limit near 34; the correct procedure: 10-19)."""
    rng = np.random.default_rng(1)
    certified = sum(certify_draw(rng, error_rate=lambda c: np.full_like(c, SIM_RISK)).certified for _ in range(DRAWS))
    assert not too_many(certified), f"{certified}/{DRAWS} draws certified a threshold no data can support"
