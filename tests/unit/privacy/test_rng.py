"""The two kinds of randomness: seeded streams (reproducible) and the keystream noise source."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from scipy import stats

from vfl.core.rng import NoiseSource, derive_seed, seeded_numpy, seeded_torch


def test_fresh_sources_differ_and_seeded_ones_repeat():
    a, b = NoiseSource.fresh(), NoiseSource.fresh()
    assert not np.array_equal(a.words(64), b.words(64))
    s1, s2, s3 = NoiseSource.seeded(0, "pbm", 1), NoiseSource.seeded(0, "pbm", 1), NoiseSource.seeded(0, "pbm", 2)
    w1 = s1.words(64)
    assert np.array_equal(w1, s2.words(64))
    assert not np.array_equal(w1, s3.words(64))
    assert not np.array_equal(w1, s1.words(64))  # one stream: a second draw is new material
    assert s1.reproducible and not a.reproducible


def test_for_mode_and_bad_mode():
    assert not NoiseSource.for_mode("crypto", 1).reproducible
    assert NoiseSource.for_mode("seeded", 1).reproducible
    with pytest.raises(ValueError, match="noise_rng"):
        NoiseSource.for_mode("os", 1)


def test_for_round_is_the_one_seeded_recipe():
    kw = dict(seed=3, purpose="pbm", node=2, phase="train", epoch=1, step=4)
    a, b = NoiseSource.for_round("seeded", **kw), NoiseSource.for_round("seeded", **kw)
    assert np.array_equal(a.words(8), b.words(8))
    assert not np.array_equal(NoiseSource.for_round("seeded", **{**kw, "step": 5}).words(8),
                              NoiseSource.for_round("seeded", **kw).words(8))
    own = NoiseSource.fresh()
    assert NoiseSource.for_round("crypto", fresh=own, **kw) is own
    assert not NoiseSource.for_round("crypto", **kw).reproducible


def test_a_source_cannot_be_pickled():
    with pytest.raises(TypeError, match="secret key"):
        pickle.dumps(NoiseSource.fresh())


def test_uniform_and_open_uniform():
    src = NoiseSource.seeded("u")
    u = src.uniform(200_000)
    assert u.dtype == torch.float64 and float(u.min()) >= 0.0 and float(u.max()) < 1.0
    assert abs(float(u.mean()) - 0.5) < 0.005 and abs(float(u.var()) - 1 / 12) < 0.002
    assert stats.kstest(u.numpy(), "uniform").pvalue > 1e-3
    v = src.uniform_open((100, 3))
    assert v.shape == (100, 3) and float(v.min()) > 0.0


def test_normal_matches_standard_gaussian():
    z = NoiseSource.seeded("n").normal(100_001, dtype=torch.float64)
    assert z.shape == (100_001,)
    assert abs(float(z.mean())) < 0.01 and abs(float(z.std()) - 1.0) < 0.01
    assert stats.kstest(z.numpy(), "norm").pvalue > 1e-3
    assert NoiseSource.seeded("n").normal((3, 5)).dtype == torch.float32


def test_exponential_mean():
    e = NoiseSource.seeded("e").exponential(100_000)
    assert float(e.min()) > 0 and abs(float(e.mean()) - 1.0) < 0.02
    assert stats.kstest(e.numpy(), "expon").pvalue > 1e-3


@pytest.mark.parametrize("trials,p", [(16, 0.75), (64, 0.3), (1, 0.5), (7, 0.0), (7, 1.0)])
def test_binomial_pmf(trials, p):
    q = NoiseSource.seeded("b", trials).binomial(trials, torch.full((40_000,), p))
    assert q.dtype == torch.int64 and int(q.min()) >= 0 and int(q.max()) <= trials
    if p in (0.0, 1.0):
        assert torch.all(q == int(p * trials))
        return
    observed = np.bincount(q.numpy(), minlength=trials + 1)
    expected = stats.binom.pmf(np.arange(trials + 1), trials, p) * q.numel()
    keep = expected > 5
    chi2 = (((observed - expected) ** 2) / expected)[keep].sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-3


def test_binomial_thresholds_round_towards_one_half():
    """The coin probability T/2^32 lies between 1/2 and p, so PBM's vertex analysis holds exactly."""
    src = NoiseSource.seeded("t")
    beta = 0.1 + 1e-12  # not representable in 32 bits
    for p in (0.5 + beta, 0.5 - beta):
        scaled = p * 2.0**32
        t = np.floor(scaled) if p >= 0.5 else np.ceil(scaled)
        assert abs(t / 2.0**32 - 0.5) <= abs(p - 0.5)
    q = src.binomial(16, torch.tensor([[0.5 + beta, 0.5 - beta]]))
    assert q.shape == (1, 2)
    with pytest.raises(ValueError):
        src.binomial(4, torch.tensor([1.5]))
    with pytest.raises(ValueError):
        src.binomial(-1, torch.tensor([0.5]))


def test_binomial_tie_path_is_exact():
    """A coin is decided by U's top byte unless it ties T's top byte; then U's other 24 bits decide.
    With p = (128 + 1/2)/256 half of every tie must succeed: dropping (or always winning) the tie
    shifts the mean by 1/512, 4.4 standard errors at this size."""
    rows, trials = 20_000, 64
    p = (128 + 0.5) / 256
    q = NoiseSource.seeded("tie").binomial(trials, torch.full((rows,), p))
    est, se = float(q.double().mean()) / trials, (p * (1 - p) / (rows * trials)) ** 0.5
    assert abs(est - p) < 2 * se
    assert abs(est - 128 / 256) > 2 * se and abs(est - 129 / 256) > 2 * se
    # p = 1 and p = 0 are exact whatever the bytes; mixed rows keep their own thresholds
    mixed = NoiseSource.seeded("mix").binomial(5, torch.tensor([1.0, 0.0, 1.0, 0.0]))
    assert mixed.tolist() == [5, 0, 5, 0]
    big = NoiseSource.seeded("big").binomial(70_000, torch.tensor([0.25, 0.75]))  # > 2^16 trials
    assert abs(int(big[0]) - 17_500) < 5 * 115 and abs(int(big[1]) - 52_500) < 5 * 115


def test_integers_and_signs_are_uniform():
    src = NoiseSource.seeded("i")
    x = src.integers(7, 70_000)
    counts = np.bincount(x, minlength=7)
    assert x.min() >= 0 and x.max() < 7
    assert stats.chisquare(counts).pvalue > 1e-3
    s = src.signs((1000,))
    assert set(np.unique(s.numpy())) == {-1.0, 1.0} and abs(float(s.mean())) < 0.15


def test_seeded_helpers_are_reproducible():
    assert derive_seed("a", 1) == derive_seed("a", 1) != derive_seed("a", 2)
    assert torch.equal(torch.randn(4, generator=seeded_torch("x", 1)), torch.randn(4, generator=seeded_torch("x", 1)))
    assert np.array_equal(seeded_numpy("y").random(3), seeded_numpy("y").random(3))
