"""P3EFT client math in closed form: private_backprop's split/recombine, mixing weights,
regularizers and randomized response (no model needed)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from parties.defenses.forward import distance_correlation_sq
from parties.llm.p3eft.private_backprop import (
    PER_EXAMPLE,
    mix,
    mixing_noise,
    mixing_weights,
    recombine,
    split_gradient,
)
from parties.llm.p3eft.regularizers import (
    adversarial_loss,
    adversarial_penalty,
    dcor_loss,
    fit_probe,
    standardize,
)
from vfl.core.errors import ConfigError
from vfl.core.rng import NoiseSource
from vfl.privacy.mechanisms.label_dp import keep_probability, randomized_response


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)  # test inputs only


def noise(seed: int = 0) -> NoiseSource:
    return NoiseSource.seeded("test-p3eft", seed)


def linear_backprop(jac: torch.Tensor):
    """A linear stand-in for backprop(x, θ, ·): g ↦ {"a": J^T vec(g)} (conditionally linear, as in Eq. 1)."""
    return lambda g: {"a": jac.T @ g.reshape(-1).to(jac.dtype)}


@pytest.mark.parametrize("m", [2, 3, 5, PER_EXAMPLE])
def test_split_recombine_equals_plain_backprop(m):
    g = torch.randn(6, 4, generator=gen(1), dtype=torch.float64)
    backprop = linear_backprop(torch.randn(24, 7, generator=gen(2), dtype=torch.float64))
    pieces, alphas = split_gradient(g, m=m, std=30.0 * float(g.pow(2).mean().sqrt()), noise=noise(3))
    assert len(pieces) == len(alphas) == (6 if m == PER_EXAMPLE else m)
    torch.testing.assert_close(torch.einsum("j,j...->...", alphas, pieces), g)
    got = recombine([backprop(p) for p in pieces], alphas)
    torch.testing.assert_close(got["a"], backprop(g)["a"], rtol=1e-9, atol=1e-9)
    for p in pieces:  # no single piece is g_h (nor a multiple of it)
        cos = torch.nn.functional.cosine_similarity(p.reshape(-1), g.reshape(-1), dim=0)
        assert abs(float(cos)) < 0.9


def test_two_server_pieces_are_noise_dominated_and_secret():
    g = torch.randn(32, 16, generator=gen(4))
    pieces, alphas = split_gradient(g, m=2, std=30.0 * float(g.pow(2).mean().sqrt()), noise=noise(5))
    for p in pieces:
        assert float(p.norm()) > 10 * float(g.norm())  # each server sees mostly noise
    other, other_alphas = split_gradient(g, m=2, std=1.0, noise=noise(6))
    assert not torch.allclose(alphas, other_alphas)  # fresh secret coefficients per call


def test_per_example_pieces_are_unit_rows_with_random_sign():
    g = torch.randn(8, 5, generator=gen(7))
    g[3] = 0.0
    pieces, alphas = split_gradient(g, m=PER_EXAMPLE, std=1.0, noise=noise(8))
    for b, p in enumerate(pieces):
        nonzero = torch.nonzero(p.abs().sum(1)).squeeze(1).tolist()
        assert nonzero == [b]  # piece b touches example b only
        assert math.isclose(float(p[b].norm()), 1.0, rel_tol=1e-5)  # the norm attack sees only ones
    assert float(alphas[3]) == 0.0
    assert {int(s) for s in torch.sign(alphas[alphas != 0])} == {-1, 1}


def test_plain_and_invalid_m():
    g = torch.randn(3, 2)
    pieces, alphas = split_gradient(g, m=1, std=1.0, noise=noise())
    assert torch.equal(pieces[0], g) and alphas.tolist() == [1.0]
    with pytest.raises(ConfigError, match="params.m"):
        split_gradient(g, m=-1, std=1.0, noise=noise())
    with pytest.raises(ConfigError, match="params.grad_noise"):
        split_gradient(g, m=2, std=0.0, noise=noise())


@pytest.mark.parametrize("n,scale", [(1, 0.0), (2, 0.0), (3, 2.0), (4, 4.0)])
def test_mixing_weights_sum_to_one_and_noise_is_antisymmetric(n, scale):
    xi = mixing_noise(n=n, dim=50, scale=scale, noise=noise(9))
    torch.testing.assert_close(xi, -xi.transpose(0, 1))
    assert torch.count_nonzero(xi[torch.arange(n), torch.arange(n)]) == 0
    w = mixing_weights(n=n, dim=50, scale=scale, noise=noise(9))
    torch.testing.assert_close(w, 1.0 / n + xi.sum(1))  # W_i = e/n + Σ_j ±ξ_ij
    torch.testing.assert_close(w.sum(0), torch.ones(50, dtype=torch.float64), atol=1e-9 * 10 ** (scale / 2), rtol=0)
    if n > 1:
        assert float(xi[0, 1].std()) == pytest.approx(10 ** (scale / 2), rel=0.35)


def test_mixture_of_identical_adapters_is_the_adapter():
    """Eq. 6: at initialization all h_i are equal, so h' = h whatever the (large) ξ."""
    h = torch.randn(5, 8, generator=gen(10))
    w = mixing_weights(n=3, dim=8, scale=2.0, noise=noise(11))
    torch.testing.assert_close(mix([h, h, h], w), h, atol=1e-4, rtol=1e-4)


