"""PBM encode/decode (unbiased, variance formulas, reproducible) and the LDP Gaussian baseline."""

from __future__ import annotations

import math

import pytest
import torch

from vfl.core.errors import ConfigError
from vfl.core.rng import NoiseSource
from vfl.privacy import (
    gaussian_perturb,
    ldp_sigma,
    pbm_conditional_variance,
    pbm_decode,
    pbm_encode,
    pbm_variance,
    validate_pbm,
)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)  # test inputs only


def _noise(seed: int = 0) -> NoiseSource:
    return NoiseSource.seeded("test-mechanisms", seed)


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"b": 0, "beta": 0.1, "c": 1.0}, "b"),
    ({"b": 2.5, "beta": 0.1, "c": 1.0}, "b"),
    ({"b": True, "beta": 0.1, "c": 1.0}, "b"),
    ({"b": 4, "beta": 0.0, "c": 1.0}, "beta"),
    ({"b": 4, "beta": 0.26, "c": 1.0}, "beta"),
    ({"b": 4, "beta": float("nan"), "c": 1.0}, "beta"),
    ({"b": 4, "beta": 0.1, "c": 0.0}, "c"),
    ({"b": 4, "beta": 0.1, "c": float("inf")}, "c"),
])
def test_validate_pbm_names_the_key(kwargs, key):
    with pytest.raises(ConfigError) as info:
        validate_pbm(**kwargs)
    assert info.value.key == key
    assert str(info.value).startswith(f"{key}:")


def test_validate_pbm_accepts_the_domain_edges():
    validate_pbm(b=1, beta=0.25, c=1.0)
    validate_pbm(b=128, beta=1e-6, c=3.0)


def test_encode_is_int64_in_range_and_reproducible():
    x = torch.rand(64, 16, generator=_gen(9)) * 2 - 1
    q1 = pbm_encode(x, b=16, beta=0.2, c=1.0, noise=_noise(1))
    q2 = pbm_encode(x, b=16, beta=0.2, c=1.0, noise=_noise(1))
    q3 = pbm_encode(x, b=16, beta=0.2, c=1.0, noise=_noise(2))
    assert q1.dtype == torch.int64 and q1.shape == x.shape
    assert int(q1.min()) >= 0 and int(q1.max()) <= 16
    assert torch.equal(q1, q2)
    assert not torch.equal(q1, q3)


def test_encode_clamps_out_of_range_inputs_to_plus_minus_c():
    """An input beyond ±c releases exactly what ±c releases (p stays in [1/2 − β, 1/2 + β], the
    accounted range); clamping p to [0, 1] instead gave deterministic counts 0 and b."""
    c, n = 2.0, 20_000
    far = torch.tensor([-100.0 * c, 100.0 * c, -1.0001 * c, float("inf")]).repeat(n)
    edge = torch.tensor([-c, c, -c, c]).repeat(n)
    q_far = pbm_encode(far, b=8, beta=0.25, c=c, noise=_noise(11))
    q_edge = pbm_encode(edge, b=8, beta=0.25, c=c, noise=_noise(11))
    assert torch.equal(q_far, q_edge)  # same coins, same thresholds: the same distribution exactly
    low, high = q_far.reshape(n, 4)[:, 0].double(), q_far.reshape(n, 4)[:, 1].double()
    assert float(high.std()) > 1.0 and float(low.std()) > 1.0  # Bin(8, 3/4) noise, not the p-clamp's fixed 0 / b
    assert float(high.mean()) == pytest.approx(8 * 0.75, abs=0.05)
    assert float(low.mean()) == pytest.approx(8 * 0.25, abs=0.05)
    with pytest.raises(ValueError, match="NaN"):
        pbm_encode(torch.tensor([float("nan")]), b=8, beta=0.25, c=c, noise=_noise())


@pytest.mark.parametrize(("b", "beta", "c", "m"), [(16, 0.25, 1.0, 3), (4, 0.1, 2.0, 5)])
def test_decode_unbiased_with_worst_case_variance_at_zero(b, beta, c, m):
    n = 200_000
    q = pbm_encode(torch.zeros(m, n), b=b, beta=beta, c=c, noise=_noise(3))
    est = pbm_decode(q.sum(0), b=b, beta=beta, c=c, num_parties=m).double()
    var = pbm_variance(b=b, beta=beta, c=c, num_parties=m)
    assert var == pytest.approx(c * c * m / (4 * beta * beta * b))
    assert abs(float(est.mean())) < 5 * math.sqrt(var / n)
    # the sample variance of a near-Gaussian has relative std sqrt(2/n)
    assert float(est.var()) == pytest.approx(var, rel=5 * math.sqrt(2 / n))


def test_decode_unbiased_with_input_dependent_variance():
    b, beta, c, m, n = 8, 0.2, 1.5, 4, 200_000
    x = (torch.rand(m, 1, generator=_gen(5)) * 2 - 1) * c
    q = pbm_encode(x.expand(m, n), b=b, beta=beta, c=c, noise=_noise(6))
    est = pbm_decode(q.sum(0), b=b, beta=beta, c=c, num_parties=m).double()
    var = float(pbm_conditional_variance(x, b=b, beta=beta, c=c)[0])
    assert var < pbm_variance(b=b, beta=beta, c=c, num_parties=m)
    assert abs(float(est.mean()) - float(x.sum())) < 5 * math.sqrt(var / n)
    assert float(est.var()) == pytest.approx(var, rel=5 * math.sqrt(2 / n))


def test_conditional_variance_equals_worst_case_at_zero_only():
    worst = pbm_variance(b=8, beta=0.2, c=1.0, num_parties=3)
    assert float(pbm_conditional_variance(torch.zeros(3), b=8, beta=0.2, c=1.0)) == pytest.approx(worst)
    assert float(pbm_conditional_variance(torch.tensor([0.0, 0.0, 0.5]), b=8, beta=0.2, c=1.0)) < worst


def test_decode_rejects_bad_party_count():
    with pytest.raises(ConfigError) as info:
        pbm_decode(torch.zeros(3), b=4, beta=0.1, c=1.0, num_parties=0)
    assert info.value.key == "num_parties"


def test_ldp_sigma_is_the_papers_formula_scaled_by_c():
    assert ldp_sigma(b=16, beta=0.25, num_parties=10) == pytest.approx(math.sqrt(2 * 10 / (16 * 0.25**2)))
    assert ldp_sigma(b=16, beta=0.25, num_parties=10, c=3.0) == pytest.approx(
        3.0 * ldp_sigma(b=16, beta=0.25, num_parties=10))


def test_gaussian_perturb_reproducible_with_the_right_std():
    x = torch.zeros(100_000)
    y1 = gaussian_perturb(x, sigma=2.5, noise=_noise(4))
    y2 = gaussian_perturb(x, sigma=2.5, noise=_noise(4))
    assert torch.equal(y1, y2)
    assert float(y1.std()) == pytest.approx(2.5, rel=0.02)
    assert torch.equal(gaussian_perturb(x[:5] + 1.0, sigma=0.0, noise=_noise()), x[:5] + 1.0)
    with pytest.raises(ConfigError) as info:
        gaussian_perturb(x, sigma=-1.0, noise=_noise())
    assert info.value.key == "sigma"
