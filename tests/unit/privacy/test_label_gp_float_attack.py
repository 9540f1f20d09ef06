"""Mironov's floating-point attack (CCS 2012) on ``label_gp``, played by a party that receives gradient rows.

The party gets, for each example of its batch, the noised row (clip(vᵢ)_cut + noise)/B. The label-DP
adversary knows everything but the label (the head, the fused input, the mechanism): for a neighbouring
label y′ it computes the clipped row x′ and asks whether ANY noise draw turns x′ into exactly the row it
received. If not for one coordinate, the row is impossible under y′ and the party learns that the label
is not y′ (an infinite likelihood ratio: no (ε, δ) with δ below that fraction holds). Control: the old
float32 Gaussian (kept below as it was) leaves a large fraction of rows impossible under the neighbour.
Now: the rows are integers on a grid times one constant, and every integer is possible under every label.

The float check is a certificate, not a guess: the old arithmetic fl(fl(x + fl(s·w))/B) is monotone in the
float32 noise w, so two consecutive float32 w whose outputs straddle the row prove that no w hits it.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

import strategies  # noqa: F401
from parties.defenses import label_gp
from parties.defenses.label_gp import clipped_per_sample
from tests.support.defense_server import defended_server, forward_messages
from vfl.core.errors import ConfigError
from vfl.core.rng import NodeNoise
from vfl.privacy.defenses import make_defenses
from vfl.privacy.mechanisms.gaussian import l2_grid, l2_grid_codes
from vfl.runtime import message as wire

C, K, P, N = 1.0, 10, 16, 1000  # max_norm, classes, cut width (digits-5p: 4 parties x 4), released rows
WINDOW = 16  # consecutive float32 noise values searched on each side of (B·row − x′)/s


def old_private_backward(head, fused, y, *, max_norm, noise_multiplier, noise):
    """Before: float32 Gaussian noise on the clipped vectors (the old ``label_gp.private_backward``)."""
    flat, d_head = clipped_per_sample(head, fused, y, max_norm=max_norm)
    b, std = len(y), 2.0 * max_norm * noise_multiplier
    head_grad = (flat[:, :d_head].sum(0) + std * noise.normal(d_head).to(flat)) / b
    rows = (flat[:, d_head:] + std * noise.normal((b, flat.shape[1] - d_head)).to(flat)) / b
    start = 0
    for p in head.parameters():
        p.grad = head_grad[start:start + p.numel()].view_as(p).clone()
        start += p.numel()
    return rows.reshape(fused.shape).detach().cpu().numpy().astype(np.float32)


def _batch(seed=0):
    torch.manual_seed(seed)
    head = nn.Sequential(nn.Linear(P, 32), nn.ReLU(), nn.Linear(32, K))
    g = torch.Generator().manual_seed(seed)
    return head, torch.randn(N, P, generator=g), torch.randint(0, K, (N,), generator=g)


def _release(monkeypatch, sigma, *, old):
    """The rows the server's label_gp sends down for a batch of N examples (crypto noise of the server)."""
    if old:
        monkeypatch.setattr(label_gp, "private_backward", old_private_backward)
    (defense,) = make_defenses([{"kind": "label_gp", "noise_multiplier": sigma, "max_norm": C}])
    head, fused, y = _batch()
    noise = NodeNoise("crypto", seed=0, node=0).round("LabelGP", phase="train", epoch=0, step=0)
    return head, fused, y, defense.private_backward(head, fused, y, noise=noise)


def _clipped_rows(head, fused, labels):
    flat, d_head = clipped_per_sample(head, fused, labels, max_norm=C)
    return flat, d_head


def _float_verdict(rows, x, *, std, b):
    """Per coordinate: +1 a float32 w with fl(fl(x + fl(std·w))/b) == row exists (witness found), −1 none
    exists (certified by monotonicity), 0 not decided (counted as possible)."""
    r, x = rows.ravel().astype(np.float32), x.ravel().astype(np.float32)
    w0 = ((r.astype(np.float64) * b - x.astype(np.float64)) / std).astype(np.float32)
    lo, hi, ws = w0, w0, [w0]
    for _ in range(WINDOW):
        lo, hi = np.nextafter(lo, np.float32(-np.inf)), np.nextafter(hi, np.float32(np.inf))
        ws = [lo, *ws, hi]
    w = torch.from_numpy(np.stack(ws, axis=1))
    out = ((torch.from_numpy(x)[:, None] + std * w) / b).numpy()  # the old mechanism's own float32 ops
    hit = (out == r[:, None]).any(axis=1)
    straddle = (out[:, 0] < r) & (r < out[:, -1])
    return np.where(hit, 1, np.where(straddle, -1, 0)).reshape(rows.shape)


