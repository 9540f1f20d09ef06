"""The product path: parties and server as long-lived Ray actors (marker ``ray``)."""

from __future__ import annotations

import dataclasses

import pytest

import strategies  # noqa: F401
from tests.support.helpers import BlobSource
from vfl.core.errors import PartyFailure
from vfl.engine.engine import Engine
from vfl.engine.rundir import RunDir
from vfl.engine.schema import load_run_config
from vfl.runtime.transport.inprocess import InProcessTransport
from vfl.runtime.transport.ray_transport import RayTransport

pytestmark = pytest.mark.ray


def _cfg(**transport):
    return load_run_config({"num_parties": 3, "seed": 1, "train": {"epochs": 2, "batch_size": 48, "lr": 0.05},
                            "transport": {"kind": "ray", **transport}})


def test_two_epochs_over_ray_match_inprocess(ray_local, tmp_path):
    cfg = _cfg(cpus_per_actor=0.1, max_actors=1)
    ray_run = Engine(cfg, RayTransport(), BlobSource(num_parties=3), progress=False)
    try:
        res = ray_run.run()
        actors = ray_run.transport.actors
        assert set(actors) == {"server", "parties-0"}  # 3 parties share one actor
    finally:
        ray_run.transport.shutdown()
    ref = Engine(cfg, InProcessTransport(), BlobSource(num_parties=3), progress=False).run()
    assert res.summary["transport"] == "ray" and res.summary["epochs"] == 2
    assert res.summary["total_bytes_up"] > 0
    assert res.summary["messages_up"] == ref.summary["messages_up"]
    assert res.summary["payload_bytes_up"] == ref.summary["payload_bytes_up"]
    for a, b in zip(res.history, ref.history, strict=True):
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-4)


def test_dead_party_actor_is_a_typed_failure_and_checkpoint_survives(ray_local, tmp_path):
    cfg = dataclasses.replace(_cfg(parties_per_actor=1), train=dataclasses.replace(
        _cfg().train, on_failure="fail"))  # restart (the default over Ray) is tested in test_restart_ray
    transport = RayTransport()

    def kill_party1(epoch, record, engine):
        if epoch == 0:
            transport.kill("parties-1")

    run_dir = RunDir(tmp_path)
    run_dir.write_config(cfg.to_dict())
    engine = Engine(cfg, transport, BlobSource(num_parties=3), run_dir=run_dir, progress=False,
                    on_epoch_end=kill_party1)
    try:
        with pytest.raises(PartyFailure) as exc:
            engine.run()
    finally:
        transport.shutdown()
    assert exc.value.party == "party1"
    assert exc.value.round.startswith("train:1:")
    nodes, state = run_dir.latest_checkpoint()
    assert state["epoch"] == 0 and set(nodes) == {0, 1, 2, 3}
