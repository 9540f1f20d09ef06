"""P3EFT's single-server mode m = B (``params.m: 0``) against the sign-invariant label attack: a server
holding the per-example pieces (unit g_h directions with secret signs) clusters them sign-free.
Control: with K = 3 or 4 classes the attack recovers every label (what the old config allowed);
binary labels (the proof's setting) stay at chance, and the strategy now refuses m = 0 for K > 2."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import strategies  # noqa: F401  (registers the strategies)
from parties.llm.p3eft.private_backprop import PER_EXAMPLE, split_gradient
from strategies.base.llm_leak import sign_invariant_label_attack
from vfl.core.errors import ConfigError
from vfl.core.rng import NoiseSource


def _server_view(num_classes: int, *, seed: int, batch: int = 64, dim: int = 32):
    """Everything one server receives for one batch with m = B: the nonzero row of every piece.
    The head is a fresh ``nn.Linear`` (as at the start of fine-tuning), h ~ N(0, 1)."""
    gen = torch.Generator().manual_seed(seed)
    head = torch.nn.Linear(dim, num_classes)
    with torch.no_grad():
        head.weight.uniform_(-dim ** -0.5, dim ** -0.5, generator=gen)
    h = torch.randn(batch, dim, generator=gen, requires_grad=True)
    y = torch.randint(0, num_classes, (batch,), generator=gen)
    (g_h,) = torch.autograd.grad(F.cross_entropy(head(h), y), h)
    pieces, alphas = split_gradient(g_h, m=PER_EXAMPLE, std=1.0, noise=NoiseSource.fresh())
    assert len(pieces) == batch and torch.allclose(torch.einsum("j,j...->...", alphas.float(), pieces), g_h, atol=1e-6)
    rows = np.stack([p[i].numpy() for i, p in enumerate(pieces)])  # piece i is zero except row i
    return rows, y.numpy()


@pytest.mark.parametrize("classes", [3, 4])
def test_control_sign_invariant_attack_recovers_k_class_labels(classes):
    accs = [sign_invariant_label_attack(*_server_view(classes, seed=s), num_classes=classes, seed=s) for s in range(3)]
    assert min(accs) > 0.9  # chance ≈ 1/K + a little


def test_binary_labels_stay_at_chance():
    accs = [sign_invariant_label_attack(*_server_view(2, seed=s), num_classes=2, seed=s) for s in range(6)]
    assert float(np.mean(accs)) < 0.65


def _p3eft(num_classes: int, **params):
    from types import SimpleNamespace

    from strategies.p3eft import P3eft
    from vfl.engine.schema import load_run_config

    cfg = load_run_config({"name": "m-b", "strategy": "p3eft", "num_parties": 1, "dataset": "rt-polarity",
                           "train": {"batch_size": 8}, "params": {"servers": 1, "m": 0, **params}})
    strat = P3eft(cfg)
    ds = SimpleNamespace(name="rt-polarity", modality="text", num_train=16, num_test=8, num_classes=num_classes,
                         y_train=np.arange(16) % num_classes, extras={})
    return strat, SimpleNamespace(dataset=lambda: ds)


def test_m_equals_b_is_refused_beyond_two_classes(caplog):
    strat, data = _p3eft(4)
    with pytest.raises(ConfigError, match=r"params\.m.*4 classes.*binary labels only"):
        strat.prepare(data)
    strat, data = _p3eft(2, alpha=0.0)
    strat.prepare(data)  # the proof's setting: accepted, silently
    assert "m = B" not in caplog.text
    strat, data = _p3eft(2)
    strat.prepare(data)  # binary with the regularizer: accepted, warned
    assert "proven label-private for binary labels without the regularizer" in caplog.text
