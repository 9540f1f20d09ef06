"""All actors of a run or none: a request the Ray cluster cannot meet is one line, never a hang."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401
from tests.support.helpers import BlobSource
from vfl.core.errors import TransportError
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime.transport.base import HostGroup
from vfl.runtime.transport.ray_placement import bundle_of, check_fits
from vfl.runtime.transport.ray_transport import RayTransport


def _cfg(**transport):
    return load_run_config({"num_parties": 3, "seed": 1, "train": {"epochs": 1, "batch_size": 48, "lr": 0.05},
                            "transport": {"kind": "ray", "max_actors": 1, **transport}})


def test_bundles_and_the_fit_check_name_the_resource():
    g = HostGroup("parties-0", (), 0.5, 0.0)
    assert bundle_of(g) == {"CPU": 0.5} and bundle_of(HostGroup("server", (), 0.1, 0.25)) == {"CPU": 0.1, "GPU": 0.25}
    check_fits([{"CPU": 1.0}, {"CPU": 1.0}], ["server", "parties-0"], {"CPU": 2.0})
    with pytest.raises(TransportError, match=r"actor server needs GPU=1 \(transport.gpus_per_actor\) but the Ray "
                                             r"cluster has GPU=0 in total"):
        check_fits([{"CPU": 0.1, "GPU": 1.0}], ["server"], {"CPU": 2.0})
    with pytest.raises(TransportError, match=r"3 actors need CPU=3 together .* has CPU=2; lower "
                                             r"transport.cpus_per_actor or transport.max_actors"):
        check_fits([{"CPU": 1.0}] * 3, ["a", "b", "c"], {"CPU": 2.0})


def _start(cfg, **kw):
    engine = Engine(cfg, RayTransport(**kw), BlobSource(num_parties=3), progress=False)
    try:
        return engine.run()
    finally:
        engine.transport.shutdown()


@pytest.mark.ray
def test_a_gpu_the_cluster_does_not_have_is_one_line(ray_local):
    with pytest.raises(TransportError, match="needs GPU=1 .*has GPU=0 in total"):
        _start(_cfg(gpus_per_actor=1.0))
    assert not ray_local.util.placement_group_table() or all(
        p["state"] == "REMOVED" for p in ray_local.util.placement_group_table().values())


@pytest.mark.ray
def test_more_cpus_than_the_cluster_has_together_is_one_line(ray_local):
    with pytest.raises(TransportError, match="2 actors need CPU=3 together"):
        _start(_cfg(cpus_per_actor=1.5))


@pytest.mark.ray
def test_resources_held_elsewhere_time_out_with_what_is_available(ray_local):
    from ray.util.placement_group import placement_group, remove_placement_group

    hog = placement_group([{"CPU": 1.9}])  # another job holds the CPUs the run needs
    ray_local.get(hog.ready(), timeout=60)
    try:
        with pytest.raises(TransportError, match=r"could not reserve 2 actors \(CPU=0.4, GPU=0\) within "
                                                 r"transport.schedule_timeout_s=2"):
            _start(_cfg(cpus_per_actor=0.2), schedule_timeout_s=2)
    finally:
        remove_placement_group(hog)
    res = _start(_cfg(cpus_per_actor=0.2))  # once released, the same run starts and finishes
    assert res.summary["epochs"] == 1
