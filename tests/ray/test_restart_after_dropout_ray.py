"""Over Ray: a restart after a skip-party dropout (party1's actor exits in epoch 0; the server's actor exits in
epoch 1 and is replaced) sets the new SecAgg session up over the survivors and the run finishes; the dropped
party's actor is not brought back (``tests/engine/engine/test_restart_after_dropout.py``: the in-process cases)."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401
from tests.support.helpers import BlobSource
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime.faults import FAULT_ENV
from vfl.runtime.transport.ray_transport import RayTransport

pytestmark = [pytest.mark.ray]
M = 3


@pytest.mark.parametrize("mode", ["semi-honest", "announced"])
def test_a_restart_after_a_dropout_over_ray_sets_up_over_the_survivors(monkeypatch, ray_local, mode):
    monkeypatch.setenv(FAULT_ENV, "party1@0:4,server@1:3")
    cfg = load_run_config({"strategy": "pbm", "num_parties": M, "seed": 4, "params": {"b": 8, "secagg_mode": mode},
                           "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                           "train": {"epochs": 2, "batch_size": 24, "on_dropout": "skip-party",
                                     "on_failure": "restart", "max_restarts": 1},
                           "transport": {"kind": "ray", "parties_per_actor": 1, "cpus_per_actor": 0.1},
                           "privacy": {"colluders": 0}})  # 2 of 3 left: undeclared (t - 1 = 1) parties refuse < 3
    transport = RayTransport()
    spawn = transport._spawn
    started: list[str] = []

    def spawn_once(group):  # the replacement of the server's actor gets no fault (it would die again)
        if group.name in started:
            monkeypatch.delenv(FAULT_ENV, raising=False)
        started.append(group.name)
        return spawn(group)

    monkeypatch.setattr(transport, "_spawn", spawn_once)
    try:
        result = Engine(cfg, transport, BlobSource(num_parties=M, num_train=240, num_test=60), progress=False).run()
        assert [d["party"] for d in result.summary["dropouts"]] == ["party1"]
        (restart,) = result.summary["restarts"]
        assert restart["party"] == "server" and restart["epoch"] == 1 and len(result.history) == 2
        assert sorted(transport.actors) == sorted(n for n in transport.groups if n != "parties-1")  # not brought back
        assert started.count("parties-1") == 1
    finally:
        transport.shutdown()
