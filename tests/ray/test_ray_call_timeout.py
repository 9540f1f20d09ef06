"""transport.timeout_s: a host that never answers an unguarded Ray call (here the SecAgg key set-up)
fails the run with one PartyFailure naming the party, the round and the key, instead of a hang."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401
from tests.support.helpers import BlobSource
from vfl.core.errors import PartyFailure
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime.faults import FAULT_ENV
from vfl.runtime.transport.ray_transport import RayTransport

pytestmark = [pytest.mark.ray]


def test_a_host_that_hangs_in_set_up_fails_after_timeout_s(ray_local, monkeypatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "party1@setup:0:0!hang")
    cfg = load_run_config({"strategy": "npq+secagg", "num_parties": 3, "seed": 0,
                           "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                           "train": {"epochs": 1, "batch_size": 50},
                           "transport": {"kind": "ray", "parties_per_actor": 1, "timeout_s": 5}})
    transport = RayTransport(timeout_s=cfg.transport.timeout_s)
    try:
        with pytest.raises(PartyFailure) as err:
            Engine(cfg, transport, BlobSource(num_parties=3, num_train=100), progress=False).run()
    finally:
        transport.shutdown()
    msg = str(err.value)
    # every host still busy is named (the others wait on party1's output), with the round and the key
    assert "party1" in msg and "transport.timeout_s=5" in msg and "round setup" in msg
