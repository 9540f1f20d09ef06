"""Mironov's floating-point attack (CCS 2012) on the LDP baseline, played by the server.

The server knows the mechanism and holds one noisy coordinate y a party sent. For a neighbouring
input x' it asks: could ANY noise draw have produced exactly this y from x'? If not, the ratio of
likelihoods is infinite and no (ε, δ) with δ below the fraction of such outputs holds. Control: the
old float32 Gaussian (``params.noise: float``) gives a non-zero fraction of impossible outputs. Now
(``discrete``, the default): every output is a lattice point, possible under every input.
"""

from __future__ import annotations

import math

import numpy as np
import torch

import strategies  # noqa: F401
from parties.mods.encoding import read_encoded
from vfl.core.rng import NodeNoise
from vfl.engine.schema import load_run_config
from vfl.engine.strategy import STRATEGIES
from vfl.privacy.mechanisms.gaussian import grid_codes, ldp_grid, ldp_sigma
from vfl.runtime import message as wire
from vfl.runtime.mods import ModContext, apply_mods

C = 1.0
SIGMA = ldp_sigma(b=16, beta=0.25, num_parties=4, c=C)  # the demo's LDP sigma = sqrt(8)
N = 20_000
WINDOW = 12  # float32 candidates for the noise on each side of (y - x')/sigma


def _server_view(noise_kind: str, x: float) -> np.ndarray:
    """What the server reads from party 0 whose every embedding coordinate is x (crypto noise)."""
    cfg = load_run_config({"strategy": "ldp", "num_parties": 4, "model": {"tanh_c": C},
                           "params": {"noise": noise_kind}})
    ldp = STRATEGIES.get("ldp")(cfg)
    assert math.isclose(ldp.sigma, SIGMA)
    ctx = ModContext(party=0, num_parties=4, phase="train", epoch=0, step=0, seed=0,
                     node_noise=NodeNoise("crypto", seed=0, node=1), state={}, secagg=None)
    e = np.full((N // 16, 16), x, np.float32)
    msg = wire.make("train.embedding", src=1, dst=0, round="train:0:0", content=wire.records(emb=wire.arrays(e=e)))
    sent = wire.Wire.of(apply_mods(ldp.party_mods(0), msg, ctx)).open()
    return read_encoded(sent).values.ravel()


def _possible_float(y: np.ndarray, x_other: float) -> np.ndarray:
    """For each y: does a float32 standard normal w exist with fl32(x' + fl32(σ·w)) == y (the old
    mechanism's arithmetic, ``x + sigma * normal(float32)``)? Searches w near (y − x')/σ; where y's
    rounding interval spans many noise values (ulp(y) ≥ 4·ulp(y − x')) the answer is 'possible'."""
    y32 = y.astype(np.float32)
    w0 = ((y32.astype(np.float64) - x_other) / SIGMA).astype(np.float32)
    bits = w0.view(np.int32)[:, None] + np.arange(-WINDOW, WINDOW + 1, dtype=np.int32)[None, :]
    w = torch.from_numpy(bits.view(np.float32))
    out = torch.tensor(x_other, dtype=torch.float32) + SIGMA * w  # the mechanism's own float32 ops
    hit = (out == torch.from_numpy(y32)[:, None]).any(dim=1).numpy()
    coarse = np.spacing(np.abs(y32)) >= 4 * np.spacing(np.abs(y32 - np.float32(x_other)))
    return hit | coarse


def _possible_discrete(y: np.ndarray, x_other: float) -> np.ndarray:
    """For each y: is there an integer noise z with release(code(x') + z) == y? (The grid mechanism
    sends (code + z)·c/L in float32; the discrete Gaussian gives every integer positive mass.)"""
    levels, _ = ldp_grid(sigma=SIGMA, c=C)
    code = int(grid_codes(torch.tensor([x_other]), c=C, levels=levels)[0])
    k = np.round(y.astype(np.float64) * levels / C).astype(np.int64)
    z = k - code
    rebuilt = ((code + z).astype(np.float64) * (C / levels)).astype(np.float32)
    return np.asarray(rebuilt == y.astype(np.float32))


def test_control_float_noise_has_outputs_impossible_under_the_neighbour():
    x, x_other = C, -C  # worst-case neighbours: one coordinate at +c versus -c
    y = _server_view("float", x)
    assert _possible_float(y, x).all()  # the checker is sound: every y is possible under the true input
    impossible = 1.0 - _possible_float(y, x_other).mean()
    assert impossible > 0.05, impossible  # the attack works on the old path (issue: 15-25 % at demo sigma)


def test_discrete_grid_noise_leaves_no_output_impossible_under_either_neighbour():
    for x, x_other in ((C, -C), (0.3, -0.7), (-C, 0.0)):
        y = _server_view("discrete", x)
        assert _possible_discrete(y, x).all() and _possible_discrete(y, x_other).all()
        assert float(np.std(y - x)) > 0.9 * SIGMA  # the noise is really there
