"""Label DP per round: one label moves a row's grid code by at most the accounted sensitivity, the noise is
the accounted discrete Gaussian, and every objective's hessian ignores the label."""

from __future__ import annotations

import math

import numpy as np
import pytest

from parties.trees.label_dp import LabelDP, grid, label_codes, noisy_gradients
from parties.trees.objectives import Objective
from vfl.core.errors import ConfigError
from vfl.core.rng import NoiseSource
from vfl.privacy.accounting.accountant import Accountant
from vfl.privacy.accounting.events import LabelGaussianEvent
from vfl.privacy.accounting.scope import SCOPE_TREES_LABEL

CASES = [(Objective("binary:logistic"), 2, [0, 1]), (Objective("multi:softprob", 3), 3, [0, 2]),
         (Objective("reg:squarederror"), 1, [-40.0, 55.0])]


@pytest.mark.parametrize("objective,outputs,labels", CASES)
@pytest.mark.parametrize("clip", [0.1, 1.0])
def test_one_label_moves_a_rows_code_by_at_most_the_sensitivity(objective, outputs, labels, clip):
    dp = LabelDP(noise_multiplier=1.0, clip=clip)
    g = grid(objective, dp)
    margins = np.random.default_rng(0).normal(size=(1, objective.outputs)).astype(np.float32)

    def codes(y):
        return label_codes(objective=objective, margins=margins, y=np.asarray([y]), gr=g)

    a, b = codes(labels[0]), codes(labels[1])
    moved = float(np.sqrt(((a - b) ** 2).sum()))
    bound = g.sensitivity * (math.sqrt(2) if g.pairs else 1.0)
    assert 0 < moved <= bound + 1e-9
    ev = g.event()
    assert ev.noise_multiplier >= dp.noise_multiplier  # σ² is rounded up on the grid, never down


def test_the_noise_is_the_accounted_discrete_gaussian_and_seeded_noise_replays():
    obj, dp = Objective("binary:logistic"), LabelDP(noise_multiplier=0.8, clip=1.0)
    margins, y = np.zeros((20000, 1), np.float32), np.zeros(20000, np.int64)
    run = [noisy_gradients(objective=obj, margins=margins, y=y, dp=dp, noise=NoiseSource.seeded("t", i)) for i in (1, 1, 2)]
    assert np.array_equal(run[0], run[1]) and not np.array_equal(run[0], run[2])
    fresh = noisy_gradients(objective=obj, margins=margins, y=y, dp=dp, noise=NoiseSource.fresh())
    ev = grid(obj, dp).event()
    assert abs(np.std(fresh - 0.5) / ev.sigma - 1) < 0.03  # p = 0.5, y = 0: g = 0.5 + noise


def test_rounds_compose_in_the_accountant_under_the_label_scope():
    acc = Accountant()
    ev = grid(Objective("binary:logistic"), LabelDP(noise_multiplier=2.0, clip=1.0)).event()
    for _ in range(5):
        acc.record(ev)
    assert acc.labels_only() and acc.scope() == SCOPE_TREES_LABEL
    assert isinstance(acc.events[0], LabelGaussianEvent) and acc.events[0].count == 5
    single = Accountant()
    single.record(ev)
    assert acc.epsilon(1e-5)[0] > single.epsilon(1e-5)[0]


def test_a_noise_std_past_the_grid_is_one_line():
    with pytest.raises(ConfigError, match="params.label_dp.noise_multiplier"):
        grid(Objective("reg:squarederror"), LabelDP(noise_multiplier=5000.0, clip=1.0))
