"""SAP's attack readings: the attribute attacker uses the lengths it receives and an MLP probe, a
length-only baseline is reported beside it, EP comes with bootstrap intervals, and CTI releases the
contributing tokens exactly (SAP's Algorithm 1)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import strategies  # noqa: F401
from parties.llm.common.backbone import load_encoder, load_tokenizer
from parties.llm.sap.customer import Privatizer, SapCustomer
from parties.llm.sap.split import bottom_state, build_bottom, split_encoder
from tests.engine.llm.test_sap_nodes import ToySentiment
from vfl.attacks.attribute import (
    attribute_inference,
    bootstrap_ci,
    length_features,
    mlp_attribute_inference,
    split_labeled,
)
from vfl.attacks.inversion import token_recovery, token_recovery_counts
from vfl.core.rng import NoiseSource
from vfl.data.sampling import Schedule
from vfl.runtime.node import NodeSpec

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _noisy_pooled(lengths: np.ndarray, rng: np.random.Generator, d: int = 32) -> np.ndarray:
    """What heavy dχ noise leaves: each sample's pooled vector is the mean of L pure-noise token rows."""
    return np.stack([rng.normal(size=(int(n), d)).mean(0) for n in lengths]).astype(np.float32)


def _acc(pred: np.ndarray, truth: np.ndarray) -> float:
    return float((pred == truth).mean())


def test_lengths_give_the_attribute_away_where_the_old_linear_probe_read_chance():
    """Control: the old probe (linear, pooled vectors only) reads ~chance on an attribute that the
    token counts on the wire reveal; the attacker with the lengths gets it."""
    rng = np.random.default_rng(0)
    attr = rng.integers(0, 2, 600)
    lengths = np.where(attr == 1, rng.integers(20, 31, 600), rng.integers(6, 17, 600))  # as IMDB vs RT
    pooled = _noisy_pooled(lengths, rng)
    known, rest = split_labeled(n=600, fraction=0.5, rng=rng)
    both = np.concatenate([pooled, length_features(lengths)], axis=1)
    old = _acc(attribute_inference(train_x=pooled[known], train_y=attr[known], test_x=pooled[rest], seed=0), attr[rest])
    new = _acc(mlp_attribute_inference(train_x=both[known], train_y=attr[known], test_x=both[rest], seed=0), attr[rest])
    lens = length_features(lengths)
    alone = _acc(attribute_inference(train_x=lens[known], train_y=attr[known], test_x=lens[rest], seed=0), attr[rest])
    assert old < 0.65  # the weak reading: EP ≈ 0.4-0.5
    assert new > 0.95 and alone > 0.95  # what the vendor can really do, and the confound named


def test_the_mlp_probe_learns_nothing_where_there_is_nothing():
    rng = np.random.default_rng(1)
    attr = rng.integers(0, 2, 800)
    lengths = rng.integers(6, 31, 800)  # independent of the attribute
    both = np.concatenate([_noisy_pooled(lengths, rng), length_features(lengths)], axis=1)
    known, rest = split_labeled(n=800, fraction=0.5, rng=rng)
    acc = _acc(mlp_attribute_inference(train_x=both[known], train_y=attr[known], test_x=both[rest], seed=0),
               attr[rest])
    assert abs(acc - 0.5) < 0.08
    leaky = both.copy()
    leaky[:, 0] += 2.0 * attr  # one leaking coordinate among the noise: found
    acc = _acc(mlp_attribute_inference(train_x=leaky[known], train_y=attr[known], test_x=leaky[rest], seed=0),
               attr[rest])
    assert acc > 0.9


def test_bootstrap_interval_covers_and_matches_the_normal_approximation():
    rng = np.random.default_rng(2)
    hits = (rng.random(400) < 0.7).astype(float)
    p = hits.mean()
    lo, hi = bootstrap_ci(hits, rng=np.random.default_rng(3), resamples=4000)
    half = 1.96 * np.sqrt(p * (1 - p) / 400)
    assert lo < p < hi
    assert lo == pytest.approx(p - half, abs=0.01) and hi == pytest.approx(p + half, abs=0.01)
    small = bootstrap_ci(hits[:40], rng=np.random.default_rng(3))
    assert small[1] - small[0] > 2 * (hi - lo)  # fewer samples, wider interval
    assert all(np.isnan(bootstrap_ci(np.zeros(0), rng=np.random.default_rng(0))))


def test_token_recovery_counts_are_the_units_of_the_rate():
    truth = [np.array([101, 5, 6, 102]), np.array([101, 7, 102])]
    guesses = [[np.array([0, 5, 0, 0])], [np.array([0, 7, 0]), np.array([0, 0, 0])]]
    hits, totals = token_recovery_counts(predicted=guesses, truth=truth, ignore=[101, 102])
    assert hits.tolist() == [1, 1] and totals.tolist() == [2, 1]
    assert hits.sum() / totals.sum() == token_recovery(predicted=guesses, truth=truth, ignore=[101, 102])


# ---- CTI per SAP's Algorithm 1: no noise on contributing tokens -----------------------------
def _customer(privatizer: Privatizer) -> SapCustomer:
    ds = ToySentiment(num_train=120, num_test=8).dataset()
    tok = load_tokenizer(None)
    c = SapCustomer(NodeSpec(1, "party", "customer", "customer"), texts=(ds.x_train, ds.x_test),
                    labels=(ds.y_train, ds.y_test), num_classes=2, tokenizer=tok, max_len=24, split=0, frozen=True,
                    privatizer=privatizer, schedule=Schedule(seed=0, num_train=120, num_test=8, batch_size=16,
                                                             eval_batch_size=16),
                    make_optimizer=lambda p: torch.optim.SGD(p, lr=0.1), seed=0, noise_rng="seeded")
    bottom, _ = split_encoder(copy.deepcopy(load_encoder(None)), split=0, num_classes=2)
    config_json, state = bottom_state(bottom)
    c.bottom = build_bottom(config_json=config_json, split=0, state=state).eval().requires_grad_(False)
    return c


@pytest.mark.parametrize("factor", [None, 0.1])
def test_contributing_tokens_are_released_exact_by_default(factor):
    kw = {} if factor is None else {"cti_factor": factor}
    c = _customer(Privatizer(eta=2.0, snap=True, cti=True, cti_fraction=0.2, **kw))
    assert len(c.contributing) > 0
    ids, lengths = c.ids_train[:64], c.len_train[:64]
    out = c.release(ids, lengths, noise=NoiseSource.seeded("test-cti", 0)).numpy()
    tokens = np.concatenate([row[:n] for row, n in zip(ids, lengths, strict=True)])
    table = c.bottom.vocab.detach().numpy()
    contrib = np.isin(tokens, c.contributing)
    exact = np.all(out == table[tokens], axis=1)
    if factor is None:  # the default (paper): every contributing token's row is its own embedding
        assert exact[contrib].all()
    else:  # control: the old default 0.1 noised them, some snapped elsewhere
        assert not exact[contrib].all()
    assert not exact[~contrib].all()  # the others are privatized either way
