"""train.temperature.not-better: docs/training.md's `not_better` outcome: "the fit would have
served a worse float32 NLL than T = 1, so T = 1".

The score sets are made so that T = 1 is their float64 NLL minimiser: seeded random scores
and labels drawn from their own softmax, divided by the minimiser scipy finds for them. The
fitted T then lands within rounding of 1, where float32 serving can make it worse than 1
itself. Oracle: the served NLL recomputed here (float32 softmax of scores / T, as
docs/serving.md serves, summed in float64) at T = 1 and at the returned T. The seeds listed
are ones where the near-1 fit serves a worse NLL than T = 1, found by search (torch's seeded
generator, so they hold for the pinned torch).
"""

from __future__ import annotations

import math

import pytest
import torch
from scipy.optimize import minimize_scalar

from laya.training.calibration import fit_temperature

WORSE_AT_THE_FIT = (3, 13, 34, 40)  # seeds whose near-1 fit serves a worse float32 NLL than T = 1
OTHERS = (0, 1, 2, 4)


def served_nll(scores, labels, temperature: float) -> float:
    return -sum(math.log(float(torch.softmax(s / temperature, 0)[y])) for s, y in zip(scores, labels)) / len(labels)


def centred_scores(seed: int) -> tuple[list[torch.Tensor], list[int]]:
    generator = torch.Generator().manual_seed(seed)
    scores = [torch.randn(3, generator=generator) * 2 for _ in range(30)]
    labels = [int(torch.multinomial(torch.softmax(s, 0), 1, generator=generator)) for s in scores]

    def nll64(t: float) -> float:
        return float(sum(-torch.log_softmax(s.double() / t, 0)[y] for s, y in zip(scores, labels))) / len(labels)

    best = minimize_scalar(nll64, bounds=(1 / 16, 16), method="bounded", options={"xatol": 1e-10}).x
    return [(s.double() / best).float() for s in scores], labels


@pytest.mark.laya_claim("train.temperature.not-better")
@pytest.mark.parametrize("seed", WORSE_AT_THE_FIT + OTHERS)
def test_a_fit_that_serves_a_worse_nll_keeps_t_1(seed):
    scores, labels = centred_scores(seed)
    fit = fit_temperature(scores, labels)
    at_one = served_nll(scores, labels, 1.0)
    assert served_nll(scores, labels, fit.temperature) <= at_one, fit  # never served worse than T = 1
    assert abs(fit.temperature - 1.0) < 1e-6, fit  # the minimiser is 1, to within rounding
    if seed in WORSE_AT_THE_FIT:
        assert (fit.temperature, fit.outcome, fit.nll_after) == (1.0, "not_better", fit.nll_before), fit
        assert math.isclose(fit.nll_before, at_one, rel_tol=1e-12), (fit.nll_before, at_one)
    if fit.outcome == "not_better":
        assert fit.temperature == 1.0 and fit.nll_after == fit.nll_before
