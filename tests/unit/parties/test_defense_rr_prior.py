"""label_rr_prior: RRWithPrior's output distribution against its closed form, and the two stages in the server."""

from __future__ import annotations

import math

import numpy as np
import pytest

import strategies  # noqa: F401
from parties.vertical import wire as vw
from parties.vertical.party import step_config
from simulations.data.source import ConfigDataSource
from vfl.core.errors import ConfigError
from vfl.core.rng import NoiseSource
from vfl.engine.schema import load_run_config
from vfl.engine.strategy import STRATEGIES
from vfl.privacy.defenses import UNDRAWN
from vfl.privacy.mechanisms.label_dp import keep_probability
from vfl.privacy.mechanisms.rr_prior import rr_with_prior, top_k
from vfl.runtime import message as wire
from vfl.runtime.node import NodeSpec, state_from_bytes, state_to_bytes

N = 40_000


def _z(p: float, n: int) -> float:
    return 5.0 * math.sqrt(max(p * (1 - p), 1e-12) / n)


def test_top_k_maximises_the_chance_of_outputting_the_true_label():
    rng = np.random.default_rng(0)
    prior = rng.dirichlet(np.full(6, 0.3), size=200)
    for eps in (0.5, 1.0, 3.0):
        order, k = top_k(prior, epsilon=eps)
        for row, kk, o in zip(prior, k, order, strict=True):
            brute = [math.exp(eps) / (math.exp(eps) + j - 1) * np.sort(row)[::-1][:j].sum() for j in range(1, 7)]
            assert kk == int(np.argmax(brute)) + 1 and set(o[:kk]) == set(np.argsort(-row)[:kk])
    _, k = top_k(np.full((3, 10), 0.1), epsilon=1.0)
    assert (k == 10).all()  # uniform prior: plain randomized response


@pytest.mark.parametrize(("eps", "k_star"), [(0.5, 2), (1.0, 2), (2.0, 3)])
def test_output_distribution_matches_the_closed_form(eps, k_star):
    """Prior (0.45, 0.3, 0.2, 0.04, 0.01): k* by hand (ε = 1: 0.548 at k = 2 vs 0.547 at k = 3), then
    P[o | y] for y in and out of Y_k against e^ε/(e^ε+k−1), 1/(e^ε+k−1), 1/k and 0."""
    prior = np.array([0.45, 0.3, 0.2, 0.04, 0.01])
    _, (k,) = top_k(prior[None], epsilon=eps)
    assert k == k_star
    e = math.exp(eps)
    rates = {}
    for y in range(5):
        out = rr_with_prior(np.full(N, y), prior=np.tile(prior, (N, 1)), epsilon=eps, noise=NoiseSource.fresh())
        for o in range(5):
            if y < k:
                want = e / (e + k - 1) if o == y else (1 / (e + k - 1) if o < k else 0.0)
            else:
                want = 1 / k if o < k else 0.0
            got = float(np.mean(out == o))
            assert abs(got - want) < _z(want, N), (y, o, got, want)
            rates[y, o] = want
    for o in range(k):  # the closed form is ε-DP: the likelihood ratio of any output is at most e^ε
        col = [rates[y, o] for y in range(5)]
        assert max(col) / min(col) <= e * (1 + 1e-12)


def test_uniform_prior_keeps_at_the_randomized_response_rate():
    y = np.arange(N) % 10
    out = rr_with_prior(y, prior=np.full((N, 10), 0.1), epsilon=1.0, noise=NoiseSource.fresh())
    p = keep_probability(epsilon=1.0, num_classes=10)
    assert abs(np.mean(out == y) - p) < _z(p, N)


def test_a_sharp_prior_keeps_more_true_labels_than_randomized_response():
    """Why a prior helps: when the prior's top class is right, RRWithPrior keeps it far more often."""
    y = np.arange(N) % 10
    prior = np.full((N, 10), 0.02)
    prior[np.arange(N), y] = 0.82
    out = rr_with_prior(y, prior=prior, epsilon=1.0, noise=NoiseSource.fresh())
    assert np.mean(out == y) == 1.0  # k* = 1 (0.82 > e/(e+1)·0.84): the prior's top class, always
    control = rr_with_prior(y, prior=np.full((N, 10), 0.1), epsilon=1.0, noise=NoiseSource.fresh())
    assert np.mean(control == y) < 0.3


M, P = 2, 8
SERVER = NodeSpec(0, "server", "server", "server")


def _server(**opts):
    cfg = load_run_config({"strategy": "npq", "dataset": "digits", "num_parties": M, "train": {"batch_size": 32},
                           "defenses": [{"kind": "label_rr_prior", "epsilon": 1.0, **opts}],
                           "model": {"embed_dim": P}})
    strat = STRATEGIES.get("npq")(cfg)
    data = ConfigDataSource.from_config(cfg)
    strat.prepare(data)
    return strat.build_node(SERVER, data)


def _step(server, epoch, step):
    rng = np.random.default_rng(epoch * 1000 + step)
    rows = len(server.schedule.train_ids(epoch, step))
    msgs = [wire.make(vw.TRAIN_FORWARD if hasattr(vw, "TRAIN_FORWARD") else vw.Kind.TRAIN_FORWARD, src=i + 1, dst=0,
                      round=wire.round_tag(epoch, step),
                      content=wire.records(**{"emb": wire.arrays(e=rng.normal(size=(rows, P)).astype(np.float32)),
                                              "step": step_config(epoch=epoch, step=step, forward=True)}))
            for i in range(M)]
    return server.train_step(msgs, epoch, step)


