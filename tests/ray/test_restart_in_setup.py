"""A party whose host dies during key set-up or PSI is restarted like a failure in training
(train.on_failure: restart): the host is recreated, the set-up redone, and the run trains; before,
a death before the first epoch ended the run whatever on_failure said."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401
from tests.support.party_data import write_blob_parties
from vfl.core.errors import PartyFailure
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime.faults import FAULT_ENV
from vfl.runtime.transport.ray_transport import RayTransport

pytestmark = [pytest.mark.ray]
M = 3


def _cfg(on_failure: str):
    return load_run_config({"strategy": "pbm", "num_parties": M, "seed": 5, "params": {"b": 8, "secagg": True},
                            "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                            "train": {"epochs": 1, "batch_size": 40, "on_failure": on_failure, "max_restarts": 1},
                            "transport": {"kind": "ray", "parties_per_actor": 1, "cpus_per_actor": 0.1}})


def _run(tmp_path, monkeypatch, on_failure: str):
    data, _ = write_blob_parties(tmp_path / "files", num_parties=M, overlap=0.8)
    monkeypatch.setenv(FAULT_ENV, "party1@setup:0:0")  # party1's host dies in its first set-up message
    transport = RayTransport()
    spawn = transport._spawn

    def spawn_once(group):  # only the first host of party1 gets the fault: its replacement lives
        actor = spawn(group)
        if "parties-1" == group.name:
            monkeypatch.delenv(FAULT_ENV, raising=False)
        return actor

    monkeypatch.setattr(transport, "_spawn", spawn_once)
    try:
        return Engine(_cfg(on_failure), transport, data, progress=False).run()
    finally:
        transport.shutdown()


def test_a_death_in_set_up_is_restarted(tmp_path, monkeypatch, ray_local):
    result = _run(tmp_path, monkeypatch, "restart")
    (restart,) = result.summary["restarts"]
    assert restart["epoch"] == -1 and "party1" in restart["party"] and "setup" in restart["round"]
    assert result.summary["epochs"] == 1 and result.summary["psi_intersection_size"] > 0


def test_the_control_on_failure_fail_ends_the_run(tmp_path, monkeypatch, ray_local):
    with pytest.raises(PartyFailure, match="party1"):
        _run(tmp_path, monkeypatch, "fail")
