"""Contract: every vertical strategy runs 2 epochs over every transport, counts its bytes, and puts
exactly what its encoding promises on the wire."""

from __future__ import annotations

import math

import pytest

import strategies  # noqa: F401
from strategies.base.vertical import VerticalStrategy
from tests.support.helpers import BlobSource
from vfl.core.errors import ConfigError
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.engine.strategy import STRATEGIES
from vfl.runtime.transport.inprocess import InProcessTransport

VERTICAL = [n for n in STRATEGIES.names() if issubclass(STRATEGIES.get(n), VerticalStrategy)]
M, P, N = 3, 6, 240


def _cfg(name: str, **transport):
    return load_run_config({"strategy": name, "num_parties": M, "seed": 2,
                            "model": {"embed_dim": P, "bottom_hidden": [8], "head_hidden": [8]},
                            "train": {"epochs": 2, "batch_size": 50, "lr": 0.05},
                            "transport": transport})


def _run(name: str, transport):
    engine = Engine(_cfg(name), transport, BlobSource(num_parties=M, num_train=N), progress=False)
    try:
        return engine.run()
    finally:
        transport.shutdown()


def test_the_paper_strategies_are_registered():
    assert {"npq", "npq+secagg", "pbm", "ldp"} <= set(VERTICAL)


@pytest.mark.parametrize("name", VERTICAL)
def test_two_epochs_inprocess(name):
    res = _run(name, InProcessTransport())
    s = res.summary
    assert len(res.history) == 2 and s["epochs"] == 2
    assert all(r["train_loss"] is not None and math.isfinite(r["train_loss"]) for r in res.history)
    assert s["total_bytes_up"] > s["payload_bytes_up"] > 0
    assert s["total_bytes_down"] > s["payload_bytes_down"] > 0
    # the payload is the information bound exactly (bit-packed values, one broadcast gradient)
    assert s["payload_bytes_up"] == s["information_bound_bytes_up"]
    assert s["payload_bytes_down"] == s["information_bound_bytes_down"]
    assert s["payload_bytes_up"] <= 1.05 * s["information_bound_bytes_up"]


@pytest.mark.parametrize("name", ["npq+secagg", "pbm"])
def test_secagg_refuses_concatenation(name):
    with pytest.raises(ConfigError) as exc:
        load_run_config({"strategy": name, "model": {"fusion": "concat"}})
    assert exc.value.key == "model.fusion"


def test_pbm_without_secagg_packs_plain_counts_and_accounts_one_party():
    cfg = load_run_config({"strategy": "pbm", "num_parties": M, "params": {"secagg": False, "b": 16},
                           "model": {"embed_dim": P}, "train": {"epochs": 1, "batch_size": 50}})
    res = Engine(cfg, InProcessTransport(), BlobSource(num_parties=M, num_train=N), progress=False).run()
    s = res.summary
    assert s["bits_per_element"] == 5 and s["setup_bytes"] == 0  # 2^5 > b = 16; no key exchange
    assert s["payload_bytes_up"] == s["information_bound_bytes_up"]
    with_secagg = Engine(load_run_config({"strategy": "pbm", "num_parties": M, "params": {"b": 16},
                                          "model": {"embed_dim": P}, "train": {"epochs": 1, "batch_size": 50}}),
                         InProcessTransport(), BlobSource(num_parties=M, num_train=N), progress=False).run()
    assert s["epsilon"] > with_secagg.summary["epsilon"]  # the server sees each party's counts alone
