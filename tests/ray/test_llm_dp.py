"""privacy.bottom_dp on split LLMs (split-lora, p3eft, head-only): the tests over Ray actors."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401
from tests.unit.llm.test_llm_dp import DP  # noqa: F401
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.privacy.accounting.scope import SCOPE_LLM_DPSGD
from vfl.runtime.transport.inprocess import InProcessTransport

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.mark.ray
def test_dp_split_lora_over_ray_actors_matches_inprocess(ray_local, llama):
    """The DP client built inside its Ray actor trains as in-process (seeded noise: the same draws)."""
    from simulations.data.source import ConfigDataSource
    from vfl.runtime.transport.ray_transport import RayTransport

    raw = {"name": "dp-ray", "strategy": "split-lora", "num_parties": 1, "seed": 1, "dataset": "rt-polarity",
           "data": {"train_subsample": 32, "test_subsample": 16},
           "train": {"epochs": 1, "batch_size": 16, "optimizer": "sgd", "lr": 0.1},
           "privacy": {"bottom_dp": DP, "noise_rng": "seeded"},
           "params": {"max_len": 16, "leak_window": 16, "lora_rank": 2, "model_dir": llama}}
    cfg = load_run_config({**raw, "transport": {"kind": "ray", "cpus_per_actor": 0.1}})
    engine = Engine(cfg, RayTransport(), ConfigDataSource.from_config(cfg), progress=False)
    try:
        res = engine.run()
    finally:
        engine.transport.shutdown()
    ref = Engine(load_run_config(raw), InProcessTransport(), ConfigDataSource.from_config(cfg), progress=False).run()
    assert res.summary["transport"] == "ray" and res.summary["epsilon_scope"] == SCOPE_LLM_DPSGD
    assert res.summary["epsilon"] == ref.summary["epsilon"]
    for key in ("payload_bytes_up", "payload_bytes_down", "messages_up", "messages_down"):
        assert res.summary[key] == ref.summary[key], key
    assert res.history[0]["train_loss"] == pytest.approx(ref.history[0]["train_loss"], rel=1e-4)
