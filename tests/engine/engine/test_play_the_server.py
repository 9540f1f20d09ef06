"""Play the server: the server's host is built from the full run config (seed included) and keeps
every message it was sent. It regenerates the parties' noise from the seeded recipe and removes
it. With ``privacy.noise_rng: seeded`` the attack works (so these tests can fail); with the
default ``crypto`` the noise comes from keystreams keyed inside each party and the same attack
is no better than an attacker who never saw the seed."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

import parties.llm.p3eft.client as client_mod
from parties.llm.p3eft.private_backprop import split_gradient
from parties.llm.p3eft.server import ModelServer
from parties.llm.p3eft.wire import read_step
from parties.mods import read_encoded
from tests.engine.llm.test_sap_nodes import ToySentiment
from tests.support.noise_capture import Capture, run_and_capture, vertical_config
from vfl.core.rng import NoiseSource
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.engine.strategy import STRATEGIES
from vfl.privacy.mechanisms.discrete_gaussian import discrete_gaussian
from vfl.privacy.mechanisms.gaussian import ldp_grid
from vfl.runtime import message as wire
from vfl.runtime.transport.inprocess import InProcessTransport


def _recipe(cap: Capture, purpose: str, key: tuple[int, str, int, int]) -> NoiseSource:
    """The party's noise as the server rebuilds it from what it holds (its schedule carries the seed)."""
    node, phase, epoch, step = key
    return NoiseSource.for_round("seeded", seed=cap.server.schedule.seed, purpose=purpose, node=node, phase=phase,
                                 epoch=epoch, step=step)


# ---- LDP: subtract the regenerated Gaussian -----------------------------------------------------
def ldp_attack(cap: Capture) -> tuple[float, float, float]:
    """(max |error|, rms error, rms of the noise actually added) of the server's recovered embeddings."""
    sigma = STRATEGIES.get("ldp")(cap.cfg).sigma  # the server knows the config
    levels, sigma2 = ldp_grid(sigma=sigma, c=cap.cfg.model.tanh_c)
    errs, added = [], []
    for key, m in cap.received.items():
        seen = torch.from_numpy(np.array(wire.get_array(m, "emb", "e")))
        if cap.cfg.params.noise == "float":
            guess = seen - sigma * _recipe(cap, "ldp", key).normal(tuple(seen.shape), dtype=seen.dtype)
        else:  # the discrete Gaussian on the grid: the same integers, regenerated from the recipe
            z = discrete_gaussian(_recipe(cap, "ldp", key), sigma2=sigma2, size=seen.numel())
            guess = seen - torch.from_numpy(z.reshape(seen.shape) * (cap.cfg.model.tanh_c / levels)).float()
        errs.append((guess.numpy() - cap.truth[key]).ravel())
        added.append((seen.numpy() - cap.truth[key]).ravel())
    err, noise = np.concatenate(errs).astype(np.float64), np.concatenate(added).astype(np.float64)
    return float(np.abs(err).max()), float(np.sqrt((err**2).mean())), float(np.sqrt((noise**2).mean())) / sigma


def test_server_strips_seeded_ldp_noise_but_not_crypto_noise():
    seeded = run_and_capture(vertical_config("ldp", "seeded"))
    assert seeded.server.schedule.seed == seeded.cfg.seed  # the server node holds the run seed
    worst, _, _ = ldp_attack(seeded)
    levels, _ = ldp_grid(sigma=STRATEGIES.get("ldp")(seeded.cfg).sigma, c=seeded.cfg.model.tanh_c)
    assert worst < seeded.cfg.model.tanh_c / levels  # recovered to the grid step: seeded noise protects nothing
    crypto = run_and_capture(vertical_config("ldp", "crypto"))
    sigma = STRATEGIES.get("ldp")(crypto.cfg).sigma
    _, rms, noise_in_sigmas = ldp_attack(crypto)
    assert 0.9 < noise_in_sigmas < 1.1  # what the party added really is N(0, σ²)
    assert rms > 0.9 * sigma  # subtracting the recipe leaves the error at σ·√2: it removes nothing


# ---- PBM (counts in the clear): replay the coins, then pick between two neighbouring inputs ------
def pbm_attack(cap: Capture, *, delta: float, seed: int = 0) -> dict[str, float]:
    """For every released coordinate x the server must tell x from x' = x ∓ δ (random order).
    It regenerates the coin words for both candidates and keeps the one whose count matches
    (likelihood otherwise). ``bound`` is the Bayes-optimal accuracy of ANY attacker without the
    coins: 1/2 + TV(Bin(b, p), Bin(b, p'))/2, averaged over the coordinates."""
    p, c = cap.cfg.params, cap.cfg.model.tanh_c
    rng = np.random.default_rng(seed)  # the game's coin (not the mechanism's)
    k = np.arange(p.b + 1).reshape(-1, 1, 1)
    correct = bound = replay = 0.0
    n = 0
    for key, m in cap.received.items():
        if key[1] != "train":
            continue
        q = read_encoded(m).values.astype(np.int64)
        x = torch.from_numpy(cap.truth[key]).to(torch.float64)  # ground truth, for scoring only
        u = (x / c).clamp(-1.0, 1.0)
        other = torch.where(u >= 0, u - delta / c, u + delta / c)
        swap = torch.from_numpy(rng.random(tuple(u.shape)) < 0.5)
        cand_a, cand_b = torch.where(swap, other, u), torch.where(swap, u, other)
        pa, pb = 0.5 + p.beta * cand_a, 0.5 + p.beta * cand_b
        qa = _recipe(cap, "pbm", key).binomial(p.b, pa).numpy()
        qb = _recipe(cap, "pbm", key).binomial(p.b, pb).numpy()
        la, lb = stats.binom.logpmf(q, p.b, pa.numpy()), stats.binom.logpmf(q, p.b, pb.numpy())
        pick_a = np.where((qa == q) != (qb == q), qa == q, la >= lb)
        correct += float((pick_a == ~swap.numpy()).sum())
        tv = 0.5 * np.abs(stats.binom.pmf(k, p.b, pa.numpy()) - stats.binom.pmf(k, p.b, pb.numpy())).sum(0)
        bound += float((0.5 + tv / 2).sum())
        replay += float((_recipe(cap, "pbm", key).binomial(p.b, 0.5 + p.beta * u).numpy() == q).sum())
        n += q.size
    return {"accuracy": correct / n, "bound": bound / n, "replay": replay / n, "n": n}


