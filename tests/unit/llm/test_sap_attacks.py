"""EIA (nearest neighbour, optimization-based) and AIA on MiniLM representations and synthetic features."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from parties.llm.common.backbone import load_encoder, load_tokenizer
from parties.llm.sap.split import split_encoder
from vfl.attacks.attribute import attribute_inference, majority_rate, pooled_features, split_labeled
from vfl.attacks.inversion import nearest_neighbor_inversion, optimization_inversion, token_recovery
from vfl.core.rng import NoiseSource
from vfl.privacy.mechanisms.dchi import privatize

TEXTS = ["the gorgeously elaborate continuation of the lord of the rings trilogy is so huge",
         "effective but too-tepid biopic", "a masterpiece four years in the making",
         "the story is lame and the acting is wooden", "offers that rare combination of entertainment and education"]


@pytest.fixture(scope="module")
def tokens():
    tok = load_tokenizer(None)
    ids = [np.array(tok(t)["input_ids"]) for t in TEXTS]
    return ids, sorted(tok.all_special_ids)


@pytest.fixture(scope="module")
def encoder():
    return load_encoder(None)


def _nn_rate(vocab, ids, special, eta, snap, seed=0):
    flat = torch.as_tensor(np.concatenate(ids))
    released, _ = privatize(vocab[flat], eta=eta, noise=NoiseSource.seeded("test-nn", seed),
                            table=vocab if snap else None)
    guess = nearest_neighbor_inversion(released, vocab=vocab).numpy()
    cuts = np.cumsum([len(i) for i in ids])[:-1]
    return token_recovery(predicted=[[g] for g in np.split(guess, cuts)], truth=ids, ignore=special)


@pytest.mark.parametrize("snap", [True, False])
def test_nearest_neighbour_recovers_everything_without_noise_and_less_with_more(encoder, tokens, snap):
    ids, special = tokens
    vocab = encoder.embeddings.word_embeddings.weight.detach()
    assert _nn_rate(vocab, ids, special, math.inf, snap) == 1.0
    rates = [np.mean([_nn_rate(vocab, ids, special, eta, snap, seed) for seed in range(3)])
             for eta in (300.0, 75.0, 40.0, 20.0)]
    assert rates[0] > 0.95
    assert all(a >= b for a, b in zip(rates, rates[1:], strict=False)), rates
    assert rates[-1] < 0.2 and rates[1] < rates[0]


def test_optimization_inversion_through_one_block(encoder, tokens):
    ids, special = tokens
    bottom, _ = split_encoder(encoder, split=1, num_classes=2)
    bottom.eval()
    sel = [ids[1], ids[2]]
    width = max(len(i) for i in sel)
    x = torch.zeros(len(sel), width, dtype=torch.long)
    mask = torch.zeros_like(x)
    for r, i in enumerate(sel):
        x[r, : len(i)], mask[r, : len(i)] = torch.as_tensor(i), 1
    with torch.no_grad():
        clean = bottom(x, mask)
    noisy = clean.clone()
    noisy[mask.bool()] = privatize(clean[mask.bool()], eta=2.0, noise=NoiseSource.seeded("test-opt", 0))[0]

    def attack(target):
        pred = optimization_inversion(target=target, attention_mask=mask, bottom=bottom.forward_embeds,
                                      vocab=bottom.vocab, steps=100, lr=0.1, temperature=1.0,
                                      generator=torch.Generator().manual_seed(0))
        return token_recovery(predicted=[[pred[r, : len(i)].numpy()] for r, i in enumerate(sel)], truth=sel,
                              ignore=special)

    assert attack(clean) >= 0.8
    assert attack(noisy) <= 0.3


def test_token_recovery_union_and_ignore():
    truth = [np.array([101, 5, 6, 7, 102])]
    assert token_recovery(predicted=[[np.array([0, 5, 0, 0, 0])]], truth=truth, ignore=[101, 102]) == pytest.approx(1 / 3)
    two = [[np.array([0, 5, 0, 0, 0]), np.array([0, 0, 6, 0, 0])]]  # two observations: union
    assert token_recovery(predicted=two, truth=truth, ignore=[101, 102]) == pytest.approx(2 / 3)
    assert math.isnan(token_recovery(predicted=[], truth=[], ignore=()))


def test_attribute_inference_learns_a_leaked_attribute_and_not_noise():
    rng = np.random.default_rng(0)
    attr = rng.integers(0, 2, 400)
    feats = rng.normal(size=(400, 16)).astype(np.float32)
    leaky = feats.copy()
    leaky[:, 3] += 3.0 * attr
    known, rest = split_labeled(n=400, fraction=0.5, rng=rng)
    assert len(known) == 200 and not set(known) & set(rest) and len(known) + len(rest) == 400
    acc = lambda x: (attribute_inference(train_x=x[known], train_y=attr[known], test_x=x[rest], seed=0)  # noqa: E731
                     == attr[rest]).mean()
    assert acc(leaky) > 0.9
    assert abs(acc(feats) - 0.5) < 0.12
    assert majority_rate(np.array([1, 1, 0, 1])) == 0.75
    same = attribute_inference(train_x=feats[:5], train_y=np.ones(5, int), test_x=feats[5:9], seed=0)
    assert same.tolist() == [1, 1, 1, 1]
    np.testing.assert_allclose(pooled_features([np.ones((3, 2)), np.zeros((1, 2))]), [[1, 1], [0, 0]])
