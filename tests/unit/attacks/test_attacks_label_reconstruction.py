"""Label inference from gradient rows and the server's feature-reconstruction decoder (pure functions)."""

from __future__ import annotations

import numpy as np
import pytest

from vfl.attacks.label_inference import label_inference, label_leak
from vfl.attacks.reconstruction import mean_baseline, mse, psnr, reconstruct

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def test_label_independent_rows_sit_at_chance():
    rng = np.random.default_rng(1)
    res = label_inference([(rng.normal(size=(64, 8)), rng.integers(0, 2, 64)) for _ in range(8)], window=128,
                          rng=rng)
    assert res["leak"] < 0.7 and abs(res["leak"] - res["chance"]) < 0.1
    assert set(label_leak(rng.normal(size=(50, 3)), rng.integers(0, 3, 50), rng=rng)) >= {"cosine", "leak"}


def test_decoder_inverts_a_noisy_linear_embedding_and_not_pure_noise():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(600, 6))
    emb = np.tanh(x @ rng.normal(size=(6, 12)) / 3)
    aux, rest = slice(0, 200), slice(200, 600)
    pred = reconstruct(aux_obs=emb[aux], aux_x=x[aux], obs=emb[rest], seed=0, epochs=300)
    base = mean_baseline(x[aux], x[rest])
    assert mse(pred, x[rest]) < 0.2 * base
    assert psnr(mse(pred, x[rest]), data_range=float(np.ptp(x))) > psnr(base, data_range=float(np.ptp(x))) + 6
    noise = rng.normal(size=(600, 12))
    blind = reconstruct(aux_obs=noise[aux], aux_x=x[aux], obs=noise[rest], seed=0, epochs=300)
    assert mse(blind, x[rest]) > 0.9 * base
