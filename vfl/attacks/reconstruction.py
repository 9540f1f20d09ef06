"""Feature reconstruction by the server from what it received (a learned decoder / inversion model).

Threat model: an honest-but-curious server. It sees, per training sample, what the protocol hands
it — each party's embedding (NPQ, LDP: noisy) or only their SUM (PBM and NPQ under secure
aggregation; PBM: the noisy decoded sum). Auxiliary knowledge (declared): the raw features of a
held-out slice of the training samples (e.g. leaked or bought records), paired with what it saw
for them. It fits a decoder observation -> one party's features on that slice and applies it to
every other sample. This is the learning-based model inversion of He, Zhang & Lee, "Model
Inversion Attacks against Collaborative Inference" (ACSAC 2019, the black-box "inverse network"),
applied to the vertical-FL embedding exchange.

Scores (experimenter's ground truth only): per-sample MSE and PSNR of the reconstruction, beside
the chance baseline of predicting the auxiliary slice's mean features.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from vfl.core.errors import DataError


def _standardize(train: np.ndarray, *others: np.ndarray) -> tuple[np.ndarray, ...]:
    mu, sd = train.mean(0, keepdims=True), train.std(0, keepdims=True)
    sd = np.where(sd > 1e-8, sd, 1.0)
    return tuple((a - mu) / sd for a in (train, *others))


def _mlp(d_in: int, d_out: int, hidden: Sequence[int], seed: int) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed & 0x7FFF_FFFF)
        layers: list[nn.Module] = []
        prev = d_in
        for h in hidden:
            layers += [nn.Linear(prev, h), nn.ReLU()]
            prev = h
        return nn.Sequential(*layers, nn.Linear(prev, d_out)).double()


def fit_decoder(*, obs: np.ndarray, target: np.ndarray, seed: int, hidden: Sequence[int] = (128, 128),
                epochs: int = 300, lr: float = 3e-3, weight_decay: float = 1e-4,
                val_fraction: float = 0.2) -> nn.Module | None:
    """An MLP ``obs -> target`` fitted by full-batch Adam on the auxiliary pairs, early-stopped on a
    held-out share of them. None when no epoch beats the mean of the targets on that share (then the
    attacker's best guess is the mean: the observations carry nothing it can use)."""
    if len(obs) != len(target) or len(obs) < 5:
        raise DataError(f"decoder needs >= 5 aligned auxiliary pairs; got {len(obs)} and {len(target)}")
    n_val = max(1, int(val_fraction * len(obs)))
    perm = np.random.default_rng(seed).permutation(len(obs))
    val, tr = perm[:n_val], perm[n_val:]
    x = torch.from_numpy(np.asarray(obs, dtype=np.float64))
    t = torch.from_numpy(np.asarray(target, dtype=np.float64))
    net = _mlp(x.shape[1], t.shape[1], hidden, seed)
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
    best = float(((t[val] - t[tr].mean(0)) ** 2).mean())  # the mean guess is the bar to beat
    state = None
    for epoch in range(epochs):
        opt.zero_grad(set_to_none=True)
        ((net(x[tr]) - t[tr]) ** 2).mean().backward()
        opt.step()
        if epoch % 10 == 9:
            with torch.no_grad():
                err = float(((net(x[val]) - t[val]) ** 2).mean())
            if err < best:
                best, state = err, {k: v.clone() for k, v in net.state_dict().items()}
    if state is None:
        return None
    net.load_state_dict(state)
    return net.eval()


def reconstruct(*, aux_obs: np.ndarray, aux_x: np.ndarray, obs: np.ndarray, seed: int,
                epochs: int = 300) -> np.ndarray:
    """Reconstruct features for ``obs`` with a decoder fitted on (``aux_obs``, ``aux_x``)."""
    aux_obs = np.asarray(aux_obs, dtype=np.float64).reshape(len(aux_obs), -1)
    obs = np.asarray(obs, dtype=np.float64).reshape(len(obs), -1)
    aux_x = np.asarray(aux_x, dtype=np.float64).reshape(len(aux_x), -1)
    zo_aux, zo = _standardize(aux_obs, obs)
    mu, sd = aux_x.mean(0, keepdims=True), aux_x.std(0, keepdims=True)
    sd = np.where(sd > 1e-8, sd, 1.0)
    net = fit_decoder(obs=zo_aux, target=(aux_x - mu) / sd, seed=seed, epochs=epochs)
    if net is None:
        return np.broadcast_to(mu, (len(obs), aux_x.shape[1])).copy()  # type: ignore[no-any-return]
    with torch.no_grad():
        pred = net(torch.from_numpy(zo)).numpy()
    return pred * sd + mu  # type: ignore[no-any-return]


def mse(pred: np.ndarray, truth: np.ndarray) -> float:
    """Mean squared error per feature, averaged over samples."""
    p, t = np.asarray(pred, np.float64).reshape(len(pred), -1), np.asarray(truth, np.float64).reshape(len(truth), -1)
    return float(((p - t) ** 2).mean())


def psnr(mse_value: float, *, data_range: float) -> float:
    """Peak signal-to-noise ratio 10·log10(range² / MSE) in dB (inf for a perfect reconstruction)."""
    if mse_value <= 0:
        return math.inf
    return 10.0 * math.log10(data_range**2 / mse_value)


def mean_baseline(aux_x: np.ndarray, truth: np.ndarray) -> float:
    """MSE of the no-information guess: every sample gets the auxiliary slice's mean features."""
    aux = np.asarray(aux_x, np.float64).reshape(len(aux_x), -1)
    return mse(np.broadcast_to(aux.mean(0), (len(truth), aux.shape[1])), truth)
