"""DLG / iDLG (Zhu et al. 2019; Zhao et al. 2020) on a tiny sigmoid network, with and without PBM."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from vfl.attacks.gradient_inversion import dlg, idlg_label, input_gradients, param_gradients
from vfl.core.rng import NoiseSource
from vfl.privacy.mechanisms.pbm import pbm_decode

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py



def _net(seed: int, d: int = 8, k: int = 4) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d, 6), nn.Sigmoid(), nn.Linear(6, k)).double()


def _observe(net: nn.Module, x: torch.Tensor, y: int, k: int = 4) -> list[torch.Tensor]:
    onehot = nn.functional.one_hot(torch.tensor([y]), k).double()
    return [g.detach() for g in param_gradients(net)(x.clone().requires_grad_(True), onehot)]


def test_dlg_recovers_an_undefended_input():
    net = _net(0)
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(1, 8, generator=gen, dtype=torch.float64) * 2 - 1
    x_hat, y_hat, loss = dlg(gradient_of=param_gradients(net), observed=_observe(net, x, 2), input_shape=(8,),
                             num_classes=4, generator=gen)
    assert float(((x_hat - x[0]) ** 2).mean()) < 1e-3
    assert y_hat == 2 and loss < 1e-8


def test_dlg_fails_under_pbm_with_small_beta():
    """The head input is a PBM release: the gradient reveals x̃ = decode(Binomial counts), not x."""
    b, beta, c = 4, 0.05, 1.0
    net = _net(0)
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(1, 8, generator=gen, dtype=torch.float64) * 2 - 1  # an embedding in [-C, C]
    noise = NoiseSource.seeded("test-dlg-pbm")
    counts = noise.binomial(b, 0.5 + beta * x / c)
    released = pbm_decode(counts, b=b, beta=beta, c=c, num_parties=1)
    x_hat, _, loss = dlg(gradient_of=param_gradients(net), observed=_observe(net, released, 2), input_shape=(8,),
                         num_classes=4, generator=gen)
    assert float(((x_hat - released[0]) ** 2).mean()) < 1e-3  # the attack itself still works ...
    assert float(((x_hat - x[0]) ** 2).mean()) > 1.0  # ... but what it recovers is the noisy release (var 25)


def test_idlg_label_is_exact_on_single_sample_gradients():
    hits = 0
    for seed in range(30):
        net = _net(seed, k=5)
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(1, 8, generator=gen, dtype=torch.float64)
        y = seed % 5
        grads = _observe(net, x, y, k=5)
        w_grad, b_grad = grads[-2], grads[-1]  # last layer (inputs are sigmoids: non-negative)
        hits += int(idlg_label(b_grad) == y) + int(idlg_label(w_grad) == y)
    assert hits == 60


def test_input_gradient_inversion_recovers_the_label_of_a_vfl_gradient_row():
    """A VFL party's received row g = (1/B)·∂ℓ/∂h: with a linear head iDLG's least squares is exact."""
    torch.manual_seed(3)
    head = nn.Linear(16, 10).double()
    for y in range(10):
        h = torch.randn(1, 16, dtype=torch.float64, requires_grad=True)
        (g,) = input_gradients(head, scale=1 / 64)(h, nn.functional.one_hot(torch.tensor([y]), 10).double())
        delta = torch.linalg.lstsq(head.weight.detach().T, g.detach()[0] * 64).solution
        assert idlg_label(delta) == y