def test_stage_one_draws_a_label_blind_fraction_and_leaves_the_rest_undrawn():
    server = _server(first_stage=0.3)
    used, y = server.train_labels(), server.labels.y_train
    first = used != UNDRAWN
    n = len(y)
    assert abs(first.mean() - 0.3) < _z(0.3, n)
    p = keep_probability(epsilon=1.0, num_classes=10)
    assert abs(np.mean(used[first] == y[first]) - p) < _z(p, int(first.sum()))


def test_stage_two_labels_are_drawn_in_the_epoch_before_and_used_from_stage_epoch():
    server = _server(first_stage=0.3, stage_epoch=1)
    before = server.train_labels().copy()
    for step in range(server.schedule.steps):  # epoch 0 = stage_epoch - 1: every undrawn label drawn, pending
        _step(server, 0, step)
    assert np.array_equal(server.train_labels(), before)  # nothing used yet
    pending = server.server_labels.pending
    assert np.array_equal(pending != UNDRAWN, before == UNDRAWN)  # exactly the stage-2 examples, each once
    saved = state_from_bytes(state_to_bytes(server.state()))
    restarted = _server(first_stage=0.3, stage_epoch=1)
    restarted.load_state(saved)
    _step(restarted, 1, 0)  # stage 2: the pending draws, not new ones, become the training labels
    used = restarted.train_labels()
    assert (used != UNDRAWN).all() and np.array_equal(used[before == UNDRAWN], pending[before == UNDRAWN])
    assert np.array_equal(used[before != UNDRAWN], before[before != UNDRAWN])


def test_refusals_name_the_entry_and_the_reason():
    with pytest.raises(ConfigError, match=r"^defenses\[0\]\.kind: label_rr_prior is not available here: stage 2 "
                                          r"starts at epoch stage_epoch=5 but the run has train.epochs=3"):
        load_run_config({"strategy": "npq", "train": {"epochs": 3},
                         "defenses": [{"kind": "label_rr_prior", "stage_epoch": 5}]})
    with pytest.raises(ConfigError, match=r"^defenses\[1\]\.kind: label_rr_prior is not available here: label_rr "
                                          r"also draws"):
        load_run_config({"strategy": "pbm", "defenses": [{"kind": "label_rr"}, {"kind": "label_rr_prior"}]})
    cfg = load_run_config({"strategy": "ldp", "defenses": [{"kind": "label_rr_prior"}]})
    assert cfg.defenses[0] == {"kind": "label_rr_prior", "epsilon": 1.0, "first_stage": 0.8, "stage_epoch": 3}


def test_undrawn_examples_send_zero_gradient_rows_and_drawn_ones_do_not():
    server = _server(first_stage=0.3, stage_epoch=1)
    out = _step(server, 0, 0)
    grad = [wire.from_array(a) for m in out for a in m.content.array_records["grad"].values()][0]
    drawn = server.train_labels()[server.schedule.train_ids(0, 0)] != UNDRAWN
    assert 0 < drawn.sum() < len(drawn)
    assert (np.abs(grad[~drawn]).max(1) == 0).all() and (np.abs(grad[drawn]).max(1) > 0).all()


def test_the_stage_split_is_label_blind_and_drawn_from_the_crypto_source():
    """Two servers from one config (same seed) split differently (crypto coins, not the seed), and every
    class lands in stage 1 at the first_stage rate (the split never looks at the label)."""
    a, b = _server(first_stage=0.5).train_labels(), _server(first_stage=0.5).train_labels()
    assert not np.array_equal(a != UNDRAWN, b != UNDRAWN)
    y = _server(first_stage=0.5).labels.y_train
    for c in range(10):
        share = float(np.mean(a[y == c] != UNDRAWN))
        assert abs(share - 0.5) < _z(0.5, int((y == c).sum())), (c, share)


def test_the_stage_two_prior_is_the_heads_prediction_and_ignores_the_label_it_randomizes():
    """Audit of Alg. 3's prior: each stage-2 draw gets softmax(head(fused row)) of that example, and
    changing the true labels of the stage-2 examples changes no prior (only the features speak)."""
    import copy
    import dataclasses

    import torch

    server = _server(first_stage=0.3, stage_epoch=1)
    undrawn = server.train_labels() == UNDRAWN
    twin = _server(first_stage=0.3, stage_epoch=1)
    twin.load_state(state_from_bytes(state_to_bytes(server.state())))  # same head, optimizer and stage-1 draws
    twin.data_guard.expect(None)  # on purpose: the twin holds other labels for the same features
    other = twin.labels.y_train.copy()
    other[undrawn] = (other[undrawn] + 1) % 10
    twin.labels = dataclasses.replace(twin.labels, y_train=other)  # a copy: the loaded dataset is shared
    assert np.array_equal(twin.train_labels(), server.train_labels())
    assert not np.array_equal(twin.labels.y_train, server.labels.y_train)
    seen: dict[str, list[np.ndarray]] = {"server": [], "twin": []}
    for name, node in (("server", server), ("twin", twin)):
        d = node.defenses[0]

        def spy(y, *, prior, noise, _draw=d.draw_staged, _out=seen[name]):
            _out.append(prior)
            return _draw(y, prior=prior, noise=noise)

        d.draw_staged = spy
    for step in range(3):
        head = copy.deepcopy(server.head).eval()
        rng = np.random.default_rng(step)  # the same embeddings _step sends (fusion = sum)
        rows = len(server.schedule.train_ids(0, step))
        fused = sum(rng.normal(size=(rows, P)).astype(np.float32) for _ in range(M))
        ids = server.schedule.train_ids(0, step)
        with torch.no_grad():
            want = torch.softmax(head(torch.as_tensor(fused)[torch.as_tensor(undrawn[ids])]), 1).double().numpy()
        _step(server, 0, step)
        _step(twin, 0, step)
        np.testing.assert_allclose(seen["server"][-1], want, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(seen["twin"][-1], seen["server"][-1], rtol=0, atol=0)
