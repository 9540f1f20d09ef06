"""End to end over Ray: a split-LLM strategy over Ray actors matches the in-process run."""

from __future__ import annotations

import pytest

from simulations.data.source import ConfigDataSource
from tests.e2e.test_llm_strategies import RUNS, run_config  # noqa: F401
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime.transport.inprocess import InProcessTransport

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.mark.ray
def test_p3eft_over_ray_actors_matches_inprocess(ray_local, tiny_bert):
    from vfl.runtime.transport.ray_transport import RayTransport

    cfg = load_run_config({**run_config("p3eft", {**RUNS["p3eft"], "model_dir": tiny_bert}),
                           "transport": {"kind": "ray", "cpus_per_actor": 0.1},
                           "privacy": {"noise_rng": "seeded"}})  # the same mixing weights and pieces in both runs
    engine = Engine(cfg, RayTransport(), ConfigDataSource.from_config(cfg), progress=False)  # each actor loads it
    try:
        res = engine.run()
        assert set(engine.transport.actors) == {"server-0", "server-1", "parties-0"}  # one actor per server
    finally:
        engine.transport.shutdown()
    ref = Engine(cfg, InProcessTransport(), ConfigDataSource.from_config(cfg), progress=False).run()
    assert res.summary["transport"] == "ray"
    for key in ("payload_bytes_up", "payload_bytes_down", "messages_up", "messages_down"):
        assert res.summary[key] == ref.summary[key], key
    assert res.history[0]["train_loss"] == pytest.approx(ref.history[0]["train_loss"], rel=1e-4)
    assert res.summary["leak"] == pytest.approx(ref.summary["leak"], abs=0.05)
