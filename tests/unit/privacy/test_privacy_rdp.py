"""Exact PBM Rényi DP against brute force, its caps and worst case, and the paper's formulas."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import binom

from vfl.core.errors import ConfigError
from vfl.privacy import (
    gaussian_style_estimate,
    log_convolve_concave,
    pbm_pure_dp,
    pbm_rdp_bruteforce,
    pbm_rdp_cap,
    pbm_rdp_profile,
    renyi_divergence,
    sample_privacy_factor,
    theorem_6_1_final,
    theorem_6_1_per_iteration,
    theorem_6_2_sample,
)
from vfl.privacy.accounting.pbm_rdp import _bruteforce_sum_pmf, pbm_rdp

ORDERS = [1.1, 1.5, 2.0, 3.0, 5.0, 10.0, 32.0, 256.0]


def _full_log_convolve(la, lb):
    out = np.full(la.size + lb.size - 1, -np.inf)
    for i, v in enumerate(la):
        out[i:i + lb.size] = np.logaddexp(out[i:i + lb.size], v + lb)
    return out


def _both_ways(lp, lq, orders):
    return np.maximum(renyi_divergence(lp, lq, orders), renyi_divergence(lq, lp, orders))


@pytest.mark.parametrize(("m", "b", "beta"), list(itertools.product([1, 2, 3], [1, 2, 3], [0.1, 0.25])))
def test_exact_equals_bruteforce(m, b, beta):
    exact = pbm_rdp_profile(b=b, beta=beta, num_parties=m, orders=ORDERS).max(axis=0)
    brute = pbm_rdp_bruteforce(b=b, beta=beta, num_parties=m, orders=ORDERS)
    np.testing.assert_allclose(exact, brute, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(("na", "nb", "pa", "pb"), [(1, 7, 0.75, 0.25), (40, 90, 0.6, 0.4), (600, 500, 0.75, 0.25)])
def test_log_convolution_matches_direct_sum(na, nb, pa, pb):
    la = binom.logpmf(np.arange(na + 1), na, pa)
    lb = binom.logpmf(np.arange(nb + 1), nb, pb)
    fast = log_convolve_concave(la, lb)
    ref = _full_log_convolve(la, lb)
    np.testing.assert_allclose(fast, ref, rtol=1e-12, atol=1e-12)
    if na + nb > 1000:
        assert ref.min() < -700  # far tails, which a linear-space convolution would lose, are covered


def test_spec_example_exceeds_gaussian_style_estimate():
    exact = float(pbm_rdp(b=16, beta=0.25, num_parties=10, orders=[2.0])[0])
    heuristic = gaussian_style_estimate(b=16, beta=0.25, num_parties=10, alpha=2.0)
    assert exact == pytest.approx(2.4315, abs=5e-4)
    assert heuristic == pytest.approx(1.60)
    assert exact > heuristic


def test_single_party_is_b_times_bernoulli_divergence():
    b, beta = 7, 0.2
    hi, lo = 0.5 + beta, 0.5 - beta
    a = np.array(ORDERS)
    bern = np.log(hi**a * lo ** (1 - a) + lo**a * hi ** (1 - a)) / (a - 1)
    np.testing.assert_allclose(pbm_rdp(b=b, beta=beta, num_parties=1, orders=a),
                               np.minimum(b * bern, pbm_rdp_cap(b=b, beta=beta, orders=a)), rtol=1e-10)


@pytest.mark.parametrize(("m", "b", "beta"), [(2, 4, 0.25), (5, 16, 0.1), (10, 16, 0.25), (12, 64, 0.05)])
def test_caps_hold_and_curve_is_monotone(m, b, beta):
    orders = np.array([1.02, 1.5, 2, 4, 8, 16, 64, 256, 1024])
    raw = pbm_rdp_profile(b=b, beta=beta, num_parties=m, orders=orders).max(axis=0)
    cap = pbm_rdp_cap(b=b, beta=beta, orders=orders)
    eps_inf = pbm_pure_dp(b=b, beta=beta)
    assert cap == pytest.approx(np.minimum(eps_inf, orders * eps_inf**2 / 2))
    assert np.all(raw <= cap * (1 + 1e-9))  # the exact value respects the caps on its own
    rdp = pbm_rdp(b=b, beta=beta, num_parties=m, orders=orders)
    assert np.all(rdp <= cap) and np.all(rdp > 0)
    assert np.all(np.diff(rdp) >= -1e-12)  # Rényi divergence is non-decreasing in alpha


def test_more_parties_never_leak_more():
    curves = [pbm_rdp(b=8, beta=0.2, num_parties=m, orders=ORDERS) for m in (1, 2, 3, 5, 8)]
    pairs = list(itertools.pairwise(curves))
    assert len(pairs) == 4 and all(len(c) == len(ORDERS) > 0 for c in curves)  # something is compared
    for fewer, more in pairs:
        assert np.all(more <= fewer + 1e-12)


@pytest.mark.parametrize(("m", "b", "beta"), [(3, 2, 0.25), (3, 3, 0.1), (4, 2, 0.2)])
def test_coin_level_vertices_never_exceed_party_vertices(m, b, beta):
    """Interior inputs are mixtures of vertex COINS; the max over coin configurations of the
    other parties (an upper bound on the sup over all inputs) equals the party-vertex max."""
    hi, lo = 0.5 + beta, 0.5 - beta
    n = (m - 1) * b
    coin = np.zeros(len(ORDERS))
    for j in range(n + 1):
        others = log_convolve_concave(binom.logpmf(np.arange(j + 1), j, hi),
                                      binom.logpmf(np.arange(n - j + 1), n - j, lo))
        lp = log_convolve_concave(binom.logpmf(np.arange(b + 1), b, hi), others)
        lq = log_convolve_concave(binom.logpmf(np.arange(b + 1), b, lo), others)
        coin = np.maximum(coin, _both_ways(lp, lq, ORDERS))
    party = pbm_rdp_profile(b=b, beta=beta, num_parties=m, orders=ORDERS).max(axis=0)
    np.testing.assert_allclose(coin, party, rtol=1e-9)


def test_interior_inputs_never_exceed_the_vertex_value():
    b, beta, m = 2, 0.25, 3
    grid = np.linspace(0.5 - beta, 0.5 + beta, 4)
    exact = pbm_rdp(b=b, beta=beta, num_parties=m, orders=ORDERS)
    worst = np.zeros(len(ORDERS))
    for others in itertools.product(grid, repeat=m - 1):
        for p, p2 in itertools.combinations(grid, 2):
            lp = np.log(_bruteforce_sum_pmf([p, *others], b))
            lq = np.log(_bruteforce_sum_pmf([p2, *others], b))
            worst = np.maximum(worst, _both_ways(lp, lq, ORDERS))
    assert np.all(worst <= exact * (1 + 1e-9))
    np.testing.assert_allclose(worst, exact, rtol=1e-9)  # the grid contains the vertices


def test_pbm_rdp_rejects_bad_orders_and_parties():
    with pytest.raises(ConfigError) as info:
        pbm_rdp(b=4, beta=0.1, num_parties=2, orders=[1.0, 2.0])
    assert info.value.key == "orders"
    with pytest.raises(ConfigError) as info:
        pbm_rdp(b=4, beta=0.1, num_parties=0, orders=[2.0])
    assert info.value.key == "num_parties"
    with pytest.raises(ConfigError) as info:
        pbm_rdp(b=4, beta=0.3, num_parties=2, orders=[2.0])
    assert info.value.key == "beta"


def test_renyi_divergence_of_gaussian_like_pmfs_is_stable_in_log_space():
    lp = binom.logpmf(np.arange(2001), 2000, 0.6)
    lq = binom.logpmf(np.arange(2001), 2000, 0.4)
    # D_alpha between binomials tensorizes: n * D_alpha(Bern(.6) || Bern(.4))
    a = 50.0
    bern = logsumexp([a * math.log(0.6) + (1 - a) * math.log(0.4), a * math.log(0.4) + (1 - a) * math.log(0.6)])
    assert renyi_divergence(lp, lq, [a])[0] == pytest.approx(2000 * bern / (a - 1), rel=1e-10)


# ---- the paper's formulas (Theorems 6.1 / 6.2) ----

def test_theorem_6_1_formulas():
    per_it = theorem_6_1_per_iteration(c0=2.0, dim=16, b=16, beta=0.25, num_parties=10, alpha=2.0)
    assert per_it == pytest.approx(2.0 * 16 * 16 * 0.0625 * 2.0 / 10)
    final = theorem_6_1_final(c0=2.0, iterations=7352, batch=100, dataset_size=7352, dim=16, b=16, beta=0.25,
                              num_parties=10, alpha=2.0)
    assert final == pytest.approx(per_it * 7352 * 100 / 7352)


def test_theorem_constants_are_required_and_checked():
    with pytest.raises(TypeError):
        theorem_6_1_per_iteration(dim=1, b=1, beta=0.1, num_parties=2, alpha=2.0)  # type: ignore[call-arg]
    with pytest.raises(ConfigError) as info:
        theorem_6_2_sample(c0=0.0, dim=1, b=1, beta=0.1, num_parties=2, alpha=2.0)
    assert info.value.key == "c0"
    with pytest.raises(ConfigError) as info:
        sample_privacy_factor(num_parties=1, alpha=2.0)
    assert info.value.key == "num_parties"
    with pytest.raises(ConfigError) as info:
        sample_privacy_factor(num_parties=3, alpha=1.0)
    assert info.value.key == "alpha"


@pytest.mark.parametrize("alpha", [1.5, 2.0, 8.0])
def test_theorem_6_2_factor(alpha):
    assert sample_privacy_factor(num_parties=2, alpha=alpha) == pytest.approx(4 * alpha + 1 / (alpha - 1))
    for m in range(2, 10):
        assert sample_privacy_factor(num_parties=m, alpha=alpha) > m * alpha  # paper Remark 6.3
    s3 = 10 * alpha - 3 + 3 / (2 * (alpha - 1))  # (16 - 4 - 2)alpha - (12 - 9) + 3/(2(alpha-1))
    assert sample_privacy_factor(num_parties=3, alpha=alpha) == pytest.approx(s3)
    assert theorem_6_2_sample(c0=1.5, dim=4, b=8, beta=0.1, num_parties=3, alpha=alpha) == pytest.approx(
        1.5 * 4 * 8 * 0.01 * s3 / 3)
