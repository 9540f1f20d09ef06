"""Membership inference: an overfit model leaks membership; the never-seen control sits at AUC ≈ 0.5."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from vfl.attacks.membership import control_split, label_only_scores, loss_scores, roc_metrics

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py



def _memorizer(x: torch.Tensor, y: torch.Tensor) -> nn.Module:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(x.shape[1], 128), nn.ReLU(), nn.Linear(128, 4))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2, weight_decay=1e-3)
    for _ in range(400):
        opt.zero_grad()
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    return net.eval()


def test_loss_and_label_only_attacks_separate_members_and_the_control_does_not():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(600, 10, generator=g)
    y = torch.randint(0, 4, (600,), generator=g)  # random labels: only memorization fits them
    mem, non = slice(0, 200), slice(200, 600)
    net = _memorizer(x[mem], y[mem])
    s_mem, s_non = loss_scores(net, x[mem], y[mem]), loss_scores(net, x[non], y[non])
    assert roc_metrics(s_mem, s_non)["auc"] > 0.9
    a, b = control_split(400, rng=np.random.default_rng(0))
    control = roc_metrics(s_non[a], s_non[b])
    assert abs(control["auc"] - 0.5) < 0.1 and control["tpr_at_1pct_fpr"] <= 0.05
    lo_mem = label_only_scores(net, x[mem], y[mem], noise_std=0.3, queries=8, generator=g)
    lo_non = label_only_scores(net, x[non], y[non], noise_std=0.3, queries=8, generator=g)
    assert roc_metrics(lo_mem, lo_non)["auc"] > 0.8
    assert abs(roc_metrics(lo_non[a], lo_non[b])["auc"] - 0.5) < 0.1


def test_roc_metrics_of_identical_distributions_is_chance():
    rng = np.random.default_rng(1)
    res = roc_metrics(rng.normal(size=2000), rng.normal(size=2000))
    assert abs(res["auc"] - 0.5) < 0.05 and res["tpr_at_1pct_fpr"] < 0.05
