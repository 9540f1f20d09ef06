"""The exact discrete Gaussian sampler (CKS NeurIPS 2020): its distribution against the pmf, and that it
draws from the NoiseSource only (no torch/numpy generator, reproducible from the key alone)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from vfl.core.rng import NoiseSource
from vfl.privacy.mechanisms.discrete_gaussian import (
    MAX_SIGMA2,
    _below,
    bernoulli_exp,
    bernoulli_exp_fraction,
    discrete_gaussian,
    discrete_gaussian_pmf,
    discrete_laplace,
)
from vfl.privacy.mechanisms.gaussian import discrete_gaussian_perturb, grid_codes, ldp_grid

DRAWS = 200_000
P_MIN = 1e-4  # fixed tolerance: a correct sampler fails this 1 time in 10^4 per check


def _chi_square(sample: np.ndarray, z: np.ndarray, pmf: np.ndarray) -> float:
    """p-value of the chi-square test of ``sample`` against ``pmf`` on ``z`` (bins of expected count < 20
    merged into the two tails)."""
    expected = pmf * sample.size
    core = np.flatnonzero(expected >= 20)
    lo, hi = z[core[0]], z[core[-1]]
    observed = [np.sum(sample < lo)] + [np.sum(sample == v) for v in z[core]] + [np.sum(sample > hi)]
    exp_ = [expected[: core[0]].sum()] + list(expected[core]) + [expected[core[-1] + 1:].sum()]
    obs, ex = np.array(observed, float), np.array(exp_, float)
    keep = ex > 0
    assert obs[~keep].sum() == 0, "draws where the pmf has no mass"
    return float(stats.chisquare(obs[keep], ex[keep] * obs[keep].sum() / ex[keep].sum()).pvalue)


@pytest.mark.parametrize("sigma2", [1, 3, 50])
def test_draws_follow_the_pmf(sigma2):
    sample = discrete_gaussian(NoiseSource.seeded("dg", sigma2), sigma2=sigma2, size=DRAWS)
    z, pmf = discrete_gaussian_pmf(sigma2=sigma2, support=int(12 * math.sqrt(sigma2)) + 2)
    assert _chi_square(sample, z, pmf) > P_MIN


def test_a_wrong_pmf_is_rejected_by_the_same_test():
    """The chi-square check can fail: σ² = 3 draws are far from the σ² = 3.3 pmf."""
    sample = discrete_gaussian(NoiseSource.seeded("dg-wrong"), sigma2=3, size=DRAWS)
    z, pmf = discrete_gaussian_pmf(sigma2=3.3, support=30)
    assert _chi_square(sample, z, pmf) < P_MIN


def test_moments_at_the_demo_grid_variance():
    """At the LDP demo's grid (σ² ≈ 2^23) the exact variance ≈ σ² and mean 0, within 5 standard errors."""
    levels, sigma2 = ldp_grid(sigma=math.sqrt(8.0), c=1.0)
    assert 1 << 22 <= sigma2 <= MAX_SIGMA2 and levels == 1024
    sample = discrete_gaussian(NoiseSource.seeded("dg-demo"), sigma2=sigma2, size=DRAWS).astype(np.float64)
    se_mean = math.sqrt(sigma2 / DRAWS)
    se_var = sigma2 * math.sqrt(2.0 / DRAWS)
    assert abs(sample.mean()) < 5 * se_mean
    assert abs(sample.var() - sigma2) < 5 * se_var
    # the 4th moment of a Gaussian is 3σ⁴: checks the tails, not just the spread
    assert abs(np.mean(sample ** 4) / sigma2 ** 2 - 3.0) < 0.1


