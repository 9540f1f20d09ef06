"""One-run audit (Steinke, Nasr & Jagielski 2023): the empirical lower bound never exceeds the
accountant's ε for PBM and LDP (two settings each), and exceeds it when the noise is seeded."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from vfl.attacks.audit import (
    canary_design,
    epsilon_lower_bound,
    max_auditable_epsilon,
    one_run_audit,
    p_value,
)
from vfl.attacks.seeded_noise import regenerate_binomial, regenerate_normal, round_source
from vfl.core.rng import NoiseSource
from vfl.privacy import Accountant, GaussianEvent, PBMEvent

M_CANARIES, EPOCHS, P, DELTA = 400, 3, 4, 1e-5


def _accountant_eps(event) -> float:
    acc = Accountant()
    acc.record(event)
    return acc.epsilon(DELTA)[0]


def _ldp_scores(bits: np.ndarray, sigma: float, *, seeded_attacker: bool, mode: str) -> np.ndarray:
    """Canary embedding bit·C·1 released EPOCHS times as e + N(0, σ²); the server sums what it sees."""
    scores = np.zeros(len(bits))
    for epoch in range(EPOCHS):
        noise = NoiseSource.for_round(mode, seed=7, purpose="ldp", node=1, phase="train", epoch=epoch, step=0)
        e = np.repeat(bits[:, None].astype(np.float64), P, axis=1)
        seen = e + sigma * noise.normal((len(bits), P), dtype=torch.float64).numpy()
        if seeded_attacker:  # the seeded recipe is public: redraw the noise and remove it
            src = round_source(seed=7, purpose="ldp", node=1, phase="train", epoch=epoch, step=0)
            seen = seen - sigma * regenerate_normal(src, (len(bits), P))
        scores += seen.sum(axis=1)
    return scores


def _pbm_scores(bits: np.ndarray, b: int, beta: float, parties: int) -> np.ndarray:
    """SecAgg sum of `parties` PBM releases; the canary party holds bit·C, the others random inputs."""
    rng = np.random.default_rng(0)
    noise = NoiseSource.seeded("audit-test-pbm")
    scores = np.zeros(len(bits))
    for _ in range(EPOCHS):
        x = np.concatenate([np.repeat(bits[:, None], P, 1)[None], rng.uniform(-1, 1, (parties - 1, len(bits), P))])
        counts = sum(noise.binomial(b, torch.from_numpy(0.5 + beta * xm)) for xm in x)
        scores += (np.asarray(counts) - b * parties / 2).sum(axis=1)
    return scores


@pytest.mark.parametrize("sigma", [1.5, 4.0])
def test_ldp_audit_lower_bound_stays_below_the_accountant(sigma):
    _, bits = canary_design(num_train=10_000, m=M_CANARIES, seed=1)
    upper = _accountant_eps(GaussianEvent(sigma=sigma, sensitivity=2 * math.sqrt(P), count=EPOCHS))
    res = one_run_audit(_ldp_scores(bits, sigma, seeded_attacker=False, mode="crypto"), bits, delta=DELTA)
    assert res["epsilon_lower"] <= upper
    assert res["accuracy"] > 0.6  # the attacker does learn something: the test is not vacuous


@pytest.mark.parametrize(("b", "beta"), [(2, 0.1), (8, 0.2)])
def test_pbm_audit_lower_bound_stays_below_the_accountant(b, beta):
    _, bits = canary_design(num_train=10_000, m=M_CANARIES, seed=2)
    upper = _accountant_eps(PBMEvent(b=b, beta=beta, num_parties=3, dim=P, count=EPOCHS))
    res = one_run_audit(_pbm_scores(bits, b, beta, 3), bits, delta=DELTA)
    assert 0 < res["epsilon_lower"] <= upper


def test_seeded_noise_lets_the_audit_exceed_the_accountant():
    """With noise_rng: seeded the server regenerates the noise: perfect guesses, ε_lower > ε_upper."""
    _, bits = canary_design(num_train=10_000, m=M_CANARIES, seed=3)
    sigma = 30.0
    upper = _accountant_eps(GaussianEvent(sigma=sigma, sensitivity=2 * math.sqrt(P), count=EPOCHS))
    honest = one_run_audit(_ldp_scores(bits, sigma, seeded_attacker=False, mode="seeded"), bits, delta=DELTA)
    cheat = one_run_audit(_ldp_scores(bits, sigma, seeded_attacker=True, mode="seeded"), bits, delta=DELTA)
    assert honest["epsilon_lower"] <= upper < 1.0
    assert cheat["accuracy"] == 1.0 and cheat["epsilon_lower"] > upper


def test_regenerated_binomials_are_the_ones_the_mechanism_drew():
    x = np.random.default_rng(0).choice([-1.0, 1.0], size=(5, 3))
    src = dict(seed=11, purpose="pbm", node=2, phase="train", epoch=1, step=4)
    drawn = NoiseSource.for_round("seeded", **src).binomial(16, torch.from_numpy(0.5 + 0.1 * x)).numpy()
    plus = regenerate_binomial(round_source(**src), trials=16, p=0.6, shape=(5, 3))
    minus = regenerate_binomial(round_source(**src), trials=16, p=0.4, shape=(5, 3))
    assert np.all(plus >= minus)
    assert np.array_equal(np.where(x > 0, plus, minus), drawn)


def test_bound_is_zero_for_blind_guesses_and_grows_with_correct_ones():
    assert epsilon_lower_bound(m=100, r=50, v=25, delta=1e-5, alpha=0.05) == 0.0
    assert 0 < epsilon_lower_bound(m=100, r=50, v=45, delta=1e-5, alpha=0.05) < max_auditable_epsilon(m=100,
                                                                                                     delta=1e-5)
    assert p_value(m=100, r=50, v=50, epsilon=0.0, delta=0.0) == pytest.approx(0.5**50)
    rng = np.random.default_rng(0)
    bits = rng.choice([-1, 1], 500)
    assert one_run_audit(rng.normal(size=500), bits, delta=1e-5)["epsilon_lower"] < 0.5
