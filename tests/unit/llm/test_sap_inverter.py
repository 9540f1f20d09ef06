"""The learned token inverter, SanText's sampling law and the η calibration, on tiny embedding tables."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from vfl.attacks.inversion import learned_inversion, nearest_neighbor_inversion, train_inverter
from vfl.core.errors import ConfigError
from vfl.core.rng import NoiseSource
from vfl.privacy.mechanisms.dchi import calibrate_eta, nn_spacing, privatize
from vfl.privacy.mechanisms.santext import santext, santext_probs

V, D = 60, 16


@pytest.fixture(scope="module")
def table():
    return torch.randn(V, D, generator=torch.Generator().manual_seed(0))


def _pairs(table, n, eta, seed, bottom=None):
    tokens = torch.as_tensor(NoiseSource.seeded("tok", seed).integers(V, (n,)))
    x = table[tokens] if bottom is None else bottom(table[tokens])
    if eta is not None:
        x, _ = privatize(x, eta=eta, noise=NoiseSource.seeded("noise", seed))
    return x, tokens


def _rate(table, eta, bottom=None):
    feats, toks = _pairs(table, 3000, eta, 1, bottom)
    inv = train_inverter(features=feats, tokens=toks, vocab=table, hidden=64, epochs=12, lr=3e-3, batch_size=128,
                         generator=torch.Generator().manual_seed(0))
    test, truth = _pairs(table, 500, eta, 2, bottom)  # held out: fresh tokens, fresh noise
    return float((learned_inversion(test, inverter=inv) == truth).double().mean()), test, truth


def test_inverter_recovers_tokens_without_noise_and_fewer_with_noise(table):
    clean, _, _ = _rate(table, None)
    noisy, test, truth = _rate(table, 2.0)
    nn = float((nearest_neighbor_inversion(test, vocab=table) == truth).double().mean())
    assert clean > 0.95  # control: an undefended release is inverted
    assert noisy < clean - 0.3, (clean, noisy)
    assert noisy > 1.0 / V * 3 and noisy > nn - 0.1  # still far above chance, about as good as nearest neighbour


def test_inverter_reads_tokens_through_a_nonlinear_bottom(table):
    """Deeper splits: the release is no vocabulary row, nearest neighbour fails, the learned map does not."""
    w = torch.randn(D, D, generator=torch.Generator().manual_seed(5)) / math.sqrt(D)
    bottom = lambda e: torch.tanh(e @ w) * 3.0  # noqa: E731
    rate, test, truth = _rate(table, None, bottom)
    nn = float((nearest_neighbor_inversion(test, vocab=table) == truth).double().mean())
    assert rate > 0.9 and rate > nn + 0.3, (rate, nn)


def test_inverter_reads_releases_wider_than_the_table(table):
    """ELECTRA, OPT: the bottom projects the 16-wide table to a 32-wide hidden size; the inverter maps back."""
    w = torch.randn(D, 2 * D, generator=torch.Generator().manual_seed(6)) / math.sqrt(D)
    bottom = lambda e: torch.tanh(e @ w) * 3.0  # noqa: E731
    rate, test, _ = _rate(table, None, bottom)
    assert test.shape[1] == 2 * D and rate > 0.9, rate


def test_santext_follows_the_exponential_mechanism(table):
    eps = 1.5
    probs = santext_probs(torch.tensor([3]), table=table, epsilon=eps)[0]
    d = (table - table[3]).norm(dim=1).double()
    want = torch.exp(-0.5 * eps * d) / torch.exp(-0.5 * eps * d).sum()
    assert torch.allclose(probs, want, atol=1e-12)
    n = 40000
    ids = np.full(n, 3)
    draws = santext(ids, table=table, epsilon=eps, noise=NoiseSource.seeded("santext", 0))
    freq = np.bincount(draws, minlength=V) / n
    assert np.abs(freq - want.numpy()).max() < 4 * math.sqrt(want.max().item() / n)
    # the metric-DP bound: P(y|x)/P(y|x') <= exp(eps * d(x, x')) for every y
    pa, pb = santext_probs(torch.tensor([3, 7]), table=table, epsilon=eps)
    assert (pa / pb).max() <= math.exp(eps * float((table[3] - table[7]).norm())) + 1e-9


def test_santext_keeps_special_tokens_and_large_epsilon_keeps_the_text(table):
    ids = np.array([[0, 5, 9, 1], [0, 11, 1, 1]])
    out = santext(ids, table=table, epsilon=1e4, noise=NoiseSource.seeded("s", 1), keep=(0, 1))
    assert np.array_equal(out, ids)
    out = santext(ids, table=table, epsilon=1e-3, noise=NoiseSource.seeded("s", 2), keep=(0, 1))
    assert np.array_equal(out[ids <= 1], ids[ids <= 1]) and out.shape == ids.shape
    with pytest.raises(ConfigError, match="santext_epsilon"):
        santext(ids, table=table, epsilon=0.0, noise=NoiseSource.seeded("s", 3))


@pytest.mark.parametrize("target", [0.1, 0.5, 0.9])
def test_eta_calibration_hits_the_target_on_held_out_draws(table, target):
    eta, got, spacing = calibrate_eta(table=table, target=target, noise=NoiseSource.seeded("cal", 0), samples=400)
    assert abs(got - target) < 0.05 and spacing == pytest.approx(nn_spacing(table, rows=torch.arange(V)), rel=0.3)
    # held out: fresh tokens and fresh noise at the chosen η give about the target success
    feats, toks = _pairs(table, 4000, eta, 9)
    held = float((nearest_neighbor_inversion(feats, vocab=table) == toks).double().mean())
    assert abs(held - target) < 0.06, (eta, got, held)


def test_eta_calibration_scales_with_the_table():
    """The same target gives η inversely proportional to the embedding scale (the families' differing spacing)."""
    t = torch.randn(V, D, generator=torch.Generator().manual_seed(3))
    a, _, _ = calibrate_eta(table=t, target=0.3, noise=NoiseSource.seeded("c", 0))
    b, _, _ = calibrate_eta(table=10 * t, target=0.3, noise=NoiseSource.seeded("c", 0))
    assert b == pytest.approx(a / 10, rel=0.02)
    with pytest.raises(ConfigError, match="eia_target"):
        calibrate_eta(table=t, target=1.0, noise=NoiseSource.seeded("c", 0))


@pytest.mark.parametrize("params, key", [({"eta": "auto", "split": 1}, "params.eta"), ({"eta": "often"}, "params.eta"),
                                         ({"eta": "auto", "eia_target": 1.5}, "params.eia_target"),
                                         ({"santext_epsilon": 0}, "params.santext_epsilon")])
def test_sap_refuses_eta_auto_off_split_0_and_bad_targets(params, key):
    import strategies  # noqa: F401
    from vfl.engine.schema import load_run_config

    with pytest.raises(ConfigError, match=key):
        load_run_config({"strategy": "sap", "num_parties": 1, "params": params})
    assert load_run_config({"strategy": "sap", "num_parties": 1, "params": {"eta": "auto"}}).params.eta == "auto"
