"""Per-role resources over real Ray actors: the server's actor and the parties' actors reserve what
``transport.resources.<profile>`` says, as Ray itself reports it inside each actor."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401
from tests.support.helpers import BlobSource
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime.transport.ray_transport import RayTransport


@pytest.mark.ray
def test_each_actor_reserves_its_roles_resources(ray_local):
    cfg = load_run_config({"num_parties": 3, "seed": 1, "train": {"epochs": 1, "batch_size": 48, "lr": 0.05,
                                                                  "device": "auto"},
                           "transport": {"kind": "ray", "max_actors": 2, "cpus_per_actor": 0.1,
                                         "resources": {"server": {"cpus": 0.5}, "party": {"cpus": 0.25}}}})
    seen: dict[str, dict] = {}

    def started(engine: Engine) -> None:
        for group in engine.groups:
            seen[group.name] = engine.transport.host_call(group.name, "assigned_resources")
            node = group.specs[0].node_id  # the device `auto` resolved to inside that actor
            seen[group.name]["device"] = engine.transport.call(group.name, node, "__getattribute__", "device")

    engine = Engine(cfg, RayTransport(), BlobSource(num_parties=3), progress=False, on_started=started)
    try:
        result = engine.run()
    finally:
        engine.transport.shutdown()
    assert result.summary["epochs"] == 1
    assert sorted(seen) == ["parties-0", "parties-1", "server"]
    assert seen["server"]["resources"] == {"CPU": 0.5}
    assert seen["parties-0"]["resources"] == {"CPU": 0.25} and seen["parties-1"]["resources"] == {"CPU": 0.25}
    assert all(s["gpu_ids"] == [] and s["device"] == "cpu" for s in seen.values())  # no GPU reserved: `auto` = cpu
