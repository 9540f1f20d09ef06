"""``transport.resources.<profile>.{cpus,gpus}``: per-profile actor resources, packing and the fit check."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401  (registers the strategies)
from vfl.config.resources import actor_resources, profile_resources
from vfl.core.errors import ConfigError, TransportError
from vfl.engine.schema import load_run_config
from vfl.engine.strategy import STRATEGIES
from vfl.runtime.node import NodeSpec
from vfl.runtime.transport.placement import pack_nodes, place
from vfl.runtime.transport.ray_placement import bundle_of, check_fits


def _cfg(strategy="npq", num_parties=4, **transport):
    return load_run_config({"strategy": strategy, "num_parties": num_parties, "dataset": "digits",
                            "transport": {"kind": "ray", **transport}})


def _groups(cfg):
    strategy = STRATEGIES.get(cfg.strategy)(cfg)
    return {g.name: g for g in place(strategy.layout(), cfg.transport, server_profile=strategy.server_profile)}


def test_server_and_party_roles_override_the_per_actor_defaults():
    cfg = _cfg(cpus_per_actor=0.2, gpus_per_actor=0.0, max_actors=2,
               resources={"server": {"cpus": 0.5, "gpus": 1}, "party": {"cpus": 0.25}})
    groups = _groups(cfg)
    assert sorted(groups) == ["parties-0", "parties-1", "server"]
    server, parties = groups["server"], [groups["parties-0"], groups["parties-1"]]
    assert (server.num_cpus, server.num_gpus) == (0.5, 1.0)
    assert server.keys == ("transport.resources.server.cpus", "transport.resources.server.gpus")
    assert all((p.num_cpus, p.num_gpus) == (0.25, 0.0) for p in parties)
    assert all(p.keys == ("transport.resources.party.cpus", "transport.gpus_per_actor") for p in parties)
    assert [s.role for s in server.specs] == ["server"] and all(s.role == "party" for p in parties for s in p.specs)


def test_unset_roles_keep_cpus_per_actor_and_gpus_per_actor():
    groups = _groups(_cfg(cpus_per_actor=0.3, gpus_per_actor=0.5))
    assert {(g.num_cpus, g.num_gpus) for g in groups.values()} == {(0.3, 0.5)}
    assert {g.keys for g in groups.values()} == {("transport.cpus_per_actor", "transport.gpus_per_actor")}


def test_model_server_is_the_profile_of_the_llm_server_side_nodes():
    assert STRATEGIES.get("sap").server_profile == "model_server" and STRATEGIES.get("npq").server_profile == "server"
    specs = [NodeSpec(0, "server", "vendor", "vendor"), NodeSpec(1, "party", "customer", "customer")]
    t = _cfg(resources={"model_server": {"gpus": 1}, "server": {"gpus": 0.25}}).transport
    groups = {g.name: g for g in pack_nodes(specs, max_actors=8, transport=t, server_profile="model_server")}
    assert groups["vendor"].num_gpus == 1.0 and groups["vendor"].keys[1] == "transport.resources.model_server.gpus"
    assert groups["parties-0"].num_gpus == 0.0  # the customer is a party; the `server` profile is not used here


def test_an_actor_of_several_roles_takes_the_most_per_resource():
    t = _cfg(resources={"server": {"cpus": 2.0, "gpus": 0.0}, "party": {"cpus": 0.5, "gpus": 0.5}}).transport
    both = actor_resources(t, ["server", "party"])
    assert (both.cpus, both.gpus) == (2.0, 0.5)
    assert (both.cpu_key, both.gpu_key) == ("transport.resources.server.cpus", "transport.resources.party.gpus")
    assert profile_resources(t, "model_server").cpu_key == "transport.cpus_per_actor"


def test_pack_nodes_without_a_config_is_as_before():
    specs = [NodeSpec(0, "server", "server", "server")] + [NodeSpec(i, "party", f"p{i}", "parties") for i in (1, 2)]
    groups = pack_nodes(specs, max_actors=1, cpus_per_actor=0.7, gpus_per_actor=0.1)
    assert [(g.name, g.num_cpus, g.num_gpus, len(g.specs)) for g in groups] == [("server", 0.7, 0.1, 1),
                                                                                 ("parties-0", 0.7, 0.1, 2)]


def test_an_impossible_request_names_the_role_key():
    groups = list(_groups(_cfg(max_actors=1, resources={"server": {"gpus": 1}, "party": {"cpus": 1.5}})).values())
    bundles, names, keys = [bundle_of(g) for g in groups], [g.name for g in groups], [g.keys for g in groups]
    with pytest.raises(TransportError, match=r"actor server needs GPU=1 \(transport.resources.server.gpus\) but the "
                                             r"Ray cluster has GPU=0 in total"):
        check_fits(bundles, names, {"CPU": 8.0}, keys)
    with pytest.raises(TransportError, match=r"actor parties-0 needs CPU=1.5 \(transport.resources.party.cpus\)"):
        check_fits(bundles, names, {"CPU": 1.0, "GPU": 1.0}, keys)
    with pytest.raises(TransportError, match=r"2 actors need CPU=1.6 together \(transport.cpus_per_actor or "
                                             r"transport.resources.party.cpus per actor\).*lower transport"):
        check_fits(bundles, names, {"CPU": 1.5, "GPU": 1.0}, keys)
    check_fits(bundles, names, {"CPU": 1.6, "GPU": 1.0}, keys)


@pytest.mark.parametrize("bad, key", [({"server": {"cpus": 0}}, "transport.resources.server.cpus"),
                                      ({"party": {"gpus": -1}}, "transport.resources.party.gpus"),
                                      ({"model_server": {"cpu": 1}}, "transport.resources.model_server.cpu"),
                                      ({"vendor": {"cpus": 1}}, "transport.resources.vendor")])
def test_bad_resources_are_named(bad, key):
    with pytest.raises(ConfigError) as err:
        _cfg(resources=bad)
    assert err.value.key == key


def test_cuda_over_ray_needs_a_gpu_in_every_role_it_places():
    with pytest.raises(ConfigError, match="got 0 for the party actors") as err:
        load_run_config({"num_parties": 2, "train": {"device": "cuda"},
                         "transport": {"kind": "ray", "resources": {"server": {"gpus": 1}}}})
    assert err.value.key == "transport.gpus_per_actor"
    with pytest.raises(ConfigError, match="got 0 for the server actors") as err:
        load_run_config({"num_parties": 2, "train": {"device": "cuda"},
                         "transport": {"kind": "ray", "gpus_per_actor": 1, "resources": {"server": {"gpus": 0}}}})
    assert err.value.key == "transport.resources.server.gpus"
    cfg = load_run_config({"num_parties": 2, "train": {"device": "cuda"},
                           "transport": {"kind": "ray", "resources": {"server": {"gpus": 1}, "party": {"gpus": 0.5}}}})
    assert cfg.transport.resources.party.gpus == 0.5
