"""``ushape-lora`` and ``ushape-p3eft`` over Ray actors (each model server and the client in their own
actors) train as the in-process run does: the same losses, perplexity, bytes and generated answers."""

from __future__ import annotations

import pytest

from simulations.data.source import ConfigDataSource
from tests.engine.llm.test_ushape import ushape_config
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime.transport.inprocess import InProcessTransport

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.mark.ray
@pytest.mark.parametrize(("strategy", "actors"), [("ushape-lora", {"server", "parties-0"}),
                                                  ("ushape-p3eft", {"server0", "server1", "parties-0"})])
def test_ushape_over_ray_actors_matches_inprocess(ray_local, llama, strategy, actors):
    """``ushape-p3eft``: the two model servers in their own actors, answering their pieces in parallel."""
    from vfl.runtime.transport.ray_transport import RayTransport

    base = {**ushape_config(llama, epochs=2), "strategy": strategy}
    cfg = load_run_config({**base, "transport": {"kind": "ray", "cpus_per_actor": 0.1}})
    engine = Engine(cfg, RayTransport(), ConfigDataSource.from_config(cfg), progress=False)
    try:
        res = engine.run()
        assert set(engine.transport.actors) == actors
    finally:
        engine.transport.shutdown()
    ref = Engine(load_run_config(base), InProcessTransport(), ConfigDataSource.from_config(cfg), progress=False).run()
    assert res.summary["transport"] == "ray"
    for key in ("payload_bytes_up", "payload_bytes_down", "messages_up", "messages_down"):
        assert res.summary[key] == ref.summary[key], key
    for a, b in zip(res.history, ref.history, strict=True):
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-4)
    assert res.history[-1]["train_loss"] < res.history[0]["train_loss"]
    assert res.summary["test_ppl"] == pytest.approx(ref.summary["test_ppl"], rel=1e-4)
    assert [x["generation"] for x in res.summary["samples"]] == [x["generation"] for x in ref.summary["samples"]]