def test_probe_and_adversarial_regularizer_push_towards_wrong_labels():
    y = torch.tensor([0, 1] * 16)
    h = torch.randn(32, 6, generator=gen(12), dtype=torch.float64) + 2.0 * y.unsqueeze(1).double()
    probe = fit_probe(h, y, num_classes=2, l2=1e-2, steps=50)
    acc = lambda x: float(((standardize(x) @ probe[0].T + probe[1]).argmax(1) == y).double().mean())  # noqa: E731
    assert acc(h) == 1.0
    x = h.clone().requires_grad_(True)
    for _ in range(50):
        loss = adversarial_loss(x, y, probe=probe)
        (grad,) = torch.autograd.grad(loss, x)
        x = (x - 20.0 * grad).detach().requires_grad_(True)
    assert acc(x) < 0.2  # descending the regularizer fools the probe
    two = adversarial_loss(h, y, probe=probe)
    flipped = torch.nn.functional.cross_entropy(standardize(h) @ probe[0].T + probe[1], 1 - y)
    torch.testing.assert_close(two, flipped)  # binary: CE towards the wrong label


def test_the_cross_fitted_penalty_reads_no_leak_in_noise_and_the_batch_fitted_one_does():
    """Activations that hold nothing about the labels (16 rows, 384 dims, as a MiniLM batch): a probe fitted
    and scored on the same rows separates them anyway (accuracy 1.0), so the old penalty reads a leak, ≈ 1.0
    against ln 2 at chance, with a gradient that moves the adapters for nothing (the control: it collapsed
    p3eft-rt's seed 1). Scored on the half it was not fitted on (stratified halves), the probe is at chance:
    ≈ ln 2. On rows that do hold the label (a shift along one direction) the cross-fitted penalty reads it,
    and descending it lowers it."""
    y = torch.tensor([0, 1] * 8)
    noise_h = torch.randn(16, 384, generator=gen(15), dtype=torch.float64)
    probe = fit_probe(noise_h, y, num_classes=2, l2=0.1, steps=20)
    assert float(((standardize(noise_h) @ probe[0].T + probe[1]).argmax(1) == y).double().mean()) == 1.0
    old = float(adversarial_loss(noise_h, y, probe=probe))
    new = float(adversarial_penalty(noise_h, y, num_classes=2, l2=0.1, steps=20))
    assert old > math.log(2) + 0.2  # control: "leak" in pure noise
    assert abs(new - math.log(2)) < 0.1
    leaky = noise_h + 10.0 * (2 * y.unsqueeze(1).double() - 1) * torch.eye(384, dtype=torch.float64)[0]
    start = float(adversarial_penalty(leaky, y, num_classes=2, l2=0.1, steps=20))
    assert start > new + 0.3
    x = leaky.clone().requires_grad_(True)
    for _ in range(30):
        (grad,) = torch.autograd.grad(adversarial_penalty(x, y, num_classes=2, l2=0.1, steps=20), x)
        x = (x - 5.0 * grad).detach().requires_grad_(True)
    assert float(adversarial_penalty(x, y, num_classes=2, l2=0.1, steps=20).detach()) < start - 0.05
    assert float(adversarial_penalty(noise_h[:1], y[:1], num_classes=2, l2=0.1, steps=5)) == 0.0  # no other half


