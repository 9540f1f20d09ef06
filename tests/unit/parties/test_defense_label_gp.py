"""label_gp: exact clipped per-example gradients, the noise scale, the server's step and the label ε."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

import strategies  # noqa: F401
from parties.defenses.label_gp import clipped_per_sample, private_backward
from tests.support.defense_server import defended_server, forward_messages
from vfl.core.errors import ConfigError
from vfl.core.rng import NoiseSource
from vfl.engine.schema import load_run_config
from vfl.privacy.accounting.accountant import DEFAULT_ORDERS
from vfl.privacy.defenses import label_privacy
from vfl.runtime import message as wire


def _head(seed=0, p=6, k=4):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(p, 8), nn.ReLU(), nn.Linear(8, k))


def test_per_example_gradients_are_exact_and_clipped_jointly():
    head, g = _head(), torch.Generator().manual_seed(1)
    fused, y = torch.randn(12, 6, generator=g), torch.randint(0, 4, (12,), generator=g)
    for c in (1e6, 0.05):  # no clipping, then every row clipped
        flat, d_head = clipped_per_sample(head, fused, y, max_norm=c)
        for i in range(12):  # control: autograd on each example's own loss
            h = fused[i:i + 1].clone().requires_grad_(True)
            loss = nn.functional.cross_entropy(head(h), y[i:i + 1])
            grads = torch.autograd.grad(loss, [*head.parameters(), h])
            ref = torch.cat([t.reshape(-1) for t in grads])
            ref = ref * min(1.0, c / float(ref.norm()))
            assert torch.allclose(flat[i], ref, atol=1e-6)
        assert d_head == sum(p.numel() for p in head.parameters())
        assert float(flat.norm(dim=1).max()) <= c * (1 + 1e-6)


def test_one_label_changes_only_its_own_clipped_vector_by_at_most_2c():
    head, g = _head(), torch.Generator().manual_seed(2)
    fused, y = torch.randn(10, 6, generator=g), torch.randint(0, 4, (10,), generator=g)
    c = 0.1
    base, _ = clipped_per_sample(head, fused, y, max_norm=c)
    for i in range(10):
        for other in range(4):
            y2 = y.clone()
            y2[i] = other
            alt, _ = clipped_per_sample(head, fused, y2, max_norm=c)
            diff = (alt - base).norm(dim=1)
            assert float(diff[i]) <= 2 * c + 1e-6 and float(diff.sum() - diff[i]) == 0.0


def test_the_noise_has_std_2_c_sigma_over_b_on_the_head_and_on_every_row():
    head, g = _head(), torch.Generator().manual_seed(3)
    b, c, sigma = 256, 0.5, 0.7
    fused, y = torch.randn(b, 6, generator=g), torch.randint(0, 4, (b,), generator=g)
    flat, d_head = clipped_per_sample(head, fused, y, max_norm=c)
    rows = private_backward(head, fused, y, max_norm=c, noise_multiplier=sigma, noise=NoiseSource.fresh())
    z_rows = rows * b - flat[:, d_head:].numpy()
    z_head = torch.cat([p.grad.reshape(-1) for p in head.parameters()]).numpy() * b - flat[:, :d_head].sum(0).numpy()
    want = 2 * c * sigma
    for z in (z_rows.reshape(-1), z_head):
        n = z.size
        assert abs(z.std() / want - 1) < 5 * math.sqrt(2 / n) and abs(z.mean()) < 5 * want / math.sqrt(n)


def test_epsilon_is_the_rdp_composition_over_epochs_at_privacy_delta():
    import dp_accounting
    from dp_accounting import rdp

    out = label_privacy(({"kind": "label_gp", "noise_multiplier": 1.5, "max_norm": 1.0},), epochs=5, delta=1e-5)
    acc = rdp.RdpAccountant(list(DEFAULT_ORDERS))
    acc.compose(dp_accounting.GaussianDpEvent(1.5), 5)
    assert out["epsilon_label"] == pytest.approx(acc.get_epsilon(1e-5), rel=1e-9) and out["delta_label"] == 1e-5
    more = label_privacy(({"kind": "label_gp", "noise_multiplier": 1.5},), epochs=20, delta=1e-5)
    assert more["epsilon_label"] > out["epsilon_label"]
    assert label_privacy(({"kind": "label_rr", "epsilon": 2.0},), epochs=20)["delta_label"] == 0.0  # pure: no δ




def _server(defenses):
    return defended_server(defenses, train={"momentum": 0.0}, seeded=True)  # seeded: twins share weights and noise


def _grad(server):
    out = server.train_step(forward_messages(), 0, 0)
    return [wire.from_array(a) for m in out for a in m.content.array_records["grad"].values()][0]


def test_without_noise_or_clipping_the_private_step_is_the_ordinary_step():
    """Control: sigma -> 0, C -> inf gives the plain server's gradient and head update; sigma = 1 does not."""
    plain, gp = _server([]), _server([{"kind": "label_gp", "noise_multiplier": 1e-12, "max_norm": 1e3}])
    g_plain, g_gp = _grad(plain), _grad(gp)
    assert np.allclose(g_plain, g_gp, atol=1e-6) and np.abs(g_plain).max() > 1e-4
    for a, b in zip(plain.head.parameters(), gp.head.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)
    noisy = _grad(_server([{"kind": "label_gp", "noise_multiplier": 1.0, "max_norm": 1.0}]))
    assert np.abs(noisy - g_plain).std() > 10 * np.abs(g_plain).std()


def test_refusals():
    with pytest.raises(ConfigError, match=r"^defenses\[0\]\.kind: label_gp is not available here: .*local_steps: 1$"):
        load_run_config({"strategy": "npq", "train": {"local_steps": 2}, "defenses": [{"kind": "label_gp"}]})
    with pytest.raises(ConfigError, match=r"^defenses\[1\]\.kind: label_gp is not available here: marvell reads"):
        load_run_config({"strategy": "npq", "defenses": [{"kind": "marvell"}, {"kind": "label_gp"}]})
    for strategy in ("pbm", "ldp", "npq+secagg"):
        assert load_run_config({"strategy": strategy, "defenses": [{"kind": "label_gp"}]}).defenses[0]["kind"] == "label_gp"
