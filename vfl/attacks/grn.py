"""Generative-regression feature inference (GRN) — Luo, Wu, Xiao & Ooi, "Feature Inference Attack on
Model Predictions in Vertical Federated Learning", ICDE 2021 (§V, the generative regression network).

Threat model: the active party (the server, label holder) after training, with the trained model
white-box (Luo et al.'s assumption: the joint model's parameters are known to it) and the model's
prediction vectors for a set of samples (what it observes at inference). Its own features are the
columns it holds: here the features of the parties colluding with it (every party but the victim).
It trains a generator G(x_adv, r) -> x_victim (r: random noise) so that the model's prediction on
(x_adv, G(x_adv, r)) matches the observed one, jointly over all observed samples, and reads off
G's output as its estimate of the victim's features. No victim feature is ever an input.

Scores (experimenter's ground truth only): per-feature MSE of the estimate, beside predicting the
victim's training mean (the same no-information baseline as ``reconstruction.mean_baseline``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from vfl.core.errors import DataError

Predict = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (adv features, victim features) -> probabilities


def generator(*, adv_dim: int, noise_dim: int, victim_dim: int, hidden: int, seed: int) -> nn.Module:
    """G: (attacker's features ‖ noise) -> victim features, an MLP with a linear output (standardized features)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed & 0x7FFF_FFFF)
        return nn.Sequential(nn.Linear(adv_dim + noise_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                             nn.Linear(hidden, victim_dim))


def grn_attack(*, predict: Predict, adv_x: np.ndarray, observed: np.ndarray, prior_mean: np.ndarray,
               prior_std: np.ndarray, rng: torch.Generator, seed: int, noise_dim: int = 8, hidden: int = 128,
               epochs: int = 400, lr: float = 3e-3, log_probs: bool = True, prior_weight: float = 0.0,
               variance_weight: float = 0.0) -> np.ndarray:
    """The victim features G estimates for every observed sample (rows of ``adv_x`` / ``observed``).

    G outputs ``prior_mean + prior_std * z`` (the victim features' marginal mean and spread: declared
    aux, the scale Luo et al. fix by normalizing features to [0, 1]). Loss: squared error between
    ``predict(adv_x, G(adv_x, r))`` and the observed prediction vectors — as log-probabilities
    centred per sample (``log_probs``: the logits up to a constant, which the probabilities determine;
    softmax saturates otherwise) or as probabilities (Luo et al.'s form) — full batch, Adam; plus
    ``prior_weight`` × mean z² and ``variance_weight`` × the spread of G's output across fresh noise
    draws (Luo et al.'s regularizer against noise-driven guesses; 0 = off). ``rng`` draws r.
    """
    adv = torch.as_tensor(np.asarray(adv_x, np.float32)).reshape(len(adv_x), -1)
    obs = torch.as_tensor(np.asarray(observed, np.float32))
    if len(adv) != len(obs) or len(obs) < 2:
        raise DataError(f"GRN needs >= 2 observed predictions aligned with the attacker's rows; got {len(obs)}, {len(adv)}")
    mu = torch.as_tensor(np.asarray(prior_mean, np.float32)).reshape(1, -1)
    sd = torch.as_tensor(np.asarray(prior_std, np.float32)).reshape(1, -1).clamp_min(1e-6)
    g = generator(adv_dim=adv.shape[1], noise_dim=noise_dim, victim_dim=mu.shape[1], hidden=hidden, seed=seed)
    opt = torch.optim.Adam(g.parameters(), lr=lr)

    def centred_log(p: torch.Tensor) -> torch.Tensor:
        lp = torch.log(p.clamp_min(1e-12))
        return lp - lp.mean(1, keepdim=True)

    target = centred_log(obs) if log_probs else obs

    def draw() -> torch.Tensor:
        return g(torch.cat([adv, torch.randn(len(adv), noise_dim, generator=rng)], dim=1))

    for _ in range(epochs):
        opt.zero_grad(set_to_none=True)
        z = draw()
        pred = predict(adv, mu + sd * z)
        loss = (((centred_log(pred) if log_probs else pred) - target) ** 2).sum(1).mean()
        if prior_weight > 0:
            loss = loss + prior_weight * (z**2).mean()
        if variance_weight > 0:
            loss = loss + variance_weight * ((draw() - z) ** 2).mean()
        loss.backward()
        opt.step()
    with torch.no_grad():
        z = torch.stack([draw() for _ in range(8)]).mean(0)
        return (mu + sd * z).numpy().astype(np.float64)  # type: ignore[no-any-return]
