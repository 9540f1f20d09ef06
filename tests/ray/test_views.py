"""Received-message views (privacy.record_views): off by default, per node, bounded, sampled, no pickle: the tests over Ray actors."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401
from tests.support.helpers import BlobSource
from vfl.engine.engine import Engine
from vfl.engine.rundir import RunDir
from vfl.engine.schema import load_run_config
from vfl.runtime.views import load_views


@pytest.mark.ray
def test_views_come_back_from_ray_actors(tmp_path, ray_local):
    from vfl.runtime.transport.ray_transport import RayTransport

    cfg = load_run_config({"strategy": "npq", "num_parties": 3, "seed": 1,
                           "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                           "train": {"epochs": 1, "batch_size": 50}, "privacy": {"record_views": True}})
    transport = RayTransport()
    engine = Engine(cfg, transport, BlobSource(num_parties=3, num_train=200), run_dir=RunDir(tmp_path), progress=False)
    try:
        engine.run()
    finally:
        transport.shutdown()
    views = load_views(tmp_path)
    assert len(list(views["party2"].select(record="grad"))) == 4
    assert len(list(views["server"].select(name="fused", phase="train"))) == 4