def _grid_possible(rows, codes, *, levels, b):
    """Per coordinate: an integer noise z with fl32((code + z)·C/(L·b)) == row exists (the discrete Gaussian
    gives every integer positive mass). Returns (possible, the noise z that would have been drawn)."""
    unit = C / levels / b
    m = np.round(rows.astype(np.float64) / unit).astype(np.int64)
    ok = np.zeros(rows.shape, dtype=bool)
    for d in (-1, 0, 1):
        ok |= ((m + d).astype(np.float64) * unit).astype(np.float32) == rows
    return ok, m - codes


@pytest.mark.parametrize("sigma,least", [(1.0, 0.15), (1.3, 0.7)])
def test_control_float_noise_leaves_rows_impossible_under_the_neighbouring_label(monkeypatch, sigma, least):
    head, fused, y, rows = _release(monkeypatch, sigma, old=True)
    truth = _float_verdict(rows, _clipped_rows(head, fused, y)[0][:, -P:].numpy(), std=2 * C * sigma, b=N)
    assert (truth == 1).all()  # the checker is sound: a witness for every coordinate under the true label
    other = _float_verdict(rows, _clipped_rows(head, fused, (y + 1) % K)[0][:, -P:].numpy(), std=2 * C * sigma, b=N)
    impossible = float((other == -1).any(axis=1).mean())
    assert impossible > least, impossible  # the attack works on the old path (P = 16: 28 % at sigma 1, 93 % at 1.3)


@pytest.mark.parametrize("sigma", [1.0, 1.3, 0.3])
def test_grid_noise_leaves_no_row_impossible_under_any_label(monkeypatch, sigma):
    head, fused, y, rows = _release(monkeypatch, sigma, old=False)
    levels, sigma2 = l2_grid(noise_multiplier=sigma)
    for shift in (0, 1, K // 2):  # the true label and two others (the node test below tries all ten)
        flat, d_head = _clipped_rows(head, fused, (y + shift) % K)
        codes = l2_grid_codes(flat, c=C, levels=levels)[:, d_head:].numpy()
        ok, z = _grid_possible(rows, codes, levels=levels, b=N)
        assert ok.all(), shift
        if shift == 0:  # the noise is really there, at the grid's std (≥ 2Cσ in units of the row)
            assert abs(float(z.std()) / np.sqrt(sigma2) - 1) < 0.05
    assert np.sqrt(sigma2) >= 2 * sigma * levels  # the noise drawn is never below the sigma accounted


def test_the_server_node_sends_grid_rows_possible_under_every_label(monkeypatch):
    """The same through the label holder's node: the gradient messages a party receives in a step."""
    server = defended_server([{"kind": "label_gp", "noise_multiplier": 1.0, "max_norm": C}])
    msgs = forward_messages()
    before = copy.deepcopy(server.head)
    fused = server.fuse(msgs).detach()
    y = torch.as_tensor(server.labels.y_train[server.schedule.train_ids(0, 0)])
    out = server.train_step(msgs, 0, 0)
    rows = np.concatenate([wire.from_array(a) for m in out for a in m.content.array_records["grad"].values()], axis=1)
    levels, _ = l2_grid(noise_multiplier=1.0)
    possible = []
    for shift in range(K):
        flat, d_head = clipped_per_sample(before, fused, (y + shift) % K, max_norm=C)
        codes = l2_grid_codes(flat, c=C, levels=levels)[:, d_head:].numpy()
        ok, _ = _grid_possible(rows.reshape(codes.shape), codes, levels=levels, b=len(y))
        possible.append(bool(ok.all()) and ok.size > 0)
    assert possible == [True] * K  # every label explains every row


def test_codes_never_exceed_the_grid_radius_and_the_sensitivity_stays_2c():
    g = torch.Generator().manual_seed(5)
    for sigma in (1e-12, 0.01, 0.7, 1.0, 3.0, 2047.0):
        levels, sigma2 = l2_grid(noise_multiplier=sigma)
        assert 1 <= levels <= 1 << 30 and 1 <= sigma2 <= 1 << 24 and sigma2 >= (2 * sigma * levels) ** 2
        v = torch.randn(500, 300, generator=g, dtype=torch.float64)
        v = v / v.norm(dim=1, keepdim=True) * C * (1 + 1e-7 * torch.rand(500, 1, generator=g, dtype=torch.float64))
        k = l2_grid_codes(v.to(torch.float32), c=C, levels=levels)
        assert int((k * k).sum(1).max()) <= levels * levels  # exact, in integers
    with pytest.raises(ConfigError, match="noise_multiplier"):
        l2_grid(noise_multiplier=2048.0)

