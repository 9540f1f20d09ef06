"""Marvell: the power constraint, the covariance structure of the noise, and optimality of the solve."""

from __future__ import annotations

import numpy as np
import pytest

import strategies  # noqa: F401
from simulations.data.source import ConfigDataSource
from vfl.core.errors import ConfigError
from vfl.core.rng import NoiseSource
from vfl.engine.schema import load_run_config
from vfl.engine.strategy import STRATEGIES
from vfl.privacy.mechanisms.marvell import marvell_perturb, solve, sym_kl

D, N = 8, 20_000


def _batch(seed=0, n=N, pos=0.3):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < pos
    g = rng.normal(size=(n, D)) * np.where(y, 0.3, 0.1)[:, None] + np.where(y, 1.0, -0.3)[:, None] * np.eye(D)[0]
    return g, y


def test_noise_meets_the_power_constraint_exactly_and_empirically():
    g, y = _batch()
    out, sol = marvell_perturb(g, y, strength=4.0, noise=NoiseSource.fresh())
    delta = g[y].mean(0) - g[~y].mean(0)
    p = y.mean()
    budget = 4.0 * float(delta @ delta)
    assert sol.power(p=p, dim=D) == pytest.approx(budget, rel=1e-9)  # the budget is spent, never exceeded
    z = out.astype(np.float64) - g
    emp = p * (z[y] ** 2).sum(1).mean() + (1 - p) * (z[~y] ** 2).sum(1).mean()
    assert abs(emp / budget - 1) < 0.05


def test_noise_covariance_has_the_papers_form_per_class():
    """Σᵢ = λᵢ⁽¹⁾ ŵŵᵀ + λᵢ⁽²⁾ (I − ŵŵᵀ), ŵ = Δ/‖Δ‖: variance λ⁽¹⁾ along Δ, λ⁽²⁾ across, no cross terms."""
    g, y = _batch(1)
    out, sol = marvell_perturb(g, y, strength=4.0, noise=NoiseSource.fresh())
    z = out.astype(np.float64) - g
    w = sol.direction
    assert abs(np.linalg.norm(w) - 1) < 1e-9
    for cls in (0, 1):
        zc = z[y == bool(cls)]
        along = zc @ w
        rest = zc - np.outer(along, w)
        n = len(zc)
        assert abs(along.var() - sol.along[cls]) <= 5 * np.sqrt(2 / n) * sol.along[cls] + 1e-12
        ortho_var = (rest**2).sum(1).mean() / (D - 1)
        assert abs(ortho_var - sol.ortho[cls]) <= 5 * np.sqrt(2 / (n * (D - 1))) * max(sol.ortho[cls], 1e-4)
        assert abs(np.mean(along[:, None] * rest)) < 5 * np.sqrt(sol.along[cls] * max(sol.ortho[cls], 1e-4) / n) + 1e-6


def test_solve_beats_every_other_split_of_the_same_budget():
    g, y = _batch(2)
    x1, x0 = g[y], g[~y]
    d = x1.mean(0) - x0.mean(0)
    d2 = float(d @ d)
    v, u = ((x1 - x1.mean(0)) ** 2).sum(1).mean() / D, ((x0 - x0.mean(0)) ** 2).sum(1).mean() / D
    p = y.mean()
    sol = solve(delta2=d2, u=u, v=v, p=p, dim=D, power=4 * d2)
    before = sym_kl(a0=u, a1=v, b0=u, b1=v, delta2=d2, dim=D)
    iso = 4 * d2 / D  # the same power as isotropic noise on both classes
    isotropic = sym_kl(a0=u + iso, a1=v + iso, b0=u + iso, b1=v + iso, delta2=d2, dim=D)
    along_only = [sym_kl(a0=u + t * 4 * d2 / (1 - p), a1=v + (1 - t) * 4 * d2 / p, b0=u, b1=v, delta2=d2, dim=D)
                  for t in np.linspace(0, 1, 11)]
    assert sol.objective < isotropic < before
    assert sol.objective <= min(along_only) + 1e-9


def test_a_batch_with_one_class_reuses_the_previous_noise():
    g, y = _batch(3, n=200)
    _, sol = marvell_perturb(g, y, strength=2.0, noise=NoiseSource.fresh())
    same = np.ones(50, bool)
    out, used = marvell_perturb(g[:50], same, strength=2.0, noise=NoiseSource.fresh(), fallback=sol)
    assert used is sol and not np.allclose(out, g[:50])
    out, used = marvell_perturb(g[:50], same, strength=2.0, noise=NoiseSource.fresh(), fallback=None)
    assert used is None and np.allclose(out, g[:50])


def test_marvell_is_refused_on_a_multiclass_dataset_in_one_line():
    cfg = load_run_config({"strategy": "npq", "dataset": "digits", "defenses": [{"kind": "marvell"}]})
    with pytest.raises(ConfigError, match=r"^defenses\[0\]\.kind: Marvell needs binary labels; the dataset has "
                                          r"10 classes$"):
        STRATEGIES.get("npq")(cfg).prepare(ConfigDataSource.from_config(cfg))
    ok = load_run_config({"strategy": "npq", "dataset": "breast-cancer", "defenses": [{"kind": "marvell"}]})
    STRATEGIES.get("npq")(ok).prepare(ConfigDataSource.from_config(ok))