@pytest.mark.parametrize("n", [3, 3 << 30, 3 << 40])
def test_uniform_integers_below_n_have_no_modulo_bias(n):
    """[0, n) uniform on the 32-bit path (3·2^30: a quarter of the words rejected) and the 63-bit one;
    the residues mod 3 and the lower half have their exact shares (a plain word % n fails the
    second: p = 0 on 200 000 draws at n = 3·2^30)."""
    draws = _below(NoiseSource.seeded("below", n), np.full(DRAWS, n, np.int64))
    assert draws.min() >= 0 and draws.max() < n
    assert stats.chisquare(np.bincount(draws % 3, minlength=3)).pvalue > P_MIN
    assert stats.binomtest(int((draws < n // 2).sum()), DRAWS, (n // 2) / n).pvalue > P_MIN


def test_bernoulli_exp_matches_exp_minus_gamma():
    n = 100_000
    noise = NoiseSource.seeded("bexp")
    for whole, num, den in ((0, 1, 3), (0, 5, 5), (2, 1, 2), (4, 0, 7)):
        coins = bernoulli_exp(noise, np.full(n, whole, np.int64), np.full(n, num, np.int64),
                              np.full(n, den, np.int64))
        p = math.exp(-(whole + num / den))
        assert abs(coins.mean() - p) < 5 * math.sqrt(p * (1 - p) / n) + 1e-9
    frac = bernoulli_exp_fraction(noise, np.zeros(1000, np.int64), np.ones(1000, np.int64))
    assert frac.all()  # exp(0) = 1 exactly


def test_discrete_laplace_follows_its_pmf():
    t = 3
    sample = discrete_laplace(NoiseSource.seeded("dlap"), t=t, size=DRAWS)
    z = np.arange(-80, 81)
    w = np.exp(-np.abs(z) / t)
    assert _chi_square(sample, z, w / w.sum()) > P_MIN


def test_draws_come_from_the_noise_source_only():
    """Same key -> same draws; other key -> other draws; torch's and numpy's global generators untouched."""
    torch_state, np_state = torch.get_rng_state(), np.random.get_state()
    a = discrete_gaussian(NoiseSource.seeded("k"), sigma2=1000, size=5000)
    b = discrete_gaussian(NoiseSource.seeded("k"), sigma2=1000, size=5000)
    c = discrete_gaussian(NoiseSource.seeded("other"), sigma2=1000, size=5000)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert torch.equal(torch.get_rng_state(), torch_state)
    after = np.random.get_state()
    assert np_state[0] == after[0] and np.array_equal(np_state[1], after[1]) and np_state[2:] == after[2:]


def test_no_other_generator_is_touched(monkeypatch):
    """Every generator of numpy, torch and ``random`` raises if called: the sampler still runs."""
    import random

    def refuse(*args, **kwargs):
        raise AssertionError("the sampler used a generator other than its NoiseSource")

    for mod, names in ((np.random, ("default_rng", "random", "randint", "normal", "binomial", "seed")),
                       (torch, ("rand", "randn", "randint", "normal", "bernoulli", "multinomial")),
                       (random, ("random", "randint", "getrandbits", "gauss"))):
        for name in names:
            monkeypatch.setattr(mod, name, refuse)
    with pytest.raises(AssertionError, match="NoiseSource"):  # the trap is set (torch's own Gaussian trips it)
        torch.randn(3)
    x = torch.zeros(8, 16)
    assert discrete_gaussian_perturb(x, sigma=2.0, c=1.0, noise=NoiseSource.seeded("only")).shape == x.shape
    assert discrete_gaussian(NoiseSource.fresh(), sigma2=7, size=1000).size == 1000


def test_fresh_sources_are_not_reproducible():
    a = discrete_gaussian(NoiseSource.fresh(), sigma2=1000, size=2000)
    b = discrete_gaussian(NoiseSource.fresh(), sigma2=1000, size=2000)
    assert not np.array_equal(a, b)


def test_bad_variance_is_refused():
    with pytest.raises(ValueError, match="sigma2"):
        discrete_gaussian(NoiseSource.seeded(0), sigma2=MAX_SIGMA2 + 1, size=1)
    with pytest.raises(ValueError, match="sigma2"):
        discrete_gaussian(NoiseSource.seeded(0), sigma2=0, size=1)


def test_grid_sigma_is_never_below_the_accounted_one_and_sensitivity_does_not_grow():
    for sigma, c in ((math.sqrt(8.0), 1.0), (0.37, 2.5), (1e-3, 1.0), (4000.0, 1.0), (3.0, 0.1)):
        levels, sigma2 = ldp_grid(sigma=sigma, c=c)
        assert levels & (levels - 1) == 0 and sigma2 >= (sigma * levels / c) ** 2 * (1 - 1e-15)
        assert math.sqrt(sigma2) * c / levels < sigma * (1 + 2.0 ** -20)  # rounding up costs < 1e-6 relative
    x = torch.tensor([[-5.0, -1.0, -0.3, 0.0, 0.999, 1.0, 7.0]])
    codes = grid_codes(x, c=1.0, levels=1024)
    assert int(codes.min()) == -1024 and int(codes.max()) == 1024  # clamped: |code - code'| <= 2L


def test_perturb_outputs_are_lattice_points_with_the_configured_spread():
    x = torch.rand(64, 16) * 2 - 1
    y = discrete_gaussian_perturb(x, sigma=math.sqrt(8.0), c=1.0, noise=NoiseSource.seeded("p"))
    levels, _ = ldp_grid(sigma=math.sqrt(8.0), c=1.0)
    k = y.double() * levels
    assert y.dtype == torch.float32 and torch.equal(k, torch.round(k))
    assert abs(float((y - x).std()) - math.sqrt(8.0)) < 0.2