def test_server_replays_seeded_pbm_coins_but_not_crypto_coins():
    params = {"secagg": False, "b": 64, "beta": 0.25}  # the server sees each party's counts
    seeded = pbm_attack(run_and_capture(vertical_config("pbm", "seeded", params=params)), delta=0.12)
    assert seeded["n"] >= 4000
    assert seeded["replay"] == 1.0  # every count the parties sent is regenerated exactly
    assert 0.55 < seeded["bound"] < 0.65
    assert seeded["accuracy"] > seeded["bound"] + 0.2  # far beyond what the DP noise allows
    crypto = pbm_attack(run_and_capture(vertical_config("pbm", "crypto", params=params)), delta=0.12)
    assert crypto["replay"] < 0.2  # a chance collision of two independent binomials (~0.07)
    assert crypto["accuracy"] < crypto["bound"] + 4 * math.sqrt(0.25 / crypto["n"])


# ---- P3EFT: rebuild the pieces and coefficients, recombine g_h -----------------------------------
def _p3eft(noise_rng: str, model_dir: str) -> tuple[list[tuple[int, int, torch.Tensor]], list[torch.Tensor], int, int]:
    """Run P3EFT (2 servers, m = 2) and return what server 1 received for the adapter
    ((epoch, step, piece)), the client's true g_h per step, the seed and the client id."""
    cfg = load_run_config({"strategy": "p3eft", "num_parties": 1, "seed": 3,
                           "train": {"epochs": 1, "batch_size": 16, "optimizer": "adam", "lr": 1e-3},
                           "privacy": {"noise_rng": noise_rng},
                           "params": {"max_len": 16, "lora_rank": 4, "leak_window": 16, "n_adapters": 1,
                                      "alpha": 0.0, "model_dir": model_dir}})  # one adapter, no probe, a tiny BERT
    seen: list[tuple[int, int, torch.Tensor]] = []
    true_g: list[torch.Tensor] = []
    real_handle, real_split = ModelServer.handle, client_mod.split_gradient

    def handle(self, messages):
        for m in messages:
            if self.node_id == 1 and m.metadata.message_type == "train.backprop":
                t = read_step(m)
                if t.adapter == 0:
                    seen.append((t.epoch, t.step, torch.from_numpy(np.array(wire.get_array(m, "grad", "g")))[0]))
        return real_handle(self, messages)

    def split(g, **kw):
        true_g.append(g.detach().clone())
        return real_split(g, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ModelServer, "handle", handle)
        mp.setattr(client_mod, "split_gradient", split)
        Engine(cfg, InProcessTransport(), ToySentiment(num_train=32, num_test=8), progress=False).run()
    return seen, true_g, cfg.seed, cfg.params.servers


def p3eft_attack(noise_rng: str, model_dir: str) -> list[float]:
    """Cosine between the true g_h and the server's reconstruction: it regenerates α and the noise
    piece ξ, and fits the one unknown scale s of ξ by least squares: g ≈ α₂·piece + α₁·s·ξ."""
    seen, true_g, seed, client = _p3eft(noise_rng, model_dir)
    assert len(seen) == len(true_g) == 2
    out = []
    for (epoch, step, piece), g in zip(seen, true_g, strict=True):
        src = NoiseSource.for_round("seeded", seed=seed, purpose="p3eft-split", node=client, phase="train",
                                    epoch=epoch, step=step)
        dummy, alphas = split_gradient(torch.ones(piece.shape, dtype=torch.float64), m=2, std=1.0, noise=src)
        xi, a1, a2 = dummy[0], float(alphas[0]), float(alphas[1])
        base = a2 * piece.to(torch.float64)
        s = -float((base * xi).sum()) / (a1 * float((xi * xi).sum()))
        guess = base + a1 * s * xi
        out.append(float(torch.nn.functional.cosine_similarity(guess.reshape(-1), g.to(torch.float64).reshape(-1),
                                                               dim=0)))
    return out




def test_server_recombines_seeded_p3eft_gradients_but_not_crypto_ones(one_thread, tiny_bert):
    assert min(p3eft_attack("seeded", tiny_bert)) > 0.99  # one server alone recovers the client's g_h
    assert max(abs(c) for c in p3eft_attack("crypto", tiny_bert)) < 0.3  # what it gets is the noise piece