def test_distance_correlation():
    x = torch.randn(64, 3, generator=gen(13), dtype=torch.float64)
    assert float(distance_correlation_sq(x, x)) == pytest.approx(1.0)
    assert float(distance_correlation_sq(x, 2 * x + 1)) == pytest.approx(1.0)
    indep = torch.randn(64, 2, generator=gen(14), dtype=torch.float64)
    assert float(distance_correlation_sq(x, indep)) < 0.2
    y = torch.tensor([0, 1] * 32)
    h = x.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(dcor_loss(h, y, num_classes=2), h)
    assert torch.isfinite(grad).all()


def test_probe_view_is_scale_free():
    """Shrinking or shifting h cannot fool the probe (the degenerate escape of the regularizer)."""
    h = torch.randn(16, 8, generator=gen(16), dtype=torch.float64)
    torch.testing.assert_close(standardize(0.01 * h + 3.0), standardize(h))
    assert float(standardize(h).pow(2).sum(1).mean()) == pytest.approx(1.0)


@pytest.mark.parametrize("epsilon,k", [(0.0, 2), (1.0, 2), (2.0, 4), (30.0, 3)])
def test_randomized_response_keeps_with_the_stated_probability(epsilon, k):
    y = np.random.default_rng(15).integers(0, k, 20000)
    noisy = randomized_response(y, num_classes=k, epsilon=epsilon, noise=NoiseSource.seeded("test-rr", 15))
    p = keep_probability(epsilon=epsilon, num_classes=k)
    assert p == pytest.approx(math.exp(epsilon) / (math.exp(epsilon) + k - 1))
    assert float((noisy == y).mean()) == pytest.approx(p, abs=0.015)
    assert noisy.min() >= 0 and noisy.max() < k
    if epsilon == 0.0:  # uniform labels: every class equally likely whatever the truth
        assert np.bincount(noisy[y == 0], minlength=k) / (y == 0).sum() == pytest.approx(np.full(k, 1 / k), abs=0.03)


def _pooled_direction(pieces: torch.Tensor) -> torch.Tensor:
    """What servers pooling their pieces recover without the α_j: the least-squares residual of the last
    piece against the others (the pieces' noise is far larger than g, so min-norm ≈ g's direction)."""
    last = pieces[-1].reshape(-1).double()
    if len(pieces) == 1:
        return last
    rest = pieces[:-1].reshape(len(pieces) - 1, -1).double()
    coef = torch.linalg.lstsq(rest.T, last.unsqueeze(1)).solution
    return last - (rest.T @ coef).squeeze(1)


def _cos(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a.reshape(-1).double(), b.reshape(-1).double(), dim=0))


@pytest.mark.parametrize("m", [2, 3, 4])
def test_every_server_pooling_its_piece_recovers_the_gradient_up_to_scale_and_m_minus_1_do_not(m):
    """The non-collusion assumption of ``ushape-p3eft`` and ``p3eft`` made concrete: all m pieces
    together give g's direction (the α_j only scale it), any m − 1 give noise (the missing piece's
    noise, std 30 × g's, is in the sum)."""
    g = torch.randn(64, 32, generator=gen(m), dtype=torch.float64)
    pieces, _ = split_gradient(g, m=m, std=30.0 * float(g.pow(2).mean().sqrt()), noise=noise(m))
    assert abs(_cos(_pooled_direction(pieces), g)) > 0.99  # control: every server together
    for drop in range(m):  # m − 1 servers; the last piece among them where it is not dropped
        kept = torch.cat([pieces[:drop], pieces[drop + 1:]])
        assert abs(_cos(_pooled_direction(kept), g)) < 0.2, drop
