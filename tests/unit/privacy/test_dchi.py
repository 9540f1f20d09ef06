"""dχ noise (density ∝ exp(−η‖n‖)): norm ~ Gamma(d, scale 1/η), isotropic directions, snapping."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from vfl.core.errors import ConfigError
from vfl.core.rng import NoiseSource
from vfl.privacy.mechanisms.dchi import dchi_noise, nearest_rows, privatize


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)  # test inputs only


def _noise(seed: int = 0) -> NoiseSource:
    return NoiseSource.seeded("test-dchi", seed)


@pytest.mark.parametrize(("dim", "eta"), [(8, 2.0), (384, 75.0)])
def test_norm_is_gamma_with_scale_one_over_eta(dim, eta):
    n = 20_000
    norms = dchi_noise(rows=n, dim=dim, eta=eta, noise=_noise()).norm(dim=1).double().numpy()
    se = math.sqrt(dim) / eta / math.sqrt(n)  # Gamma(d, 1/η) has std sqrt(d)/η
    assert abs(norms.mean() - dim / eta) < 5 * se
    assert abs(norms.var() - dim / eta**2) < 0.1 * dim / eta**2
    # the whole distribution, not just the mean (a RATE/SCALE mix-up fails here)
    assert stats.kstest(norms, stats.gamma(a=dim, scale=1 / eta).cdf).pvalue > 1e-3


def test_directions_are_isotropic():
    dim, n = 6, 40_000
    noise = dchi_noise(rows=n, dim=dim, eta=1.0, noise=_noise(1)).double()
    u = (noise / noise.norm(dim=1, keepdim=True)).numpy()
    assert np.abs(u.mean(0)).max() < 5 / math.sqrt(dim * n)  # each coordinate has variance 1/d
    cov = u.T @ u / n
    np.testing.assert_allclose(cov, np.eye(dim) / dim, atol=0.01)


def test_per_row_eta_and_infinite_eta():
    eta = torch.tensor([1.0, 4.0, float("inf")]).repeat(5000)
    norms = dchi_noise(rows=len(eta), dim=16, eta=eta, noise=_noise(2)).norm(dim=1).reshape(-1, 3)
    assert abs(norms[:, 0].mean().item() - 16.0) < 0.3
    assert abs(norms[:, 1].mean().item() - 4.0) < 0.1
    assert torch.all(norms[:, 2] == 0)
    assert torch.all(dchi_noise(rows=3, dim=4, eta=math.inf, noise=_noise()) == 0)


@pytest.mark.parametrize("eta", [0.0, -1.0, float("nan")])
def test_rejects_bad_eta(eta):
    with pytest.raises(ConfigError, match="eta"):
        dchi_noise(rows=2, dim=3, eta=eta, noise=_noise())
    with pytest.raises(ConfigError, match="eta"):
        dchi_noise(rows=2, dim=3, eta=torch.tensor([1.0, eta]), noise=_noise())


def test_same_seeded_source_same_noise():
    a = dchi_noise(rows=4, dim=5, eta=3.0, noise=_noise(7))
    b = dchi_noise(rows=4, dim=5, eta=3.0, noise=_noise(7))
    assert torch.equal(a, b)
    assert not torch.equal(a, dchi_noise(rows=4, dim=5, eta=3.0, noise=_noise(8)))


def test_nearest_rows_matches_brute_force():
    g = _gen(3)
    table, x = torch.randn(500, 12, generator=g), torch.randn(300, 12, generator=g)
    want = torch.cdist(x, table).argmin(1)
    assert torch.equal(nearest_rows(x, table=table, chunk=64), want)


def test_privatize_snaps_to_table_rows():
    g = _gen(4)
    table = torch.randn(50, 10, generator=g)
    ids = torch.randint(0, 50, (200,), generator=g)
    noise = _noise(4)
    out, snapped = privatize(table[ids], eta=math.inf, noise=noise, table=table)
    assert torch.equal(snapped, ids) and torch.equal(out, table[ids])  # no noise: identity
    out, snapped = privatize(table[ids], eta=0.5, noise=noise, table=table)
    assert torch.equal(out, table[snapped])  # every released vector is a vocabulary row
    assert (snapped != ids).any()
    noisy, none = privatize(table[ids], eta=2.0, noise=noise)
    assert none is None and not torch.equal(noisy, table[ids])
