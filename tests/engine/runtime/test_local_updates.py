"""FedBCD local updates (train.local_steps = Q): Q=1 is today's path bit for bit; Q>1 takes exactly Q
optimizer steps per exchange on every node, puts the same bytes on the wire, reports the same epsilon
(no extra release), and still trains on digits-5p."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import strategies  # noqa: F401
from simulations.cli.runner import read_config_file
from simulations.data.source import ConfigDataSource
from tests.support.helpers import run_with_states
from vfl.core.errors import ConfigError
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime.transport.inprocess import InProcessTransport

M, N, B = 3, 240, 50
CASES = [("npq", {}), ("ldp", {"sigma": 1.0}), ("pbm", {"b": 16}), ("npq+secagg", {})]


def _cfg(strategy: str, params: dict[str, Any], *, q: int | None, optimizer: str = "sgd", epochs: int = 2):
    train: dict[str, Any] = {"epochs": epochs, "batch_size": B, "lr": 0.05, "optimizer": optimizer}
    if q is not None:
        train["local_steps"] = q
    return load_run_config({"strategy": strategy, "num_parties": M, "seed": 3, "params": params,
                            "model": {"embed_dim": 6, "bottom_hidden": [8], "head_hidden": [8]},
                            "train": train, "privacy": {"noise_rng": "seeded"}})


def _run(cfg, transport=None) -> tuple[dict[str, Any], list[dict[str, Any]], dict[int, dict[str, Any]]]:
    return run_with_states(cfg, num_train=N, transport=transport)


def _params(states: dict[int, dict[str, Any]]) -> list[torch.Tensor]:
    return [t for nid in sorted(states) for key in ("head", "bottom") if key in states[nid]
            for t in states[nid][key].values()]


@pytest.mark.parametrize(("strategy", "params"), CASES)
def test_q1_is_the_default_path_bit_for_bit_and_q3_is_not(strategy, params):
    base_s, base_h, base_p = _run(_cfg(strategy, params, q=None))
    q1_s, q1_h, q1_p = _run(_cfg(strategy, params, q=1))
    assert [r["train_loss"] for r in q1_h] == [r["train_loss"] for r in base_h]
    for a, b in zip(_params(q1_p), _params(base_p), strict=True):
        assert torch.equal(a, b)
    _, q3_h, q3_p = _run(_cfg(strategy, params, q=3))
    assert any(not torch.equal(a, b) for a, b in zip(_params(q3_p), _params(base_p), strict=True))


@pytest.mark.parametrize(("strategy", "params"), CASES)
def test_q3_same_bytes_same_epsilon_and_exactly_q_updates_per_exchange(strategy, params):
    one, _, _ = _run(_cfg(strategy, params, q=1, optimizer="adam"))
    three, _, states = _run(_cfg(strategy, params, q=3, optimizer="adam"))
    for key in ("total_bytes_up", "total_bytes_down", "payload_bytes_up", "payload_bytes_down",
                "messages_up", "messages_down", "bytes_by_kind"):
        assert three[key] == one[key], key
    assert three.get("epsilon") == one.get("epsilon")  # same releases -> same accountant output
    if strategy in ("ldp", "pbm"):
        assert one["epsilon"] is not None and one["epsilon"] > 0
    exchanges = 2 * int(np.ceil(N / B))  # epochs x steps: one gradient per party and one head step each
    for nid, st in states.items():  # Adam counts its own steps: exactly Q per exchange on every node
        steps = {float(s["step"]) for s in st["optimizer"]["state"].values()}
        assert steps == {3.0 * exchanges}, (nid, steps)


def test_local_steps_refused_with_bottom_dp_and_for_llm_strategies():
    with pytest.raises(ConfigError) as exc:
        load_run_config({"strategy": "pbm", "train": {"local_steps": 3},
                         "privacy": {"bottom_dp": {"noise_multiplier": 1.0, "max_grad_norm": 1.0}}})
    assert exc.value.key == "train.local_steps"
    load_run_config({"strategy": "pbm", "train": {"local_steps": 1},
                     "privacy": {"bottom_dp": {"noise_multiplier": 1.0, "max_grad_norm": 1.0}}})
    with pytest.raises(ConfigError) as exc:
        load_run_config({"strategy": "split-lora", "num_parties": 1, "train": {"local_steps": 2}})
    assert exc.value.key == "train.local_steps"
    with pytest.raises(ConfigError) as exc:
        load_run_config({"strategy": "npq", "train": {"local_steps": 0}})
    assert exc.value.key == "train.local_steps"


def test_digits_5p_converges_with_q3():
    raw = read_config_file("digits-5p")
    raw.update(transport={"kind": "inprocess"}, privacy={"noise_rng": "seeded"})
    raw["train"] = {**raw["train"], "epochs": 2, "local_steps": 3}
    cfg = load_run_config(raw)
    transport = InProcessTransport()
    try:
        res = Engine(cfg, transport, ConfigDataSource.from_config(cfg), progress=False).run()
    finally:
        transport.shutdown()
    assert res.summary["final_test_acc"] > 0.7, res.summary["final_test_acc"]  # 10 classes: chance 0.1; seen 0.84
