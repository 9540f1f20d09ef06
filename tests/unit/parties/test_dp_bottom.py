"""DP-SGD of the party bottom through Opacus: the scaling of the server's mean-loss gradient, the
clipped + noised step against a direct per-sample computation, and where the noise comes from."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from parties.vertical.dp_bottom import check_bottoms, gaussian_noise, wrap_bottom
from parties.vertical.models import BOTTOMS, linear_head, mlp_bottom
from vfl.core.errors import ConfigError, ProtocolError
from vfl.core.rng import NoiseSource
from vfl.engine.schema import ModelConfig

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing")

B, D, P, K = 6, 5, 3, 4  # batch, features, embedding dim, classes
LR = 0.1


def _setup(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    bottom = mlp_bottom(input_shape=(D,), embed_dim=P, tanh_c=1.0, hidden=(7,))
    head = linear_head(in_dim=P, num_classes=K)
    x = torch.randn(B, D, generator=g) * 3.0
    y = torch.randint(0, K, (B,), generator=g)
    return bottom, head, x, y


def _server_gradient(head: nn.Module, emb: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """What the server broadcasts: d(mean CE)/d(fused input), so it carries 1/B."""
    fused = emb.detach().requires_grad_(True)
    nn.functional.cross_entropy(head(fused), y).backward()
    return fused.grad.detach()


def _opacus_step(bottom, head, x, y, *, nm: float, c: float, noise_rng: str = "seeded", seed: int = 7,
                 epoch: int = 0, step: int = 0):
    module, opt = wrap_bottom(bottom, torch.optim.SGD(bottom.parameters(), lr=LR), name="mlp", noise_multiplier=nm,
                              max_grad_norm=c, batch_size=100, noise_rng=noise_rng, seed=seed, node_id=1)
    module.train()
    opt.zero_grad(set_to_none=True)
    out = module(x)
    out.backward(_server_gradient(head, out, y))
    per_sample = [p.grad_sample.detach().clone() for p in bottom.parameters()]
    opt.begin_step(epoch=epoch, step=step, batch_size=int(out.shape[0]))
    opt.step()
    return module, per_sample


def _direct_per_sample(bottom, head, x, y) -> list[list[torch.Tensor]]:
    """∇θ ℓ_i for every sample, one sample at a time (no Opacus)."""
    rows = []
    for i in range(len(x)):
        loss = nn.functional.cross_entropy(head(bottom(x[i : i + 1])), y[i : i + 1])
        rows.append([t.detach() for t in torch.autograd.grad(loss, list(bottom.parameters()))])
    return rows


def test_per_sample_gradients_are_those_of_each_samples_own_loss():
    bottom, head, x, y = _setup()
    direct = _direct_per_sample(copy.deepcopy(bottom), head, x, y)
    _, per_sample = _opacus_step(bottom, head, x, y, nm=1.0, c=1.0)
    assert len(per_sample) == len(direct[0]) > 0  # one per parameter: the loop below checks each
    for j, gs in enumerate(per_sample):
        assert gs.shape == (B, *direct[0][j].shape)
        for i in range(B):  # the 1/B of the mean loss is undone by loss_reduction="mean" (x B)
            torch.testing.assert_close(gs[i], direct[i][j], rtol=1e-5, atol=1e-6)


def test_clipped_noised_step_equals_a_direct_computation():
    bottom, head, x, y = _setup(1)
    before = copy.deepcopy(bottom)
    direct = _direct_per_sample(copy.deepcopy(bottom), head, x, y)
    norms = torch.stack([torch.sqrt(sum((t * t).sum() for t in row)) for row in direct])
    c, nm = float(norms.median()), 0.8  # some samples clipped, some not: the scale of each one matters
    assert (norms > c).any() and (norms < c).any()
    factors = (c / (norms + 1e-6)).clamp(max=1.0)
    source = NoiseSource.for_round("seeded", seed=7, purpose="dpsgd", node=1, phase="train", epoch=0, step=0)
    expected = []
    for j, p in enumerate(before.parameters()):
        clipped_sum = sum(factors[i] * direct[i][j] for i in range(B))
        noise = (nm * c * source.normal(p.shape, dtype=torch.float64)).float()
        expected.append(p.detach() - LR * (clipped_sum + noise) / B)
    _opacus_step(bottom, head, x, y, nm=nm, c=c)
    for got, want in zip(bottom.parameters(), expected, strict=True):
        torch.testing.assert_close(got.detach(), want, rtol=1e-5, atol=1e-6)


def test_without_clipping_and_noise_the_update_is_the_plain_one():
    """Scaling check: a huge C and zero noise must give exactly out.backward(g) + SGD (1/B kept once)."""
    bottom, head, x, y = _setup(2)
    plain = copy.deepcopy(bottom)
    opt = torch.optim.SGD(plain.parameters(), lr=LR)
    out = plain(x)
    out.backward(_server_gradient(head, out, y))
    opt.step()
    _opacus_step(bottom, head, x, y, nm=0.0, c=1e9)
    for a, b in zip(bottom.parameters(), plain.parameters(), strict=True):
        torch.testing.assert_close(a.detach(), b.detach(), rtol=1e-5, atol=1e-7)


def test_last_smaller_batch_is_divided_by_its_own_size():
    bottom, head, x, y = _setup(3)
    plain = copy.deepcopy(bottom)
    opt = torch.optim.SGD(plain.parameters(), lr=LR)
    out = plain(x[:4])
    out.backward(_server_gradient(head, out, y[:4]))
    opt.step()
    _opacus_step(bottom, head, x[:4], y[:4], nm=0.0, c=1e9)  # wrapped with batch_size=100
    for a, b in zip(bottom.parameters(), plain.parameters(), strict=True):
        torch.testing.assert_close(a.detach(), b.detach(), rtol=1e-5, atol=1e-7)


def _noise_of_one_step(noise_rng: str, *, seed: int = 7, step: int = 0) -> torch.Tensor:
    """Parameters after a noised step minus after the same step without noise (= -lr·noise/B)."""
    noised, head, x, y = _setup(4)
    _opacus_step(noised, head, x, y, nm=1.0, c=1e9, noise_rng=noise_rng, seed=seed, step=step)
    clean, *_ = _setup(4)
    _opacus_step(clean, head, x, y, nm=0.0, c=1e9)
    return torch.cat([(a - b).detach().flatten() for a, b in zip(noised.parameters(), clean.parameters(), strict=True)])


def test_seeded_noise_is_a_pure_function_of_the_round_and_leaves_torch_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    a = _noise_of_one_step("seeded")
    torch.manual_seed(123)  # _setup reseeds; reseed and check the DP step never touches torch's generator
    bottom, head, x, y = _setup(4)
    torch.manual_seed(123)
    _opacus_step(bottom, head, x, y, nm=1.0, c=1e9)
    assert torch.equal(torch.rand(3), expected)
    assert torch.equal(a, _noise_of_one_step("seeded"))
    assert not torch.allclose(a, _noise_of_one_step("seeded", step=1))
    assert not torch.allclose(a, _noise_of_one_step("seeded", seed=8))


def test_crypto_noise_is_fresh_every_time():
    a, b = _noise_of_one_step("crypto"), _noise_of_one_step("crypto")
    assert a.abs().sum() > 0 and not torch.allclose(a, b)


@pytest.mark.parametrize("mode", ["crypto", "seeded"])
def test_server_with_the_run_seed_cannot_strip_the_noise_unless_seeded(mode):
    """The attacker knows θ before/after, lr, B, the run seed and even every clipped per-sample gradient;
    it regenerates the party's noise from the seed and subtracts it. In seeded mode that recovers the
    exact clipped sum (the insecure variant: privacy gone); in crypto mode the residual is the full noise."""
    nm, c = 1.0, 0.05
    bottom, head, x, y = _setup(5)
    before = copy.deepcopy(bottom)
    direct = _direct_per_sample(copy.deepcopy(bottom), head, x, y)
    _opacus_step(bottom, head, x, y, nm=nm, c=c, noise_rng=mode)
    norms = torch.stack([torch.sqrt(sum((t * t).sum() for t in row)) for row in direct])
    factors = (c / (norms + 1e-6)).clamp(max=1.0)
    guess = NoiseSource.for_round("seeded", seed=7, purpose="dpsgd", node=1, phase="train", epoch=0, step=0)
    residual = []
    for j, (p0, p1) in enumerate(zip(before.parameters(), bottom.parameters(), strict=True)):
        noisy_sum = (p0.detach() - p1.detach()) * B / LR
        clipped_sum = sum(factors[i] * direct[i][j] for i in range(B))
        residual.append((noisy_sum - clipped_sum - nm * c * guess.normal(p0.shape)).flatten())
    rms = torch.cat(residual).pow(2).mean().sqrt().item()
    if mode == "seeded":
        assert rms < 1e-3 * nm * c  # noise removed: the attacker holds the exact clipped sum
    else:
        assert 0.5 * nm * c * 2**0.5 < rms < 2.0 * nm * c * 2**0.5  # two independent N(0, σ²): σ·√2


def test_step_without_begin_step_is_refused():
    bottom, head, x, y = _setup(6)
    module, opt = wrap_bottom(bottom, torch.optim.SGD(bottom.parameters(), lr=LR), name="mlp", noise_multiplier=1.0,
                              max_grad_norm=1.0, batch_size=B, noise_rng="crypto", seed=0, node_id=1)
    out = module(x)
    out.backward(_server_gradient(head, out, y))
    with pytest.raises(ProtocolError, match="begin_step"):
        opt.step()


def test_gaussian_noise_secure_mode_keeps_the_variance():
    ref = torch.zeros(20000)
    for secure in (False, True):
        z = gaussian_noise(NoiseSource.seeded("t", int(secure)), std=2.0, like=ref, secure_mode=secure)
        assert z.dtype == ref.dtype and abs(z.std().item() - 2.0) < 0.05 and abs(z.mean().item()) < 0.05


def test_unsupported_bottoms_are_refused_with_the_key():
    resnet = BOTTOMS.get("resnet18")(input_shape=(3, 8, 8), embed_dim=4, tanh_c=1.0)
    with pytest.raises(ConfigError) as info:
        wrap_bottom(resnet, torch.optim.SGD(resnet.parameters(), lr=0.1), name="resnet18", noise_multiplier=1.0,
                    max_grad_norm=1.0, batch_size=4, noise_rng="crypto", seed=0, node_id=1)
    assert info.value.key == "model.bottom" and "BatchNorm" in str(info.value)
    views = BOTTOMS.get("cnn")(input_shape=(2, 1, 8, 8), embed_dim=4, tanh_c=1.0, channels=(4,))
    with pytest.raises(ConfigError, match="per view"):
        wrap_bottom(views, torch.optim.SGD(views.parameters(), lr=0.1), name="cnn", noise_multiplier=1.0,
                    max_grad_norm=1.0, batch_size=4, noise_rng="crypto", seed=0, node_id=1)


def test_driver_side_check_refuses_before_any_actor_starts():
    check_bottoms(ModelConfig(bottom="cnn"), [(1, 14, 14), (1, 14, 14)])  # fine: single-view CNN
    check_bottoms(ModelConfig(bottom="mlp"), [(13,), (12,)])
    with pytest.raises(ConfigError, match="bn1") as info:
        check_bottoms(ModelConfig(bottom="resnet18"), [(1, 14, 14)])
    assert info.value.key == "model.bottom"
    with pytest.raises(ConfigError, match="per view"):
        check_bottoms(ModelConfig(bottom="cnn"), [(2, 1, 8, 8)])
