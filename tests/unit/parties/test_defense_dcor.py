"""dcor (NoPeek) at the passive parties: the statistic, and the exact gradient it adds to the bottom's step."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import strategies  # noqa: F401
from parties.defenses.forward import distance_correlation
from parties.vertical import wire as vw
from parties.vertical.party import step_config
from simulations.data.source import ConfigDataSource
from vfl.core.errors import ConfigError
from vfl.engine.schema import load_run_config
from vfl.engine.strategy import STRATEGIES
from vfl.runtime import message as wire
from vfl.runtime.node import NodeSpec

ALPHA = 0.5


def test_distance_correlation_is_one_for_affine_maps_and_small_for_independent_data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(400, 5, generator=g)
    assert float(distance_correlation(x, 2 * x + 1)) == pytest.approx(1.0, abs=1e-4)
    indep = float(distance_correlation(x, torch.randn(400, 3, generator=g)))
    assert indep < 0.2 < float(distance_correlation(x, torch.tanh(x[:, :2])))


def _party(defenses):
    cfg = load_run_config({"strategy": "npq", "dataset": "digits", "num_parties": 2, "defenses": defenses,
                           "model": {"embed_dim": 8, "bottom_hidden": [16]}, "train": {"batch_size": 32}})
    strat = STRATEGIES.get("npq")(cfg)
    data = ConfigDataSource.from_config(cfg)
    strat.prepare(data)
    party = strat.build_node(NodeSpec(1, "party", "party0", "parties"), data)
    start = wire.make(vw.Kind.TRAIN_FORWARD, src=0, dst=1, round=wire.round_tag(0, 0),
                      content=wire.records(**{vw.Record.STEP: step_config(epoch=0, step=0, forward=True)}))
    party.on_train([start])  # forward of step 0: the pending embedding
    return party


def test_the_party_steps_with_the_servers_gradient_plus_alpha_times_the_dcor_gradient():
    g = np.random.default_rng(0).normal(size=(32, 8)).astype(np.float32) * 0.01
    armed = _party([{"kind": "dcor", "alpha": ALPHA}])
    assert type(armed).__name__.startswith("ForwardDefended")
    by_hand = _party([])  # control: a plain party, given the penalty's gradient explicitly
    plain = _party([])  # control: a plain party given only the server's gradient
    out = by_hand._pending[2].detach().requires_grad_(True)
    x = by_hand._inputs(by_hand.shard.x_train, by_hand.schedule.train_ids(0, 0))
    (extra,) = torch.autograd.grad(ALPHA * distance_correlation(x, out), out)
    armed.apply_gradient(g, 0, 0)
    by_hand.apply_gradient(g + extra.numpy(), 0, 0)
    plain.apply_gradient(g, 0, 0)
    for a, b in zip(armed.bottom.parameters(), by_hand.bottom.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-7)
    assert any(not torch.allclose(a, c) for a, c in zip(armed.bottom.parameters(), plain.bottom.parameters(), strict=True))


def test_dcor_is_refused_with_dp_sgd_and_local_steps():
    with pytest.raises(ConfigError, match=r"^defenses\[0\]\.kind: dcor is not available here: dCor couples"):
        load_run_config({"strategy": "pbm", "defenses": [{"kind": "dcor", "alpha": 1}],
                         "privacy": {"bottom_dp": {"noise_multiplier": 1.0, "max_grad_norm": 1.0}}})
    with pytest.raises(ConfigError, match=r"^defenses\[0\]\.kind: dcor is not available here: .*local_steps"):
        load_run_config({"strategy": "npq", "defenses": [{"kind": "dcor", "alpha": 1}], "train": {"local_steps": 2}})
