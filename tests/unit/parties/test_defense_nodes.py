"""Defenses inside the label holder's node: labels randomized once and kept across restarts, gradient
mods on every message it sends down (what a passive party receives is the defended gradient)."""

from __future__ import annotations

import numpy as np
import pytest

import strategies  # noqa: F401
from parties.vertical import wire as vw
from parties.vertical.party import step_config
from simulations.data.source import ConfigDataSource
from vfl.engine.schema import load_run_config
from vfl.engine.strategy import STRATEGIES
from vfl.privacy.mechanisms.label_dp import keep_probability
from vfl.runtime import message as wire
from vfl.runtime.node import NodeSpec, state_from_bytes, state_to_bytes

SERVER = NodeSpec(0, "server", "server", "server")
M, P = 2, 8


def _server(defenses, *, noise_rng="crypto", fusion="sum"):
    cfg = load_run_config({"strategy": "npq", "dataset": "digits", "num_parties": M, "defenses": defenses,
                           "privacy": {"noise_rng": noise_rng}, "model": {"embed_dim": P, "fusion": fusion},
                           "train": {"batch_size": 32}})
    strat = STRATEGIES.get("npq")(cfg)
    data = ConfigDataSource.from_config(cfg)
    strat.prepare(data)
    return strat.build_node(SERVER, data)


def _embeddings(rows: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [wire.make(vw.Kind.TRAIN_FORWARD, src=i + 1, dst=0, round=wire.round_tag(0, 0),
                      content=wire.records(**{vw.Record.EMB: wire.arrays(**{vw.Array.FLOAT: rng.normal(size=(rows, P)).astype(np.float32)}),
                                              vw.Record.STEP: step_config(epoch=0, step=0, forward=True)}))
            for i in range(M)]


def _grads(server) -> list[np.ndarray]:
    out = server.train_step(_embeddings(32), 0, 0)
    return [wire.from_array(arr) for m in out for arr in m.content.array_records[vw.Record.GRAD].values()]


def test_label_rr_draws_the_training_labels_once_at_the_formula_rate():
    server = _server([{"kind": "label_rr", "epsilon": 1.0}])
    y, used = server.labels.y_train, server.train_labels()
    assert server.train_labels() is used  # drawn once, reused every step
    n, p = len(y), keep_probability(epsilon=1.0, num_classes=10)
    assert abs(np.mean(used == y) - p) < 5 * np.sqrt(p * (1 - p) / n)
    control = _server([])  # control: no defense, the head trains on the true labels
    assert control.train_labels() is control.labels.y_train


def test_label_rr_labels_survive_a_restart_and_are_never_redrawn():
    server = _server([{"kind": "label_rr", "epsilon": 1.0}])
    used = server.train_labels().copy()
    state = state_from_bytes(state_to_bytes(server.state()))  # the checkpoint's own serialization
    fresh = _server([{"kind": "label_rr", "epsilon": 1.0}])
    assert not np.array_equal(fresh.train_labels(), used)  # crypto: another node draws other labels
    restarted = _server([{"kind": "label_rr", "epsilon": 1.0}])
    restarted.load_state(state)
    assert np.array_equal(restarted.train_labels(), used)  # the checkpoint keeps the one release


def test_seeded_noise_replays_the_labels_crypto_does_not():
    a = _server([{"kind": "label_rr"}], noise_rng="seeded").train_labels()
    b = _server([{"kind": "label_rr"}], noise_rng="seeded").train_labels()
    assert np.array_equal(a, b)


@pytest.mark.parametrize("fusion", ["sum", "concat"])
def test_grad_topk_sparsifies_every_gradient_message(fusion):
    grads = _grads(_server([{"kind": "grad_topk", "keep": 0.25}], fusion=fusion))
    assert grads and all(((g != 0).sum(1) == 2).all() for g in grads)  # 25 % of 8 coordinates
    control = _grads(_server([], fusion=fusion))
    assert all(((g != 0).sum(1) == P).all() for g in control)


def test_grad_noise_changes_what_leaves_the_server():
    clean = _grads(_server([], noise_rng="seeded"))[0]
    noisy = _grads(_server([{"kind": "grad_noise", "scale": 0.5}], noise_rng="seeded"))[0]
    diff = noisy - clean  # same seeded head and batch: the difference is the noise
    assert abs(diff.std() - 0.5) < 0.15 and np.abs(clean).max() < 0.5
